// launch_job(): the single-host launcher. Serves the rendezvous store, forks one process per rank
// (own process group, stdin /dev/null, stdout+stderr on one pipe, telemetry on fd 3), and runs
// one poll() loop that prefixes output lines, ingests telemetry into runs.db, reaps ranks, and
// tears the job down when one dies. docs/launch.md describes the process model.
//
// Records the launcher itself writes to the run (rank -1 = the launcher):
//   metric launch/attempt = attempt number (1, 2, ...) at the start of every attempt
//   error  (rank = the failed rank) for every failed attempt, with the failure message
#include "engine/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <ostream>

#include "engine/core/error.h"
#include "engine/parallel/tcp_store.h"
#include "engine/store/run_store.h"

extern char** environ;

namespace tessera {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTelemetryFd = 3;                      // the rank's end of its telemetry pipe
constexpr auto kFlushEvery = std::chrono::milliseconds(100);
constexpr auto kDrainAfterExit = std::chrono::milliseconds(500);  // output left by grandchildren
constexpr size_t kMaxLineBytes = 1 << 20;

std::atomic<int> g_stop_requests{0};

struct Rank {
    int rank = 0;
    std::string prefix;  // "[dp0.tp1.pp0] "
    pid_t pid = -1;
    int out_fd = -1, tel_fd = -1;  // read ends
    std::string out_buf, tel_buf;  // partial lines
    bool alive = false;
    int wait_status = 0;
    int64_t last_step = 0;
    std::string end_status, end_message;  // from the rank's run_end record
};

void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

std::string signal_name(int sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev ? str_cat("SIG", abbrev) : str_cat("signal ", sig);
}

// "rank 3 (dp1.tp1.pp0) killed by signal 9 (SIGKILL) at step 12[: rank's own message]"
std::string death_message(const Rank& r, const MeshShape& mesh) {
    std::string who = str_cat("rank ", r.rank, " (", mesh_coord_str(mesh_coord(mesh, r.rank)), ")");
    std::string how = WIFSIGNALED(r.wait_status)
                          ? str_cat("killed by signal ", WTERMSIG(r.wait_status), " (",
                                    signal_name(WTERMSIG(r.wait_status)), ")")
                          : str_cat("exited with code ", WEXITSTATUS(r.wait_status));
    std::string msg = str_cat(who, " ", how, " at step ", r.last_step);
    if (!r.end_message.empty()) msg += str_cat(": ", r.end_message);
    return msg;
}

// Everything exec needs, built before fork() (the child only makes async-signal-safe calls).
struct ExecPlan {
    std::vector<std::string> argv_s, env_s;
    std::vector<char*> argv, envp;
    void finish() {
        for (auto& s : argv_s) argv.push_back(s.data());
        argv.push_back(nullptr);
        for (auto& s : env_s) envp.push_back(s.data());
        envp.push_back(nullptr);
    }
};

ExecPlan exec_plan(const LaunchSpec& spec, int rank, int attempt, int port, int64_t run_id) {
    ExecPlan p;
    p.argv_s = spec.argv;
    if (attempt > 1) p.argv_s.insert(p.argv_s.end(), spec.resume_argv.begin(), spec.resume_argv.end());
    std::vector<std::pair<std::string, std::string>> ours = {
        {"TESSERA_RANK", std::to_string(rank)},
        {"TESSERA_WORLD_SIZE", std::to_string(spec.mesh.world())},
        {"TESSERA_LOCAL_RANK", std::to_string(rank)},
        {"TESSERA_MASTER_ADDR", "127.0.0.1"},
        {"TESSERA_MASTER_PORT", std::to_string(port)},
        {"TESSERA_TELEMETRY_FD", std::to_string(kTelemetryFd)},
        {"TESSERA_RUN_ID", std::to_string(run_id)},
        {"TESSERA_ATTEMPT", std::to_string(attempt)}};
    auto overridden = [&](const std::string& kv) {
        std::string key = kv.substr(0, kv.find('='));
        for (auto& [k, v] : ours) if (k == key) return true;
        for (auto& [k, v] : spec.env) if (k == key) return true;
        return false;
    };
    for (char** e = environ; e && *e; ++e)
        if (!overridden(*e)) p.env_s.push_back(*e);
    for (auto& [k, v] : spec.env) p.env_s.push_back(k + "=" + v);
    for (auto& [k, v] : ours) p.env_s.push_back(k + "=" + v);
    p.finish();
    return p;
}

// fork + exec one rank. Pipes are created close-on-exec; the child moves its ends onto 1, 2, 3
// and marks every other descriptor close-on-exec.
void rank_spawn(Rank& r, ExecPlan& plan, int devnull) {
    int out[2], tel[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw Error(str_cat("launcher: pipe2: ", std::strerror(errno)));
    if (::pipe2(tel, O_CLOEXEC) != 0) {
        ::close(out[0]);
        ::close(out[1]);
        throw Error(str_cat("launcher: pipe2: ", std::strerror(errno)));
    }
    pid_t pid = ::fork();
    if (pid < 0) {
        int e = errno;
        for (int fd : {out[0], out[1], tel[0], tel[1]}) ::close(fd);
        throw Error(str_cat("launcher: fork: ", std::strerror(e)));
    }
    if (pid == 0) {
        ::setpgid(0, 0);  // own group: signals reach the rank's children too
        ::signal(SIGPIPE, SIG_DFL);
        ::signal(SIGINT, SIG_DFL);
        ::signal(SIGTERM, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::dup2(devnull, 0);
        ::dup2(out[1], 1);
        ::dup2(out[1], 2);
        if (tel[1] == kTelemetryFd)
            ::fcntl(kTelemetryFd, F_SETFD, 0);
        else
            ::dup2(tel[1], kTelemetryFd);
        ::close_range(kTelemetryFd + 1, ~0U, CLOSE_RANGE_CLOEXEC);
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
    ::close(out[1]);
    ::close(tel[1]);
    r.pid = pid;
    r.out_fd = out[0];
    r.tel_fd = tel[0];
    r.alive = true;
}

void signal_ranks(std::vector<Rank>& ranks, int sig) {
    for (auto& r : ranks)
        if (r.alive) ::kill(-r.pid, sig);
}

// ------------------------------------------------------------------------------------------------
// One attempt: spawn, loop, reap. Returns status/message; writes telemetry through `sink`.

struct AttemptResult {
    std::string status;  // completed | failed | stopped
    std::string message;
    int failed_rank = -1;
    int64_t last_step = 0;
};

class Attempt {
public:
    Attempt(const LaunchSpec& spec, TelemetrySink& sink, std::ostream& out)
        : spec_(spec), sink_(sink), out_(out) {}

    ~Attempt() {  // on any exception: nothing survives us
        signal_ranks(ranks_, SIGKILL);
        for (auto& r : ranks_) {
            if (r.alive) ::waitpid(r.pid, &r.wait_status, 0);
            close_fd(r.out_fd);
            close_fd(r.tel_fd);
        }
    }

    AttemptResult run(int attempt, int port, int64_t run_id, int64_t start_step) {
        int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull < 0) throw Error(str_cat("launcher: /dev/null: ", std::strerror(errno)));
        int world = spec_.mesh.world();
        ranks_.resize(size_t(world));
        try {
            for (int i = 0; i < world; ++i) {
                Rank& r = ranks_[size_t(i)];
                r.rank = i;
                r.last_step = start_step;
                r.prefix = str_cat("[", mesh_coord_str(mesh_coord(spec_.mesh, i)), "] ");
                ExecPlan plan = exec_plan(spec_, i, attempt, port, run_id);
                rank_spawn(r, plan, devnull);
            }
        } catch (...) {
            ::close(devnull);
            throw;
        }
        ::close(devnull);
        return loop();
    }

private:
    AttemptResult loop() {
        AttemptResult res;
        int stops_seen = g_stop_requests.load();
        bool stop_forwarded = false;
        Clock::time_point term_at{}, all_exited_at{}, last_flush = Clock::now();
        bool killed = false;
        std::vector<pollfd> pfds;
        std::vector<std::pair<Rank*, bool>> owners;  // (rank, is telemetry)
        for (;;) {
            // Ctrl-C: forward SIGINT to every rank.
            int stops = g_stop_requests.load();
            if (stops != stops_seen) {
                stops_seen = stops;
                stop_forwarded = true;
                signal_ranks(ranks_, SIGINT);
                out_ << "[launcher] stop requested: SIGINT sent to every rank" << std::endl;
            }

            pfds.clear();
            owners.clear();
            for (auto& r : ranks_) {
                if (r.out_fd >= 0) { pfds.push_back({r.out_fd, POLLIN, 0}); owners.push_back({&r, false}); }
                if (r.tel_fd >= 0) { pfds.push_back({r.tel_fd, POLLIN, 0}); owners.push_back({&r, true}); }
            }
            if (!pfds.empty()) {
                int pr = ::poll(pfds.data(), pfds.size(), 50);
                if (pr < 0 && errno != EINTR) throw Error(str_cat("launcher: poll: ", std::strerror(errno)));
                for (size_t i = 0; pr > 0 && i < pfds.size(); ++i)
                    if (pfds[i].revents) read_fd(*owners[i].first, owners[i].second);
            } else {
                ::usleep(20000);
            }

            // Reap.
            for (auto& r : ranks_) {
                if (!r.alive) continue;
                pid_t w = ::waitpid(r.pid, &r.wait_status, WNOHANG);
                if (w != r.pid) continue;
                r.alive = false;
                bool clean = WIFEXITED(r.wait_status) && WEXITSTATUS(r.wait_status) == 0;
                bool interrupted = stop_forwarded && WIFSIGNALED(r.wait_status) &&
                                   WTERMSIG(r.wait_status) == SIGINT;
                ::kill(-r.pid, SIGKILL);  // whatever the rank left behind in its group
                if (!clean && !interrupted && res.failed_rank < 0) {
                    res.failed_rank = r.rank;
                    res.message = death_message(r, spec_.mesh);
                    out_ << "[launcher] " << res.message << "; stopping the other ranks"
                         << std::endl;
                    signal_ranks(ranks_, SIGTERM);
                    term_at = Clock::now();
                }
            }
            auto now = Clock::now();
            if (res.failed_rank >= 0 && !killed && now - term_at >= spec_.kill_grace) {
                signal_ranks(ranks_, SIGKILL);
                killed = true;
            }
            if (now - last_flush >= kFlushEvery) {
                sink_.flush();
                out_.flush();
                last_flush = now;
            }

            bool any_alive = false, any_open = false;
            for (auto& r : ranks_) {
                any_alive |= r.alive;
                any_open |= r.out_fd >= 0 || r.tel_fd >= 0;
            }
            if (!any_alive) {
                if (all_exited_at == Clock::time_point{}) all_exited_at = now;
                if (!any_open || now - all_exited_at >= kDrainAfterExit) break;
            }
        }
        for (auto& r : ranks_) {
            flush_partial(r);
            close_fd(r.out_fd);
            close_fd(r.tel_fd);
            res.last_step = std::max(res.last_step, r.last_step);
        }
        sink_.flush();
        out_.flush();
        if (res.failed_rank >= 0) {
            res.status = "failed";
        } else {
            bool stopped = stop_forwarded;
            for (auto& r : ranks_) stopped |= r.end_status == "stopped";
            res.status = stopped ? "stopped" : "completed";
            if (stopped) res.message = "stopped by request";
        }
        return res;
    }

    void read_fd(Rank& r, bool telemetry) {
        int& fd = telemetry ? r.tel_fd : r.out_fd;
        std::string& buf = telemetry ? r.tel_buf : r.out_buf;
        char chunk[65536];
        ssize_t n = ::read(fd, chunk, sizeof(chunk));
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
        if (n <= 0) {  // EOF or error: the rank closed its end
            if (!buf.empty()) {
                std::string line;
                line.swap(buf);
                telemetry ? on_telemetry(r, line) : on_output(r, line);
            }
            close_fd(fd);
            return;
        }
        buf.append(chunk, size_t(n));
        size_t start = 0, nl;
        while ((nl = buf.find('\n', start)) != std::string::npos) {
            std::string line = buf.substr(start, nl - start);
            telemetry ? on_telemetry(r, line) : on_output(r, line);
            start = nl + 1;
        }
        buf.erase(0, start);
        if (buf.size() > kMaxLineBytes) {  // a runaway line: emit what we have
            std::string line;
            line.swap(buf);
            telemetry ? on_telemetry(r, line) : on_output(r, line);
        }
    }

    void flush_partial(Rank& r) {
        if (!r.out_buf.empty()) on_output(r, r.out_buf);
        if (!r.tel_buf.empty()) on_telemetry(r, r.tel_buf);
        r.out_buf.clear();
        r.tel_buf.clear();
    }

    void on_output(Rank& r, const std::string& line) { out_ << r.prefix << line << '\n'; }

    // Garbage never stops the launcher: it becomes one warning line.
    void on_telemetry(Rank& r, const std::string& line) {
        if (line.empty()) return;
        Record rec;
        try {
            rec = telemetry_decode(line);
        } catch (const std::exception& e) {
            out_ << "[launcher] warning: rank " << r.rank << " sent a bad telemetry line ("
                 << e.what() << "): " << line.substr(0, 200) << std::endl;
            return;
        }
        if (auto* m = std::get_if<MetricRecord>(&rec)) {
            r.last_step = std::max(r.last_step, m->step);
        } else if (auto* e = std::get_if<RunEndRecord>(&rec)) {
            // The launcher finishes the run once for the whole job; remember what the rank said.
            r.end_status = e->status;
            if (e->status == "failed") r.end_message = e->message;
            r.last_step = std::max(r.last_step, e->last_step);
            return;
        } else if (std::holds_alternative<RunStartRecord>(rec)) {
            return;  // the launcher began the run
        }
        sink_.write(rec);
    }

    const LaunchSpec& spec_;
    TelemetrySink& sink_;
    std::ostream& out_;
    std::vector<Rank> ranks_;
};

}  // namespace

// ------------------------------------------------------------------------------------------------

LaunchResult launch_job(const LaunchSpec& spec, std::ostream& out) {
    if (spec.argv.empty()) throw InputError("launcher: the rank command line (argv) is empty");
    if (spec.mesh.dp < 1 || spec.mesh.tp < 1 || spec.mesh.pp < 1)
        throw InputError(str_cat("launcher: mesh dp ", spec.mesh.dp, " x tp ", spec.mesh.tp,
                                 " x pp ", spec.mesh.pp, " has a dimension below 1"));
    if (spec.restarts < 0)
        throw InputError(str_cat("launcher: restarts must be >= 0, found ", spec.restarts));

    RunStore store = RunStore::open(spec.db_path);
    RunStartRecord start = spec.run;
    start.world_size = spec.mesh.world();
    if (start.wall_time == 0) start.wall_time = telemetry_now();
    LaunchResult result;
    result.run_id = store.run_begin(start);
    TcpStoreServer server("0.0.0.0", 0);
    g_stop_requests.store(0);
    try {
        {
            auto sink = store_sink(store, result.run_id);
            AttemptResult ar;
            for (int attempt = 1;; ++attempt) {
                server.clear();  // a fresh rendezvous for every attempt
                result.attempts = attempt;
                sink->write(MetricRecord{result.last_step, -1, "launch/attempt", double(attempt),
                                         telemetry_now()});
                if (attempt > 1)
                    out << "[launcher] attempt " << attempt << " of " << spec.restarts + 1
                        << ": relaunching every rank with resume arguments" << std::endl;
                {
                    Attempt a(spec, *sink, out);
                    ar = a.run(attempt, server.port(), result.run_id, result.last_step);
                }
                result.last_step = std::max(result.last_step, ar.last_step);
                if (ar.status != "failed") break;
                sink->write(ErrorRecord{ar.failed_rank, ar.last_step,
                                        str_cat("attempt ", attempt, ": ", ar.message),
                                        telemetry_now()});
                if (attempt > spec.restarts || g_stop_requests.load() > 0) break;
            }
            sink->flush();
            result.status = ar.status;
            result.message = ar.message;
        }
    } catch (const std::exception& e) {
        // The launcher itself failed (fork, pipes, the store): every rank is already gone
        // (~Attempt); leave the run row finished, not "running" forever.
        try {
            store.run_finish(result.run_id, "failed", str_cat("launcher: ", e.what()),
                             result.last_step);
        } catch (const std::exception&) {
            // the original error is the one to report
        }
        throw;
    }
    store.run_finish(result.run_id, result.status, result.message, result.last_step);
    out << "[launcher] run " << result.run_id << " " << result.status
        << (result.message.empty() ? "" : ": " + result.message) << std::endl;
    return result;
}

void launch_request_stop() { g_stop_requests.fetch_add(1); }

}  // namespace tessera
