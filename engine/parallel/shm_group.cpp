// Shared-memory collectives for members on one host. See shm_group.h.
#include "engine/parallel/shm_group.h"

#include <fcntl.h>
#include <gloo/rendezvous/store.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/unique_fd.h"

namespace tessera {

namespace {

constexpr size_t kLine = 64;

struct alignas(kLine) Counter {
    std::atomic<uint64_t> phase{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared counters must be lock-free");

// The owning types of the segment (scripts/check_raw_handles.sh): its mapping, and its name,
// unlinked once every member has mapped it (or given up).
struct Mapping {
    void* base = MAP_FAILED;
    size_t bytes = 0;
    Mapping() = default;
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    ~Mapping() {
        if (base != MAP_FAILED) munmap(base, bytes);
    }
    bool ok() const { return base != MAP_FAILED; }
    void reset() {
        if (base != MAP_FAILED) munmap(base, bytes);
        base = MAP_FAILED;
    }
    void* release() { return std::exchange(base, MAP_FAILED); }
};

struct SegmentName {
    std::string name;  // empty: nothing to unlink
    ~SegmentName() {
        if (!name.empty()) shm_unlink(name.c_str());
    }
};

std::vector<char> bytes_of(const std::string& s) {
    return {s.begin(), s.end()};
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

}  // namespace

// The segment: a token (checked by every member: the name reached the same memory), the
// counters, then two buffers of `size` slots and two result buffers.
struct ShmGroup::Header {
    char token[32];
    struct Member {
        int32_t pid;
        uint64_t start;  // the process's start time (/proc/PID/stat): a reused pid is not it
    } member[kMaxMembers];
    Counter arrive[kMaxMembers];
    Counter done[kMaxMembers];
};

namespace {
// Field 22 of /proc/PID/stat (clock ticks after boot); 0 when there is no such process here, or
// it has exited.
uint64_t process_start(int pid) {
    std::ifstream f(str_cat("/proc/", pid, "/stat"));
    std::string line;
    if (!std::getline(f, line)) return 0;
    const size_t paren = line.rfind(')');  // the command may hold spaces and parentheses
    if (paren == std::string::npos) return 0;
    std::istringstream rest(line.substr(paren + 2));
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i) {
        if (i == 3 && (field == "Z" || field == "X")) return 0;  // exited, not yet reaped
        if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
    }
    return 0;
}
}  // namespace

// A ring's two positions (bytes written and taken since the start), each on a line of its own.
struct ShmGroup::Ring {
    alignas(kLine) std::atomic<uint64_t> head{0};
    alignas(kLine) std::atomic<uint64_t> tail{0};
};

namespace {
constexpr int64_t kMessageHeader = 64;  // tag and length, then the payload from the next line

struct MessageHeader {
    uint64_t tag;
    int64_t bytes;
};

int64_t message_span(int64_t bytes) {  // a message's bytes in its ring, lines whole
    return kMessageHeader + (bytes + int64_t(kLine) - 1) / int64_t(kLine) * int64_t(kLine);
}

size_t header_bytes() {
    return ((sizeof(ShmGroup::Header) + kLine - 1) / kLine) * kLine;
}

size_t channels(int size) {
    return size_t(size) * size_t(size - 1);
}

// The segment: the header, then two buffers of `size` slots and two result buffers (a group for
// collectives), or a Ring for every ordered pair of members and their bytes (point to point).
size_t segment_bytes(int size, int64_t ring_bytes) {
    if (ring_bytes > 0)
        return header_bytes() + channels(size) * (sizeof(ShmGroup::Ring) + size_t(ring_bytes));
    const size_t slot = sizeof(float) * ShmGroup::kSlotFloats;
    return header_bytes() + slot * 2 * (size_t(size) + 1);
}

size_t channel(int size, int from, int to) {
    return size_t(from) * size_t(size - 1) + size_t(to < from ? to : to - 1);
}

ShmGroup::Ring* rings(void* base) {  // channel c's positions are rings(base)[c]
    return reinterpret_cast<ShmGroup::Ring*>(static_cast<char*>(base) + header_bytes());
}

char* channel_data(void* base, int size, int64_t ring_bytes, int from, int to) {
    return static_cast<char*>(base) + header_bytes() + channels(size) * sizeof(ShmGroup::Ring) +
           channel(size, from, to) * size_t(ring_bytes);
}

std::string length_mismatch(int peer, int64_t sent, uint64_t tag, int64_t posted) {
    return str_cat("shared memory: group rank ", peer, " sent ", sent, " bytes with tag ", tag,
                   " to a receive of ", posted);
}

// data[pos, pos + n) of a ring of `size` bytes, wrapping at its end
void ring_put(char* ring, int64_t size, uint64_t pos, const void* data, int64_t n) {
    if (n == 0) return;  // data may be null
    const int64_t at = int64_t(pos % uint64_t(size)), first = std::min(n, size - at);
    std::memcpy(ring + at, data, size_t(first));
    if (first < n) std::memcpy(ring, static_cast<const char*>(data) + first, size_t(n - first));
}

void ring_get(void* data, const char* ring, int64_t size, uint64_t pos, int64_t n) {
    if (n == 0) return;
    const int64_t at = int64_t(pos % uint64_t(size)), first = std::min(n, size - at);
    std::memcpy(data, ring + at, size_t(first));
    if (first < n) std::memcpy(static_cast<char*>(data) + first, ring, size_t(n - first));
}
}  // namespace

ShmGroup::ShmGroup(void* base, size_t bytes, int rank, int size, std::chrono::milliseconds timeout,
                   int64_t ring_bytes)
    : base_(base),
      bytes_(bytes),
      rank_(rank),
      size_(size),
      timeout_(timeout),
      ring_bytes_(ring_bytes),
      set_aside_(size_t(size)),
      tickets_(size_t(size), 0),
      written_(size_t(size), 0) {}

ShmGroup::~ShmGroup() {
    // messages still set aside go out while their peers take them, for a moment at most
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (int q = 0; q < size_; ++q) {
        while (!set_aside_[size_t(q)].empty() && std::chrono::steady_clock::now() < until) {
            p2p_flush(q);
            if (!set_aside_[size_t(q)].empty())
                std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
    Mapping m;  // the segment's owner
    m.base = base_;
    m.bytes = bytes_;
}

std::unique_ptr<ShmGroup> ShmGroup::join(gloo::rendezvous::Store& store, const std::string& key,
                                         int rank, int size, std::chrono::milliseconds timeout,
                                         int64_t ring_bytes) {
    if (size < 2 || size > kMaxMembers || ring_bytes < 0 || ring_bytes % int64_t(kLine) != 0)
        return nullptr;
    if (const char* e = std::getenv("TESSERA_SHM"); e && std::string(e) == "0") return nullptr;
    const size_t bytes = segment_bytes(size, ring_bytes);
    // Member 0 creates a fresh segment, writes a random token into it and names both in the
    // store; the others map it and check the token (a member in another IPC namespace, or on
    // another host with a /dev/shm of its own, would map something else or nothing). Every
    // member then reports, and the group is used only if all could.
    Mapping map;
    map.bytes = bytes;
    SegmentName created;  // member 0's: unlinked when join returns, every member having answered
    if (rank == 0) {
        std::random_device rd;
        const std::string token = str_cat(std::hex, rd(), rd(), rd());
        const std::string name = str_cat("/tessera-", getpid(), "-", token.substr(0, 12));
        UniqueFd fd(shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600));
        if (fd.get() >= 0) created.name = name;
        // allocate every page now: a /dev/shm too small for it fails here, not with a SIGBUS
        // in the middle of a collective
        if (fd.get() >= 0 && posix_fallocate(fd.get(), 0, off_t(bytes)) == 0)
            map.base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
        if (map.ok()) {
            auto* h = new (map.base) Header();
            std::strncpy(h->token, token.c_str(), sizeof(h->token) - 1);
            for (size_t c = 0; ring_bytes > 0 && c < channels(size); ++c)
                new (rings(map.base) + c) Ring();
        }
        store.set(key + "/shm", bytes_of(map.ok() ? name + " " + token : "-"));
    } else {
        const std::vector<char> v = store.get(key + "/shm");
        const std::string s(v.begin(), v.end());
        const size_t sp = s.find(' ');
        if (sp != std::string::npos) {
            const std::string token = s.substr(sp + 1);
            UniqueFd fd(shm_open(s.substr(0, sp).c_str(), O_RDWR, 0600));
            if (fd.get() >= 0)
                map.base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
            if (map.ok() && std::strncmp(static_cast<Header*>(map.base)->token, token.c_str(),
                                         sizeof(Header::token) - 1) != 0)
                map.reset();
        }
    }
    if (map.ok()) {
        auto& m = static_cast<Header*>(map.base)->member[rank];
        m.pid = getpid();
        m.start = process_start(getpid());
        // this member's rings mapped now for what it does with them: a page touched for the
        // first time in the middle of a message costs 10-20 µs on the 2-core machine (a 128 KB
        // send took 0.4 ms); written where it sends, which nobody does before every member has
        // answered, read where it receives
        const long page = sysconf(_SC_PAGESIZE);
        for (int q = 0; ring_bytes > 0 && q < size; ++q) {
            if (q == rank) continue;
            char* out = channel_data(map.base, size, ring_bytes, rank, q);
            const char* in = channel_data(map.base, size, ring_bytes, q, rank);
            for (int64_t at = 0; at < ring_bytes; at += page) {
                out[at] = 0;
                (void)*static_cast<const volatile char*>(in + at);
            }
        }
    }
    store.set(str_cat(key, "/shm_ok/", rank), bytes_of(map.ok() ? "1" : "0"));
    bool all = true;
    for (int r = 0; r < size; ++r)
        all = all && store.get(str_cat(key, "/shm_ok/", r)) == bytes_of("1");
    if (!all) return nullptr;
    // a member that exits mid-collective is noticed within milliseconds (as Gloo notices a
    // closed socket) where every member's process is visible here, as in one launcher's job;
    // in another pid namespace only the timeout can tell
    bool watch = true;
    for (int r = 0; r < size; ++r) {
        const auto& m = static_cast<Header*>(map.base)->member[r];
        watch = watch && m.start != 0 && process_start(m.pid) == m.start;
    }
    void* base = map.release();
    auto g = std::unique_ptr<ShmGroup>(new ShmGroup(base, bytes, rank, size, timeout, ring_bytes));
    g->watch_ = watch;
    return g;
}

float* ShmGroup::slot(int buffer, int member) const {
    char* data = static_cast<char*>(base_) + header_bytes();
    return reinterpret_cast<float*>(data) +
           (size_t(buffer) * size_t(size_) + size_t(member)) * size_t(kSlotFloats);
}

float* ShmGroup::result(int buffer) const {
    return slot(0, 0) + (size_t(2) * size_t(size_) + size_t(buffer)) * size_t(kSlotFloats);
}

uint64_t ShmGroup::begin_phase() {
    return ++phase_;
}

void ShmGroup::arrive(uint64_t phase) {
    static_cast<Header*>(base_)->arrive[rank_].phase.store(phase, std::memory_order_release);
}

void ShmGroup::finish(uint64_t phase) {
    static_cast<Header*>(base_)->done[rank_].phase.store(phase, std::memory_order_release);
}

// Spinning first (the members usually arrive within microseconds of each other), then yielding
// (a member that shares this core gets it), then sleeping, looking every few milliseconds
// whether the awaited member's process is still there; throws after the timeout.
void ShmGroup::backoff(Backoff& b, int peer, const char* what, int64_t phase) const {
    const int spins = b.spins++;
    if (spins < 2000) {
        cpu_relax();
        return;
    }
    if (spins < 4000) {
        sched_yield();
        return;
    }
    using Clock = std::chrono::steady_clock;
    if (b.deadline == Clock::time_point{}) b.deadline = Clock::now() + timeout_;
    auto at = [&] { return phase >= 0 ? str_cat(" phase ", phase) : std::string(); };
    if (Clock::now() > b.deadline)
        throw std::runtime_error(
            str_cat("shared memory: group rank ", peer, " did not ", what, at()));
    const Header* h = static_cast<const Header*>(base_);
    if (watch_ && spins % 256 == 0 && process_start(h->member[peer].pid) != h->member[peer].start)
        throw std::runtime_error(str_cat("shared memory: group rank ", peer, " (pid ",
                                         h->member[peer].pid, ") exited before it ", what, at()));
    std::this_thread::sleep_for(std::chrono::microseconds(20));
}

// Waits until every member's counter has reached `phase`.
void ShmGroup::wait_all(bool done, uint64_t phase) const {
    const Header* h = static_cast<const Header*>(base_);
    const auto* c = reinterpret_cast<const Counter*>(done ? h->done : h->arrive);
    for (int r = 0; r < size_; ++r) {
        Backoff b;
        while (c[r].phase.load(std::memory_order_acquire) < phase)
            backoff(b, r, done ? "finish" : "arrive at", int64_t(phase));
    }
}

void ShmGroup::wait_arrived(uint64_t phase) const {
    wait_all(false, phase);
}

void ShmGroup::wait_finished(uint64_t phase) const {
    wait_all(true, phase);
}

// out[0, count) := the members' slots of buffer b at [at, at + count), combined in rank order:
// every member that combines an element does it in the same order, so all get the same bits.
void ShmGroup::reduce_slots(float* out, int b, int64_t at, int64_t count, ReduceOp op) const {
    std::memcpy(out, slot(b, 0) + at, sizeof(float) * size_t(count));
    for (int r = 1; r < size_; ++r) {
        const float* in = slot(b, r) + at;
        if (op == ReduceOp::sum)
            for (int64_t i = 0; i < count; ++i) out[i] += in[i];
        else
            for (int64_t i = 0; i < count; ++i) out[i] = std::max(out[i], in[i]);
    }
}

void ShmGroup::all_reduce(float* data, int64_t n, ReduceOp op) {
    for (int64_t off = 0; off < n; off += kSlotFloats) {
        const int64_t len = std::min(kSlotFloats, n - off);
        const uint64_t ph = begin_phase();
        const int b = int(ph & 1);
        std::memcpy(slot(b, rank_), data + off, sizeof(float) * size_t(len));
        arrive(ph);
        wait_arrived(ph);
        // this member's share of the elements
        const int64_t lo = len * rank_ / size_, hi = len * (rank_ + 1) / size_;
        float* out = result(b);
        reduce_slots(out + lo, b, lo, hi - lo, op);
        finish(ph);
        wait_finished(ph);
        std::memcpy(data + off, out, sizeof(float) * size_t(len));
    }
    if (n == 0) barrier();  // still a synchronisation point, as in Gloo
}

void ShmGroup::reduce_scatter(const float* in, float* out, int64_t n) {
    // a chunk of every destination's range per phase: size chunks fill a slot
    const int64_t step = std::max<int64_t>(1, kSlotFloats / size_);
    for (int64_t off = 0; off < n; off += step) {
        const int64_t len = std::min(step, n - off);
        const uint64_t ph = begin_phase();
        const int b = int(ph & 1);
        float* mine = slot(b, rank_);
        for (int d = 0; d < size_; ++d)
            std::memcpy(mine + d * len, in + int64_t(d) * n + off, sizeof(float) * size_t(len));
        arrive(ph);
        wait_arrived(ph);
        reduce_slots(out + off, b, int64_t(rank_) * len, len, ReduceOp::sum);
    }
    if (n == 0) barrier();
}

void ShmGroup::all_gather(const float* in, float* out, int64_t n) {
    for (int64_t off = 0; off < n; off += kSlotFloats) {
        const int64_t len = std::min(kSlotFloats, n - off);
        const uint64_t ph = begin_phase();
        const int b = int(ph & 1);
        std::memcpy(slot(b, rank_), in + off, sizeof(float) * size_t(len));
        arrive(ph);
        wait_arrived(ph);
        for (int r = 0; r < size_; ++r)
            std::memcpy(out + int64_t(r) * n + off, slot(b, r), sizeof(float) * size_t(len));
    }
    if (n == 0) barrier();
}

void ShmGroup::broadcast(float* data, int64_t n, int root) {
    for (int64_t off = 0; off < n; off += kSlotFloats) {
        const int64_t len = std::min(kSlotFloats, n - off);
        const uint64_t ph = begin_phase();
        const int b = int(ph & 1);
        if (rank_ == root) std::memcpy(slot(b, root), data + off, sizeof(float) * size_t(len));
        arrive(ph);
        wait_arrived(ph);
        if (rank_ != root) std::memcpy(data + off, slot(b, root), sizeof(float) * size_t(len));
    }
    if (n == 0) barrier();
}

void ShmGroup::barrier() {
    const uint64_t ph = begin_phase();
    arrive(ph);
    wait_arrived(ph);
}

// ---------------------------------------------------------------------------------------------
// Point to point

ShmGroup::Ring* ShmGroup::ring(int from, int to) const {
    return rings(base_) + channel(size_, from, to);
}

char* ShmGroup::ring_data(int from, int to) const {
    return channel_data(base_, size_, ring_bytes_, from, to);
}

bool ShmGroup::p2p_fits(int64_t bytes) const {
    return ring_bytes_ > 0 && bytes >= 0 && message_span(bytes) <= ring_bytes_ / 2;
}

// The message into peer's ring if it has room now.
bool ShmGroup::p2p_write(int peer, uint64_t tag, const void* data, int64_t bytes) {
    Ring* r = ring(rank_, peer);
    const uint64_t head = r->head.load(std::memory_order_relaxed);  // only this member moves it
    const int64_t span = message_span(bytes);
    if (ring_bytes_ - int64_t(head - r->tail.load(std::memory_order_acquire)) < span) return false;
    char* d = ring_data(rank_, peer);
    const MessageHeader m{tag, bytes};
    ring_put(d, ring_bytes_, head, &m, sizeof m);
    ring_put(d, ring_bytes_, head + kMessageHeader, data, bytes);
    r->head.store(head + uint64_t(span), std::memory_order_release);
    return true;
}

void ShmGroup::p2p_flush(int peer) {
    auto& q = set_aside_[size_t(peer)];
    while (!q.empty() &&
           p2p_write(peer, q.front().tag, q.front().data.data(), int64_t(q.front().data.size()))) {
        written_[size_t(peer)] = q.front().ticket;
        q.pop_front();
    }
}

uint64_t ShmGroup::p2p_send(int peer, uint64_t tag, const void* data, int64_t bytes) {
    TS_CHECK(p2p_fits(bytes), "shared memory: a message of ", bytes, " bytes does not fit");
    const uint64_t ticket = ++tickets_[size_t(peer)];
    p2p_flush(peer);
    if (set_aside_[size_t(peer)].empty() && p2p_write(peer, tag, data, bytes)) {
        written_[size_t(peer)] = ticket;
    } else {
        const char* c = static_cast<const char*>(data);
        set_aside_[size_t(peer)].push_back({ticket, tag, std::vector<char>(c, c + bytes)});
    }
    return ticket;
}

// Takes every message in this member's incoming rings: into the earliest posted receive of its
// tag, else aside.
void ShmGroup::p2p_progress() {
    for (int q = 0; q < size_; ++q) {
        if (q == rank_) continue;
        Ring* r = ring(q, rank_);
        const char* d = ring_data(q, rank_);
        uint64_t tail = r->tail.load(std::memory_order_relaxed);  // only this member moves it
        const uint64_t head = r->head.load(std::memory_order_acquire);
        while (tail < head) {
            MessageHeader m{};
            ring_get(&m, d, ring_bytes_, tail, sizeof m);
            auto it = posted_.begin();
            while (it != posted_.end() && (it->second.peer != q || it->second.tag != m.tag)) ++it;
            if (it == posted_.end()) {
                std::vector<char> data(size_t(m.bytes));
                ring_get(data.data(), d, ring_bytes_, tail + kMessageHeader, m.bytes);
                arrived_.push_back({q, m.tag, std::move(data)});
            } else if (it->second.bytes != m.bytes) {
                failed_ = length_mismatch(q, m.bytes, m.tag, it->second.bytes);
                posted_.erase(it);
            } else {
                ring_get(it->second.data, d, ring_bytes_, tail + kMessageHeader, m.bytes);
                filled_.insert(it->first);
                posted_.erase(it);
            }
            tail += uint64_t(message_span(m.bytes));
        }
        r->tail.store(tail, std::memory_order_release);
    }
}

uint64_t ShmGroup::p2p_post_recv(int peer, uint64_t tag, void* data, int64_t bytes) {
    const uint64_t id = ++recv_ids_;
    p2p_progress();
    for (auto it = arrived_.begin(); it != arrived_.end(); ++it) {
        if (it->peer != peer || it->tag != tag) continue;
        if (int64_t(it->data.size()) != bytes)
            throw std::runtime_error(length_mismatch(peer, int64_t(it->data.size()), tag, bytes));
        if (bytes > 0) std::memcpy(data, it->data.data(), it->data.size());
        arrived_.erase(it);
        filled_.insert(id);
        return id;
    }
    posted_.emplace(id, Posted{peer, tag, data, bytes});
    return id;
}

void ShmGroup::p2p_wait_recv(uint64_t id) {
    Backoff b;
    int peer = -1;
    if (auto it = posted_.find(id); it != posted_.end()) peer = it->second.peer;
    for (;;) {
        p2p_progress();
        if (!failed_.empty()) {
            posted_.erase(id);
            throw std::runtime_error(std::exchange(failed_, ""));
        }
        if (filled_.erase(id)) return;
        if (!posted_.count(id)) throw std::runtime_error("shared memory: no such receive");
        for (int q = 0; q < size_; ++q)
            if (q != rank_) p2p_flush(q);  // a peer may be waiting for ours meanwhile
        try {
            backoff(b, peer, "send the message awaited");
        } catch (...) {
            posted_.erase(id);  // the caller's buffer may go
            throw;
        }
    }
}

void ShmGroup::p2p_wait_sent(int peer, uint64_t ticket) {
    Backoff b;
    for (;;) {
        p2p_flush(peer);
        if (written_[size_t(peer)] >= ticket) return;
        p2p_progress();  // the peer may be waiting for ours meanwhile
        backoff(b, peer, "make room for a message");
    }
}

}  // namespace tessera
