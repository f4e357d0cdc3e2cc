// A real OpenSSH sshd for tests, on an unprivileged port of 127.0.0.1 and 127.0.0.2 (two
// "hosts"), with a generated host key and user key in a temporary folder. Header-only: used by
// tests/ssh and the studio's Hosts page test against a real sshd (tests/ui_hosts).
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "engine/core/error.h"
#include "engine/launch/ssh.h"
#include "tests/support/temp_dir.h"

namespace tessera::test_support {

inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
}

// A port that was free a moment ago (bound to 0, read back, released).
inline int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, (sockaddr*)&a, sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd, (sockaddr*)&a, &len);
    int port = ntohs(a.sin_port);
    ::close(fd);
    return port;
}

inline bool port_open(const char* addr, int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    inet_pton(AF_INET, addr, &a.sin_addr);
    bool ok = ::connect(fd, (sockaddr*)&a, sizeof a) == 0;
    ::close(fd);
    return ok;
}

class LoopbackSshd {
  public:
    std::filesystem::path dir;  // keys, config, log, known_hosts, work/
    int port = 0;
    std::string user_key, host_key;

    // Starts sshd; returns "" or why it could not (OpenSSH missing, sshd exited, ...).
    std::string start(const std::string& tag) {
        namespace fs = std::filesystem;
        if (!fs::exists("/usr/sbin/sshd") || !fs::exists("/usr/bin/ssh"))
            return "OpenSSH is missing: install openssh-server and openssh-client "
                   "(scripts/setup.sh does)";
        scratch_.emplace(tag);  // removed after sshd stops
        dir = scratch_->path();
        fs::create_directories(dir / "work");
        host_key = (dir / "host_key").string();
        user_key = (dir / "user_key").string();
        for (const auto& k : {host_key, user_key})
            if (process_run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", k},
                            std::chrono::seconds(30))
                    .exit_code != 0)
                return "ssh-keygen failed";
        fs::copy_file(user_key + ".pub", dir / "authorized_keys");
        fs::permissions(dir / "authorized_keys", fs::perms::owner_read | fs::perms::owner_write);
        port = free_port();
        std::ofstream(dir / "sshd_config")
            << "Port " << port << "\nListenAddress 127.0.0.1\nListenAddress 127.0.0.2\n"
            << "HostKey " << host_key << "\nAuthorizedKeysFile "
            << (dir / "authorized_keys").string() << "\nPidFile " << (dir / "sshd.pid").string()
            << "\nUsePAM no\nStrictModes no\nPasswordAuthentication no\n"
               "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
               "MaxStartups 100:30:200\nMaxSessions 100\n";
        if (::geteuid() == 0) fs::create_directories("/run/sshd");  // privilege separation dir
        pid_ = ::fork();
        if (pid_ == 0) {
            ::setpgid(0, 0);
            std::string cfg = (dir / "sshd_config").string(), log = (dir / "sshd.log").string();
            // sshd re-executes itself: argv[0] must be its absolute path
            ::execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-f", cfg.c_str(), "-E", log.c_str(),
                    (char*)nullptr);
            ::_exit(127);
        }
        for (int i = 0; i < 100 && !(port_open("127.0.0.1", port) && port_open("127.0.0.2", port));
             ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (!port_open("127.0.0.1", port)) {
            int st = 0;
            pid_t w = ::waitpid(pid_, &st, WNOHANG);
            return str_cat("sshd did not start (",
                           w == pid_ ? str_cat("exit status ", st) : "still running",
                           "): ", slurp(dir / "sshd.log"));
        }
        return "";
    }

    ~LoopbackSshd() { stop(); }
    void stop() {
        if (pid_ > 0) {
            ::kill(pid_, SIGTERM);
            ::waitpid(pid_, nullptr, 0);
            pid_ = -1;
        }
    }

    std::string known_hosts() const { return (dir / "known_hosts").string(); }
    // known_hosts with both hosts' keys (what a user has after `tessera hosts trust`).
    void trust_all() const {
        std::string keys;
        for (const char* h : {"127.0.0.1", "127.0.0.2"})
            keys += process_run({"ssh-keyscan", "-p", std::to_string(port), h},
                                std::chrono::seconds(20))
                        .out;
        std::ofstream(known_hosts()) << keys;
    }

  private:
    std::optional<TempDir> scratch_;
    pid_t pid_ = -1;
};

}  // namespace tessera::test_support
