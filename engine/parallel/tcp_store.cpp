// The rendezvous key-value store over TCP: server (a poll() loop on one thread) and the Gloo
// Store client. See tcp_store.h for the wire format.
#include "engine/parallel/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace tessera {

namespace {

enum : uint8_t { kOpSet = 1, kOpSetNoReply = 2, kOpGet = 3 };
constexpr uint32_t kMaxKeyBytes = 1u << 20;
constexpr uint32_t kMaxValueBytes = 64u << 20;

void put_u32(std::string& s, uint32_t v) {
    for (int i = 0; i < 4; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
}

uint32_t get_u32(const char* p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(uint8_t(p[i])) << (8 * i);
    return v;
}

// Whole buffer or false (peer gone).
bool write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= size_t(w);
    }
    return true;
}

// Exactly n bytes or false (peer closed / error / deadline passed).
bool read_all(int fd, char* p, size_t n, std::chrono::steady_clock::time_point deadline) {
    while (n > 0) {
        int left_ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                              deadline - std::chrono::steady_clock::now())
                              .count());
        if (left_ms <= 0) return false;
        pollfd pfd{fd, POLLIN, 0};
        int pr = ::poll(&pfd, 1, left_ms);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) return false;
        ssize_t r = ::recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= size_t(r);
    }
    return true;
}

