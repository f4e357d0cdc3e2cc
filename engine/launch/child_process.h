// The launcher's children (internal to engine/launch): one process per rank, or per node launcher
// over ssh, forked and exec'd with their pipes, signalled as a group, and the partial lines read
// from them. launcher.cpp's Attempt drives them; nothing here decides what a line or an exit means.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/unique_fd.h"

namespace tessera {

inline constexpr int kTelemetryFd = 3;  // the rank's end of its telemetry pipe

// One child process: a rank (single-host job, or a node's own ranks) or a node launcher over ssh.
struct Child {
    int rank = -1;       // a rank child: its global rank
    int node = -1;       // a node child: its index in spec.nodes
    std::string prefix;  // "[dp0.tp1.pp0] " or "[alice@gpu-a] "
    pid_t pid = -1;
    UniqueFd out_fd, tel_fd;       // read ends (a node: ssh's stderr, ssh's stdout)
    UniqueFd in_fd;                // write end of a node's stdin ("stop", and EOF = tear down)
    std::string out_buf, tel_buf;  // partial lines
    bool alive = false;
    int wait_status = 0;
    bool reported_done = false;  // a node said "done" before exiting
};

using EnvList = std::vector<std::pair<std::string, std::string>>;

// Everything exec needs, built before fork() (the child only makes async-signal-safe calls).
struct ExecPlan {
    std::vector<std::string> argv_s, env_s;
    std::vector<char*> argv, envp;
    void finish() {
        argv = exec_argv(argv_s);
        envp = exec_argv(env_s);
    }
};

// This process's environment with `extra` then `ours` on top (later wins).
ExecPlan exec_plan(std::vector<std::string> argv, const EnvList& extra, const EnvList& ours);

// fork + exec one child. Pipes are created close-on-exec; the child moves its ends onto 1, 2, 3
// (a node child: stdout = protocol, stderr = ssh's messages, stdin = our pipe) and marks every
// other descriptor close-on-exec. A child dies with us (PDEATHSIG): a killed node launcher takes
// its ranks along.
void child_spawn(Child& c, ExecPlan& plan, int devnull, bool node);

// `sig` to every live child's process group.
void signal_children(std::vector<Child>& children, int sig);

// Writes a whole line to fd (the node protocol on stdout); false when the reader is gone.
bool write_line(int fd, const std::string& line);

// Splits what a pipe delivers into lines: feed() hands every complete line (without its '\n') to
// on_line and keeps the rest; a line longer than max_bytes is handed on as it is (a runaway
// writer never grows the buffer without bound); finish() hands on what is left (EOF).
template <class OnLine>
void lines_feed(std::string& buf, const char* data, size_t n, size_t max_bytes, OnLine&& on_line) {
    buf.append(data, n);
    size_t start = 0, nl;
    while ((nl = buf.find('\n', start)) != std::string::npos) {
        on_line(buf.substr(start, nl - start));
        start = nl + 1;
    }
    buf.erase(0, start);
    if (buf.size() > max_bytes) {
        std::string l;
        l.swap(buf);
        on_line(l);
    }
}
template <class OnLine>
void lines_finish(std::string& buf, OnLine&& on_line) {
    if (buf.empty()) return;
    std::string l;
    l.swap(buf);
    on_line(l);
}

}  // namespace tessera
