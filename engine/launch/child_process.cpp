// The launcher's children: exec plans, fork + exec, group signals, whole-line writes (see
// child_process.h).
#include "engine/launch/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

extern char** environ;

namespace tessera {

ExecPlan exec_plan(std::vector<std::string> argv, const EnvList& extra, const EnvList& ours) {
    ExecPlan p;
    p.argv_s = std::move(argv);
    auto overridden = [&](const std::string& kv) {
        std::string key = kv.substr(0, kv.find('='));
        for (auto& [k, v] : ours)
            if (k == key) return true;
        for (auto& [k, v] : extra)
            if (k == key) return true;
        return false;
    };
    for (char** e = environ; e && *e; ++e)
        if (!overridden(*e)) p.env_s.push_back(*e);
    for (auto& [k, v] : extra) p.env_s.push_back(k + "=" + v);
    for (auto& [k, v] : ours) p.env_s.push_back(k + "=" + v);
    p.finish();
    return p;
}

void child_spawn(Child& c, ExecPlan& plan, int devnull, bool node) {
    UniquePipe out, tel, in;  // what is still open when this throws is closed
    auto fail = [&](const char* what) {
        throw Error(str_cat("launcher: ", what, ": ", std::strerror(errno)));
    };
    if (!unique_pipe(out, O_CLOEXEC)) fail("pipe2");
    if (!unique_pipe(tel, O_CLOEXEC)) fail("pipe2");
    if (node && !unique_pipe(in, O_CLOEXEC)) fail("pipe2");
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) fail("fork");
    if (pid == 0) {
        ::setpgid(0, 0);  // own group: signals reach the child's children too
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl
        ::signal(SIGPIPE, SIG_DFL);
        ::signal(SIGINT, SIG_DFL);
        ::signal(SIGTERM, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        if (node) {
            ::dup2(in.read.get(), 0);
            ::dup2(tel.write.get(), 1);  // the node protocol
            ::dup2(out.write.get(), 2);  // ssh's own messages
        } else {
            ::dup2(devnull, 0);
            ::dup2(out.write.get(), 1);
            ::dup2(out.write.get(), 2);
            if (tel.write.get() == kTelemetryFd)
                ::fcntl(kTelemetryFd, F_SETFD, 0);
            else
                ::dup2(tel.write.get(), kTelemetryFd);
        }
        ::close_range(node ? 3 : kTelemetryFd + 1, ~0U, CLOSE_RANGE_CLOEXEC);
        ::execvpe(plan.argv[0], plan.argv.data(), plan.envp.data());
        const char* m1 = "tessera launcher: cannot execute ";
        (void)!::write(2, m1, std::strlen(m1));
        (void)!::write(2, plan.argv[0], std::strlen(plan.argv[0]));
        const char* m2 = ": ";
        (void)!::write(2, m2, 2);
        const char* es = std::strerror(errno);
        (void)!::write(2, es, std::strlen(es));
        (void)!::write(2, "\n", 1);
        ::_exit(127);
    }
    ::setpgid(pid, pid);  // also from the parent: no race with an early kill
    out.write.reset();
    tel.write.reset();
    if (node) {
        in.read.reset();
        c.in_fd = std::move(in.write);
    }
    c.pid = pid;
    c.out_fd = std::move(out.read);
    c.tel_fd = std::move(tel.read);
    c.alive = true;
}

void signal_children(std::vector<Child>& children, int sig) {
    for (auto& c : children)
        if (c.alive) ::kill(-c.pid, sig);
}

bool write_line(int fd, const std::string& line) {
    std::string s = line + "\n";
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = ::write(fd, s.data() + off, s.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += size_t(n);
    }
    return true;
}

}  // namespace tessera
