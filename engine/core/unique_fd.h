// Owning handles for POSIX descriptors and the C library's FILE* and addrinfo lists: UniqueFd
// (files, sockets, pipe ends), FilePtr (fopen), AddrInfoPtr (getaddrinfo). The only places where
// close(), fclose() and freeaddrinfo() appear outside a forked child before exec
// (scripts/check_raw_handles.sh keeps it so). Destructors ignore errors; FileWriter-style code
// that must see close()'s result calls UniqueFd::close(). Also exec_argv: the char* array exec()
// takes, built before fork().
#pragma once
#include <netdb.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

// A file descriptor: closed when the owner goes, moved but never copied. -1 is "none".
class UniqueFd {
  public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
    UniqueFd& operator=(UniqueFd&& o) noexcept {
        if (this != &o) reset(o.release());
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd() { reset(); }

    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }
    // Gives the descriptor up without closing it.
    int release() { return std::exchange(fd_, -1); }
    // Closes the current descriptor (if any, result ignored) and owns `fd`.
    void reset(int fd = -1) {
        int old = std::exchange(fd_, fd);
        if (old >= 0) ::close(old);
    }
    // Closes now and returns close()'s result (0, or -1 with errno set); 0 when already closed.
    int close() {
        int old = release();
        return old >= 0 ? ::close(old) : 0;
    }

  private:
    int fd_ = -1;
};

// Both ends of a pipe (pipe2(flags)); false and errno set when the pipe could not be made.
struct UniquePipe {
    UniqueFd read, write;
};
inline bool unique_pipe(UniquePipe& p, int flags) {
    int fds[2];
    if (::pipe2(fds, flags) != 0) return false;
    p.read.reset(fds[0]);
    p.write.reset(fds[1]);
    return true;
}

// The null-terminated char* array execv()/execve() take, pointing into `strings` (which must
// outlive it and not change). Built before fork(): a forked child makes no allocations.
inline std::vector<char*> exec_argv(std::vector<std::string>& strings) {
    std::vector<char*> a;
    a.reserve(strings.size() + 1);
    for (auto& s : strings) a.push_back(s.data());
    a.push_back(nullptr);
    return a;
}

// A stdio stream (fopen), fclose'd with its owner.
struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

// A getaddrinfo() result list.
struct AddrInfoDeleter {
    void operator()(addrinfo* a) const { ::freeaddrinfo(a); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

}  // namespace tessera
