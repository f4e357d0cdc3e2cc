// UniqueFd, UniquePipe, FilePtr, AddrInfoPtr (engine/core/unique_fd.h): descriptors are closed
// exactly when their owner goes, moves transfer ownership, release() gives the descriptor up.
#include "engine/core/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

using tessera::AddrInfoPtr;
using tessera::FilePtr;
using tessera::UniqueFd;
using tessera::UniquePipe;

namespace {

// Open: fcntl works. Closed: it fails with EBADF. (A test opens nothing in between, so a closed
// number is not reused under our feet.)
bool is_open(int fd) {
    return ::fcntl(fd, F_GETFD) != -1;
}
bool is_closed(int fd) {
    return ::fcntl(fd, F_GETFD) == -1 && errno == EBADF;
}

// read() that gives up after a second (-2) instead of hanging when the peer never closes.
ssize_t read_within(int fd, char* buf, size_t n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) != 1) return -2;
    return ::read(fd, buf, n);
}

int open_devnull() {
    int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    return fd;
}

}  // namespace

TEST(UniqueFd, ClosesOnDestruction) {
    int raw = open_devnull();
    {
        UniqueFd fd(raw);
        EXPECT_EQ(fd.get(), raw);
        EXPECT_TRUE(fd);
        EXPECT_TRUE(is_open(raw));
    }
    EXPECT_TRUE(is_closed(raw));
}

TEST(UniqueFd, EmptyByDefault) {
    UniqueFd fd;
    EXPECT_FALSE(fd);
    EXPECT_EQ(fd.get(), -1);
    EXPECT_EQ(fd.close(), 0);  // nothing to close: no error
}

TEST(UniqueFd, MoveConstructionTransfersOwnership) {
    int raw = open_devnull();
    UniqueFd a(raw);
    {
        UniqueFd b(std::move(a));
        EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
        EXPECT_EQ(b.get(), raw);
        EXPECT_TRUE(is_open(raw));
    }
    EXPECT_TRUE(is_closed(raw));  // closed once, by b
}

TEST(UniqueFd, MoveAssignmentClosesTheOldDescriptor) {
    int first = open_devnull(), second = open_devnull();
    UniqueFd a(first), b(second);
    a = std::move(b);
    EXPECT_TRUE(is_closed(first));
    EXPECT_TRUE(is_open(second));
    EXPECT_EQ(a.get(), second);
    EXPECT_FALSE(b);  // NOLINT(bugprone-use-after-move)
    a = UniqueFd();
    EXPECT_TRUE(is_closed(second));
}

TEST(UniqueFd, ReleaseDoesNotClose) {
    int raw = open_devnull();
    {
        UniqueFd fd(raw);
        EXPECT_EQ(fd.release(), raw);
        EXPECT_FALSE(fd);
    }
    EXPECT_TRUE(is_open(raw));
    UniqueFd again(raw);  // closes it at the end of the test
}

TEST(UniqueFd, ResetClosesAndTakesTheNewOne) {
    int first = open_devnull(), second = open_devnull();
    UniqueFd fd(first);
    fd.reset(second);
    EXPECT_TRUE(is_closed(first));
    EXPECT_EQ(fd.get(), second);
    fd.reset();
    EXPECT_TRUE(is_closed(second));
    EXPECT_FALSE(fd);
}

TEST(UniqueFd, CloseReportsTheResultAndEmpties) {
    int raw = open_devnull();
    UniqueFd fd(raw);
    EXPECT_EQ(fd.close(), 0);
    EXPECT_FALSE(fd);
    EXPECT_TRUE(is_closed(raw));
}

TEST(UniqueFd, SocketsAreClosedToo) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    {
        UniqueFd a(sv[0]);
        UniqueFd b(sv[1]);
        ASSERT_EQ(::write(a.get(), "x", 1), 1);
        char c = 0;
        ASSERT_EQ(read_within(b.get(), &c, 1), 1);
        EXPECT_EQ(c, 'x');
        a.reset();  // the peer sees the end of the stream
        EXPECT_EQ(read_within(b.get(), &c, 1), 0);
    }
    EXPECT_TRUE(is_closed(sv[0]));
    EXPECT_TRUE(is_closed(sv[1]));
}

TEST(UniquePipe, BothEndsOwnedAndClosed) {
    int r = -1, w = -1;
    {
        UniquePipe p;
        ASSERT_TRUE(tessera::unique_pipe(p, O_CLOEXEC));
        r = p.read.get();
        w = p.write.get();
        EXPECT_TRUE(is_open(r));
        EXPECT_TRUE(is_open(w));
        EXPECT_EQ(::fcntl(r, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);  // flags are passed on
        ASSERT_EQ(::write(w, "ab", 2), 2);
        p.write.reset();  // EOF after the two bytes
        char buf[4];
        EXPECT_EQ(read_within(r, buf, sizeof buf), 2);
        EXPECT_EQ(read_within(r, buf, sizeof buf), 0);
    }
    EXPECT_TRUE(is_closed(r));
    EXPECT_TRUE(is_closed(w));
}

TEST(FilePtr, ClosesTheStreamAndItsDescriptor) {
    int fd = -1;
    {
        FilePtr f(std::fopen("/dev/null", "rb"));
        ASSERT_TRUE(f);
        fd = ::fileno(f.get());
        EXPECT_TRUE(is_open(fd));
    }
    EXPECT_TRUE(is_closed(fd));
}

TEST(AddrInfoPtr, OwnsAGetaddrinfoList) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;  // no resolver: works offline
    addrinfo* raw = nullptr;
    ASSERT_EQ(::getaddrinfo("127.0.0.1", "80", &hints, &raw), 0);
    AddrInfoPtr res(raw);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->ai_family, AF_INET);
    // freed by the deleter (ASan/valgrind builds would report a leak otherwise)
}