void set_cloexec(int fd) {
    ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Server

TcpStoreServer::TcpStoreServer(const std::string& bind_addr, int port) {
    listen_fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    TS_CHECK(listen_fd_.get() >= 0, "socket(): ", std::strerror(errno));
    int one = 1;
    ::setsockopt(listen_fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(uint16_t(port));
    if (::inet_pton(AF_INET, bind_addr.c_str(), &sa.sin_addr) != 1) {
        throw InputError(str_cat("rendezvous store: bind address '", bind_addr,
                                 "' is not an IPv4 address (expected e.g. 0.0.0.0 or 10.0.0.1)"));
    }
    if (::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
        ::listen(listen_fd_.get(), 1024) != 0) {
        int e = errno;
        throw Error(str_cat("rendezvous store: cannot listen on ", bind_addr, ":", port, ": ",
                            std::strerror(e)));
    }
    socklen_t len = sizeof(sa);
    ::getsockname(listen_fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    TS_CHECK(unique_pipe(wake_pipe_, O_CLOEXEC), "pipe2(): ", std::strerror(errno));
    thread_ = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {  // then the members close the pipe and the socket
    char c = 'x';
    (void)!::write(wake_pipe_.write.get(), &c, 1);
    if (thread_.joinable()) thread_.join();
}

void TcpStoreServer::clear() {
    std::lock_guard<std::mutex> lock(mu_);
    kv_.clear();
}

size_t TcpStoreServer::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return kv_.size();
}

void TcpStoreServer::serve() {
    struct Client {
        UniqueFd fd;
        std::string in;  // bytes received, not yet parsed
    };
    std::vector<Client> clients;
    std::vector<pollfd> pfds;
    for (;;) {
        pfds.clear();
        pfds.push_back({wake_pipe_.read.get(), POLLIN, 0});
        pfds.push_back({listen_fd_.get(), POLLIN, 0});
        for (auto& c : clients) pfds.push_back({c.fd.get(), POLLIN, 0});
        int pr = ::poll(pfds.data(), pfds.size(), -1);
        if (pr < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (pfds[0].revents) break;  // destructor
        if (pfds[1].revents & POLLIN) {
            UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
            if (fd) {
                int one = 1;
                ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                clients.push_back({std::move(fd), {}});
            }
        }
        // Service clients (indices in pfds are offset by 2; new clients were appended after).
        std::vector<size_t> dead;
        for (size_t i = 2; i < pfds.size(); ++i) {
            if (!pfds[i].revents) continue;
            Client& c = clients[i - 2];
            char buf[65536];
            ssize_t r = ::recv(c.fd.get(), buf, sizeof(buf), 0);
            if (r <= 0) {
                if (r < 0 && errno == EINTR) continue;
                dead.push_back(i - 2);
                continue;
            }
            c.in.append(buf, size_t(r));
            // Parse every complete request.
            bool bad = false;
            size_t pos = 0;
            for (;;) {
                if (c.in.size() - pos < 9) break;
                uint8_t op = uint8_t(c.in[pos]);
                uint32_t klen = get_u32(c.in.data() + pos + 1);
                if (klen > kMaxKeyBytes || (op != kOpSet && op != kOpSetNoReply && op != kOpGet)) {
                    bad = true;
                    break;
                }
                if (c.in.size() - pos < 9 + size_t(klen)) break;
                uint32_t vlen = get_u32(c.in.data() + pos + 5 + klen);
                if (vlen > kMaxValueBytes) {
                    bad = true;
                    break;
                }
                size_t total = 9 + size_t(klen) + vlen;
                if (c.in.size() - pos < total) break;
                std::string key = c.in.substr(pos + 5, klen);
                const char* val = c.in.data() + pos + 9 + klen;
                std::string reply;
                if (op == kOpGet) {
                    std::lock_guard<std::mutex> lock(mu_);
                    auto it = kv_.find(key);
                    reply.push_back(it == kv_.end() ? 0 : 1);
                    put_u32(reply, it == kv_.end() ? 0 : uint32_t(it->second.size()));
                    if (it != kv_.end()) reply.append(it->second.data(), it->second.size());
                } else {
                    std::lock_guard<std::mutex> lock(mu_);
                    kv_[key] = std::vector<char>(val, val + vlen);
                    if (op == kOpSet) reply.push_back(1);
                }
                pos += total;
                if (!reply.empty() && !write_all(c.fd.get(), reply.data(), reply.size())) {
                    bad = true;
                    break;
                }
            }
            c.in.erase(0, pos);
            if (bad) dead.push_back(i - 2);
        }
        for (auto it = dead.rbegin(); it != dead.rend(); ++it)
            clients.erase(clients.begin() + long(*it));  // closes its socket
    }
}  // the clients' sockets close with `clients`

// ------------------------------------------------------------------------------------------------
// Client

TcpStore::TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout)
    : addr_(str_cat(host, ":", port)), timeout_(timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string last_error = "no attempt";
    for (;;) {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* raw = nullptr;
        int gr = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &raw);
        AddrInfoPtr res(raw);
        if (gr != 0) {
            last_error = ::gai_strerror(gr);
        } else {
            for (addrinfo* ai = res.get(); ai; ai = ai->ai_next) {
                UniqueFd fd(
                    ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
                if (!fd) continue;
                if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
                    fd_ = std::move(fd);
                    break;
                }
                last_error = std::strerror(errno);
            }
        }
        if (fd_) break;
        if (std::chrono::steady_clock::now() >= deadline)
            throw Error(str_cat("rendezvous store ", addr_, " unreachable after ", timeout.count(),
                                " ms (", last_error,
                                "); check MASTER_ADDR/MASTER_PORT and that rank 0 is running"));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    int one = 1;
    ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    set_cloexec(fd_.get());
}

TcpStore::~TcpStore() = default;  // fd_ closes the connection

void TcpStore::request(uint8_t op, const std::string& key, const char* val, size_t n) {
    std::string msg;
    msg.reserve(9 + key.size() + n);
    msg.push_back(char(op));
    put_u32(msg, uint32_t(key.size()));
    msg += key;
    put_u32(msg, uint32_t(n));
    msg.append(val, n);
    if (!write_all(fd_.get(), msg.data(), msg.size()))
        throw Error(
            str_cat("rendezvous store ", addr_, ": connection lost while sending '", key, "'"));
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
    request(kOpSet, key, data.data(), data.size());
    char ok = 0;
    if (!read_all(fd_.get(), &ok, 1, std::chrono::steady_clock::now() + timeout_))
        throw Error(str_cat("rendezvous store ", addr_, ": no reply to set '", key, "' within ",
                            timeout_.count(), " ms"));
}

void TcpStore::set_noreply(const std::string& key, const std::string& value) {
    request(kOpSetNoReply, key, value.data(), value.size());
}

bool TcpStore::try_get(const std::string& key, std::vector<char>* out) {
    request(kOpGet, key, nullptr, 0);
    char head[5];
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    if (!read_all(fd_.get(), head, 5, deadline))
        throw Error(str_cat("rendezvous store ", addr_, ": no reply to get '", key, "'"));
    uint32_t n = get_u32(head + 1);
    std::vector<char> v(n);
    if (n > 0 && !read_all(fd_.get(), v.data(), n, deadline))
        throw Error(str_cat("rendezvous store ", addr_, ": truncated reply to get '", key, "'"));
    if (head[0] == 0) return false;
    if (out) *out = std::move(v);
    return true;
}

std::vector<char> TcpStore::get(const std::string& key) {
    wait({key}, timeout_);
    std::vector<char> v;
    TS_CHECK(try_get(key, &v), "key vanished: ", key);
    return v;
}

void TcpStore::wait(const std::vector<std::string>& keys) {
    wait(keys, timeout_);
}

void TcpStore::wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::milliseconds(1);
    for (const auto& key : keys) {
        while (!try_get(key, nullptr)) {
            if (std::chrono::steady_clock::now() >= deadline)
                throw Error(str_cat("rendezvous store ", addr_, ": key '", key,
                                    "' did not appear within ", timeout.count(),
                                    " ms (a rank has not joined)"));
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::milliseconds(20));
        }
    }
}

}  // namespace tessera
