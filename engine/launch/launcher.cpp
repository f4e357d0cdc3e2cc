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
#include <iostream>
#include <map>
#include <memory>
#include <ostream>

#include "engine/core/error.h"
#include "engine/core/unique_fd.h"
#include "engine/launch/child_process.h"
#include "engine/launch/failure_cause.h"
#include "engine/launch/node_protocol.h"
#include "engine/parallel/tcp_store.h"
#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"

namespace tessera {

namespace {

using Clock = LaunchClock;
constexpr auto kFlushEvery = std::chrono::milliseconds(100);
constexpr auto kDrainAfterExit = std::chrono::milliseconds(500);  // output left by grandchildren
// how long an exited child's pipes are read before its exit is judged (Attempt::drain)
constexpr auto kDrainLimit = std::chrono::seconds(2);
constexpr size_t kMaxLineBytes = 1 << 20;

std::atomic<int> g_stop_requests{0};

// What the launcher knows of each rank of the job (whichever host runs it).
struct RankState {
    int64_t last_step = 0;
    std::string end_status, end_message;  // from the rank's run_end record
};

// ------------------------------------------------------------------------------------------------
// One attempt: spawn, loop, reap. Returns status/message. Three roles share this loop:
//  - single-host job: children = ranks; output -> `out`, telemetry -> `sink` (runs.db);
//  - multi-host job: children = node launchers over ssh; their protocol lines (node_protocol.h)
//    carry the ranks' output and telemetry, handled as if the ranks were local;
//  - node launcher (`tessera _node`): children = this host's ranks; everything is relayed on
//    stdout as protocol lines, and stdin is watched for "stop" and for the connection's end.
// Its parts live apart: the children's processes and lines (child_process.h), the node protocol
// (node_protocol.h), which failure is reported (failure_cause.h); this class is the poll loop,
// reaping, and the wiring between them.

struct AttemptResult {
    std::string status;  // completed | failed | stopped
    std::string message;
    int failed_rank = -1;
    int64_t last_step = 0;
    bool saved_checkpoint = false;  // a rank recorded a checkpoint of this run
};

enum class Role { job, multi_job, node };

class Attempt {
  public:
    Attempt(const LaunchSpec& spec, TelemetrySink* sink, std::ostream& out, Role role)
        : spec_(spec), sink_(sink), out_(out), role_(role) {}

    ~Attempt() {  // on any exception: nothing survives us
        signal_children(children_, SIGKILL);
        for (auto& c : children_) {
            if (c.alive) ::waitpid(c.pid, &c.wait_status, 0);
            c.out_fd.reset();
            c.tel_fd.reset();
            c.in_fd.reset();
        }
    }

    // Single-host job and node launcher: one child per rank in [first, first + count).
    // `resume`: append spec.resume_argv (a restart of a run that saved a checkpoint).
    AttemptResult run_ranks(int first, int count, int attempt, bool resume,
                            const std::string& master_addr, int port, int64_t run_id,
                            int64_t start_step, const EnvList& node_env = {}) {
        UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        if (!devnull) throw Error(str_cat("launcher: /dev/null: ", std::strerror(errno)));
        ranks_.assign(size_t(spec_.mesh.world()), RankState{start_step, "", ""});
        for (int i = first; i < first + count; ++i) {
            Child& c = children_.emplace_back();
            c.rank = i;
            c.prefix = str_cat("[", mesh_coord_str(mesh_coord(spec_.mesh, i)), "] ");
            std::vector<std::string> argv = spec_.argv;
            if (resume) argv.insert(argv.end(), spec_.resume_argv.begin(), spec_.resume_argv.end());
            EnvList ours = {{"TESSERA_RANK", std::to_string(i)},
                            {"TESSERA_WORLD_SIZE", std::to_string(spec_.mesh.world())},
                            {"TESSERA_LOCAL_RANK", std::to_string(i - first)},
                            {"LOCAL_WORLD_SIZE", std::to_string(count)},
                            {"TESSERA_MASTER_ADDR", master_addr},
                            {"TESSERA_MASTER_PORT", std::to_string(port)},
                            {"TESSERA_TELEMETRY_FD", std::to_string(kTelemetryFd)},
                            {"TESSERA_RUN_ID", std::to_string(run_id)},
                            {"TESSERA_ATTEMPT", std::to_string(attempt)}};
            ours.insert(ours.end(), node_env.begin(), node_env.end());
            ExecPlan plan = exec_plan(argv, spec_.env, ours);
            child_spawn(c, plan, devnull.get(), false);
        }
        devnull.reset();
        return loop();
    }

    // Multi-host job: one node launcher per node, started with spec.node_argv.
    AttemptResult run_nodes(int attempt, bool resume, int64_t run_id, int64_t start_step) {
        ranks_.assign(size_t(spec_.mesh.world()), RankState{start_step, "", ""});
        for (size_t n = 0; n < spec_.nodes.size(); ++n) {
            Child& c = children_.emplace_back();
            c.node = int(n);
            c.prefix = str_cat("[", spec_.nodes[n].label, "] ");
            ExecPlan plan = exec_plan(spec_.node_argv(int(n), attempt, resume, run_id), {}, {});
            child_spawn(c, plan, -1, true);
        }
        return loop();
    }

  private:
    AttemptResult loop() {
        int stops_seen = g_stop_requests.load();
        Clock::time_point term_at{}, all_exited_at{}, last_flush = Clock::now();
        std::vector<pollfd> pfds;
        std::vector<std::pair<Child*, int>> owners;  // (child, 0 out | 1 telemetry | 2 stdin)
        bool watch_stdin = role_ == Role::node;
        for (;;) {
            // Ctrl-C (or "stop" from the job launcher): SIGINT to every rank.
            int stops = g_stop_requests.load();
            if (stops != stops_seen) {
                stops_seen = stops;
                stop_forwarded_ = true;
                forward_stop();
            }

            pfds.clear();
            owners.clear();
            for (auto& c : children_) {
                if (c.out_fd) {
                    pfds.push_back({c.out_fd.get(), POLLIN, 0});
                    owners.push_back({&c, 0});
                }
                if (c.tel_fd) {
                    pfds.push_back({c.tel_fd.get(), POLLIN, 0});
                    owners.push_back({&c, 1});
                }
            }
            if (watch_stdin) {
                pfds.push_back({0, POLLIN, 0});
                owners.push_back({nullptr, 2});
            }
            if (!pfds.empty()) {
                int pr = ::poll(pfds.data(), pfds.size(), 50);
                if (pr < 0 && errno != EINTR)
                    throw Error(str_cat("launcher: poll: ", std::strerror(errno)));
                for (size_t i = 0; pr > 0 && i < pfds.size(); ++i) {
                    if (!pfds[i].revents) continue;
                    if (owners[i].second == 2)
                        watch_stdin = read_stdin();
                    else
                        read_fd(*owners[i].first, owners[i].second == 1);
                }
            } else {
                ::usleep(20000);
            }

            reap();
            auto now = Clock::now();
            if (cause_.failed() || lost_) {
                if (term_at == Clock::time_point{}) term_at = now;
                if (!killed_ && now - term_at >= spec_.kill_grace) {
                    signal_children(children_, SIGKILL);
                    killed_ = true;
                }
            }
            if (now - last_flush >= kFlushEvery) {
                if (sink_) sink_->flush();
                out_.flush();
                last_flush = now;
            }

            bool any_alive = false, any_open = false;
            for (auto& c : children_) {
                any_alive |= c.alive;
                any_open |= c.out_fd || c.tel_fd;
            }
            if (!any_alive) {
                if (all_exited_at == Clock::time_point{}) all_exited_at = now;
                if (!any_open || now - all_exited_at >= kDrainAfterExit) break;
            }
        }
        for (auto& c : children_) {
            flush_partial(c);
            c.out_fd.reset();
            c.tel_fd.reset();
            c.in_fd.reset();
        }
        for (auto& r : ranks_) res_.last_step = std::max(res_.last_step, r.last_step);
        if (sink_) sink_->flush();
        out_.flush();
        res_.failed_rank = cause_.rank;
        res_.message = cause_.message;
        if (cause_.failed() || lost_) {
            res_.status = run_status::failed;
        } else {
            bool stopped = stop_forwarded_;
            for (auto& r : ranks_) stopped |= r.end_status == run_status::stopped;
            res_.status = stopped ? run_status::stopped : run_status::completed;
            if (stopped) res_.message = "stopped by request";
        }
        return res_;
    }

    void forward_stop() {
        if (role_ == Role::multi_job) {
            for (auto& c : children_)
                if (c.in_fd && !write_line(c.in_fd.get(), "stop")) c.in_fd.reset();
            line("[launcher] stop requested: forwarded to every node");
        } else {
            signal_children(children_, SIGINT);
            line("[launcher] stop requested: SIGINT sent to every rank");
        }
    }

    // The node launcher's stdin: "stop" lines, then EOF when the job launcher or the ssh
    // connection goes away. Returns whether to keep watching.
    bool read_stdin() {
        char chunk[256];
        ssize_t n = ::read(0, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
        if (n > 0) {
            stdin_buf_.append(chunk, size_t(n));
            if (stdin_buf_.find("stop\n") != std::string::npos) {
                stdin_buf_.clear();
                launch_request_stop();
            }
            return true;
        }
        // The connection is gone: nobody is left to tell; take the ranks down.
        if (!lost_ && !cause_.failed()) {
            lost_ = true;
            cause_.message = "the connection to the job launcher was lost";
            signal_children(children_, SIGTERM);
        }
        return false;
    }

    // Reads what an exited child left in its pipes, up to their end or kDrainLimit (a process it
    // started outside its group may still hold a pipe open).
    void drain(Child& c) {
        const auto until = Clock::now() + kDrainLimit;
        for (auto now = Clock::now(); (c.tel_fd || c.out_fd) && now < until; now = Clock::now()) {
            pollfd p[2];
            bool tel[2];
            nfds_t n = 0;
            if (c.tel_fd) p[n] = {c.tel_fd.get(), POLLIN, 0}, tel[n++] = true;
            if (c.out_fd) p[n] = {c.out_fd.get(), POLLIN, 0}, tel[n++] = false;
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
            if (::poll(p, n, int(std::max<int64_t>(1, left))) < 0 && errno != EINTR) return;
            for (nfds_t i = 0; i < n; ++i)
                if (p[i].revents) read_fd(c, tel[i]);
        }
    }

    void reap() {
        for (auto& c : children_) {
            if (!c.alive) continue;
            pid_t w = ::waitpid(c.pid, &c.wait_status, WNOHANG);
            if (w != c.pid) continue;
            c.alive = false;
            ::kill(-c.pid, SIGKILL);  // whatever the child left behind in its group
            c.in_fd.reset();
            bool clean = WIFEXITED(c.wait_status) && WEXITSTATUS(c.wait_status) == 0;
            // Drain what the child still said before judging its exit: a node's "d" line (a stop
            // it obeyed, exit 130) or "x" line (the rank that died), a rank's run_end record (why
            // it failed) and last metrics. The exit can be reaped before those lines are read;
            // judging first made a stopped multi-host run fail.
            if (!clean) drain(c);
            if (c.node >= 0) {
                if (!clean && !(stop_forwarded_ && c.reported_done)) {
                    if (!cause_.failed()) {
                        fail(-1, node_exit_message(c), true);
                    } else if (cause_.node_is_cause(c.reported_done, Clock::now())) {
                        cause_.take_node_cause(node_exit_message(c));
                        line(str_cat("[launcher] cause: ", cause_.message));
                    }
                }
                continue;
            }
            bool interrupted =
                stop_forwarded_ && WIFSIGNALED(c.wait_status) && WTERMSIG(c.wait_status) == SIGINT;
            // After the job launcher is gone (or told us to stop), ranks end because we signalled
            // them; a rank that died of anything else is still reported: its death and the end of
            // our stdin can arrive together, and it may be the run's cause.
            const bool ours =
                lost_ && WIFSIGNALED(c.wait_status) &&
                (WTERMSIG(c.wait_status) == SIGTERM || WTERMSIG(c.wait_status) == SIGKILL);
            if (!clean && !interrupted && !ours) {
                const RankState& st = ranks_[size_t(c.rank)];
                std::string msg =
                    death_message(c.rank, c.wait_status, st.last_step, st.end_message, spec_.mesh);
                const bool first = !cause_.failed() && !lost_;
                const bool cause = !first && cause_.is_root_cause(msg, killed_, Clock::now());
                if (role_ == Role::node && (first || cause || (lost_ && !cause_.failed())))
                    write_protocol(node_line('x', c.rank, msg));
                if (first)
                    fail(c.rank, msg, false);
                else if (cause)
                    take_cause(c.rank, msg);
            }
        }
    }

    std::string node_exit_message(const Child& c) {
        const LaunchNode& n = spec_.nodes[size_t(c.node)];
        std::string last = last_stderr_[c.node];
        int code = WIFEXITED(c.wait_status) ? WEXITSTATUS(c.wait_status) : -1;
        if (spec_.node_failure) {
            std::string m = spec_.node_failure(c.node, code, stderr_text_[c.node]);
            if (!m.empty())
                return str_cat(m, " (node launcher of ranks ", n.first_rank, "..",
                               n.first_rank + n.ranks - 1, ")");
        }
        if (WIFEXITED(c.wait_status) && WEXITSTATUS(c.wait_status) == 255)
            return str_cat("host ", n.label, ": the ssh connection was lost",
                           last.empty() ? "" : str_cat(" (", last, ")"),
                           " (node launcher of ranks ", n.first_rank, "..",
                           n.first_rank + n.ranks - 1, ")");
        return str_cat("host ", n.label, ": node launcher ", exit_text(c.wait_status),
                       last.empty() ? "" : str_cat(": ", last));
    }

    // A later rank death that cause_ takes as the root (failure_cause.h), said on the console.
    void take_cause(int rank, const std::string& msg) {
        cause_.take_cause(rank, msg);
        line(str_cat("[launcher] cause: ", cause_.message));
    }

    // The first failure: remembered, printed, everyone else told to stop.
    void fail(int rank, const std::string& msg, bool node) {
        cause_.first(rank, msg, node, Clock::now());
        line(str_cat("[launcher] ", msg, "; stopping the other ",
                     role_ == Role::multi_job ? "nodes" : "ranks"));
        if (role_ == Role::multi_job) {
            // Closing a node's stdin tells its launcher to take its ranks down and report "d";
            // SIGKILL follows after kill_grace if a node does not end. (A SIGTERM to ssh would
            // look like a lost connection.)
            for (auto& c : children_) c.in_fd.reset();
        } else {
            signal_children(children_, SIGTERM);
        }
    }

    void read_fd(Child& c, bool telemetry) {
        UniqueFd& fd = telemetry ? c.tel_fd : c.out_fd;
        std::string& buf = telemetry ? c.tel_buf : c.out_buf;
        auto emit = [&](const std::string& l) { on_line(c, telemetry, l); };
        char chunk[65536];
        ssize_t n = ::read(fd.get(), chunk, sizeof(chunk));
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
        if (n <= 0) {  // EOF or error: the child closed its end
            lines_finish(buf, emit);
            fd.reset();
            return;
        }
        lines_feed(buf, chunk, size_t(n), kMaxLineBytes, emit);
    }

    void flush_partial(Child& c) {
        lines_finish(c.out_buf, [&](const std::string& l) { on_line(c, false, l); });
        lines_finish(c.tel_buf, [&](const std::string& l) { on_line(c, true, l); });
    }

    void on_line(Child& c, bool telemetry, const std::string& l) {
        if (c.node >= 0) {
            if (telemetry)
                on_protocol(c, l);
            else if (!l.empty()) {
                last_stderr_[c.node] = l;
                if (stderr_text_[c.node].size() < 65536) stderr_text_[c.node] += l + "\n";
                line(c.prefix + l);
            }
        } else if (telemetry) {
            on_telemetry(c.rank, l);
        } else {
            line(c.prefix + l);
        }
    }

    // A console line: to our output, or relayed to the job launcher.
    void line(const std::string& text) {
        if (role_ == Role::node)
            write_protocol(node_line('o', text));
        else
            out_ << text << '\n';
    }

    void write_protocol(const std::string& l) {
        if (protocol_broken_) return;
        if (!write_line(1, l)) {  // the job launcher is gone: same as losing stdin
            protocol_broken_ = true;
            if (!lost_) {
                lost_ = true;
                cause_.message = "the connection to the job launcher was lost";
                signal_children(children_, SIGTERM);
            }
        }
    }

    void on_protocol(Child& c, const std::string& l) {
        const std::optional<NodeLine> n = node_line_parse(l, spec_.mesh.world());
        if (!n) {
            if (!l.empty()) line(c.prefix + l);  // not ours (a remote shell's message)
            return;
        }
        switch (n->kind) {
            case 'o':
                line(n->text);
                break;
            case 't':
                if (n->rank >= 0) on_telemetry(n->rank, n->text);
                break;
            case 'x': {
                std::string msg = str_cat(n->text, " on host ", spec_.nodes[size_t(c.node)].label);
                if (!cause_.failed())
                    fail(n->rank, msg, false);
                else if (cause_.is_root_cause(msg, killed_, Clock::now()))
                    take_cause(n->rank, msg);
                break;
            }
            case 'd':
                c.reported_done = true;
                break;
        }
    }

    // Garbage never stops the launcher: it becomes one warning line.
    void on_telemetry(int rank, const std::string& l) {
        if (l.empty()) return;
        if (role_ == Role::node) {  // relayed verbatim; the job launcher decodes it
            Record rec;
            try {
                rec = telemetry_decode(l);
                if (auto* m = std::get_if<MetricRecord>(&rec))
                    ranks_[size_t(rank)].last_step =
                        std::max(ranks_[size_t(rank)].last_step, m->step);
            } catch (const std::exception&) {
            }
            write_protocol(node_line('t', rank, l));
            return;
        }
        RankState& r = ranks_[size_t(rank)];
        Record rec;
        try {
            rec = telemetry_decode(l);
        } catch (const std::exception& e) {
            line(str_cat("[launcher] warning: rank ", rank, " sent a bad telemetry line (",
                         e.what(), "): ", l.substr(0, 200)));
            return;
        }
        if (auto* m = std::get_if<MetricRecord>(&rec)) {
            r.last_step = std::max(r.last_step, m->step);
        } else if (auto* e = std::get_if<RunEndRecord>(&rec)) {
            // The launcher finishes the run once for the whole job; remember what the rank said.
            r.end_status = e->status;
            if (e->status == run_status::failed) r.end_message = e->message;
            r.last_step = std::max(r.last_step, e->last_step);
            return;
        } else if (std::holds_alternative<RunStartRecord>(rec)) {
            return;  // the launcher began the run
        } else if (std::holds_alternative<CheckpointRecord>(rec)) {
            res_.saved_checkpoint = true;
        }
        sink_->write(rec);
    }

    const LaunchSpec& spec_;
    TelemetrySink* sink_;
    std::ostream& out_;
    Role role_;
    std::vector<Child> children_;
    std::vector<RankState> ranks_;
    std::map<int, std::string> last_stderr_;  // per node: ssh's last message
    std::map<int, std::string> stderr_text_;  // per node: everything ssh said (capped)
    std::string stdin_buf_;
    AttemptResult res_;
    bool stop_forwarded_ = false;
    FailureCause cause_;   // which failure the attempt reports (and the lost connection's message)
    bool killed_ = false;  // SIGKILL sent to the children after kill_grace
    bool lost_ = false;    // node launcher: the job launcher is gone
    bool protocol_broken_ = false;
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
    // Multi-host: node 0's launcher serves the rendezvous store, not this process.
    std::unique_ptr<TcpStoreServer> server;
    if (spec.nodes.empty()) server = std::make_unique<TcpStoreServer>("0.0.0.0", 0);
    g_stop_requests.store(0);
    try {
        {
            auto sink = store_sink(store, result.run_id);
            AttemptResult ar;
            // A restart resumes only a checkpoint this run saved: before its first, the newest
            // checkpoint in checkpoint.dir is another run's, and the restart starts afresh.
            bool saved_checkpoint = false;
            for (int attempt = 1;; ++attempt) {
                if (server) server->clear();  // a fresh rendezvous for every attempt
                result.attempts = attempt;
                sink->write(MetricRecord{result.last_step, -1, std::string(metric::launch_attempt),
                                         double(attempt), telemetry_now()});
                if (attempt > 1)
                    out << "[launcher] attempt " << attempt << " of " << spec.restarts + 1
                        << (saved_checkpoint
                                ? ": relaunching every rank with resume arguments"
                                : ": relaunching every rank from the start (this run saved no "
                                  "checkpoint yet)")
                        << std::endl;
                {
                    if (spec.nodes.empty()) {
                        Attempt a(spec, sink.get(), out, Role::job);
                        ar = a.run_ranks(0, spec.mesh.world(), attempt, saved_checkpoint,
                                         "127.0.0.1", server->port(), result.run_id,
                                         result.last_step);
                    } else {
                        Attempt a(spec, sink.get(), out, Role::multi_job);
                        ar =
                            a.run_nodes(attempt, saved_checkpoint, result.run_id, result.last_step);
                    }
                }
                saved_checkpoint |= ar.saved_checkpoint;
                result.last_step = std::max(result.last_step, ar.last_step);
                if (ar.status != run_status::failed) break;
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
            store.run_finish(result.run_id, run_status::failed, str_cat("launcher: ", e.what()),
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

void launch_request_stop() {
    g_stop_requests.fetch_add(1);
}

int launch_node(const NodeSpec& ns) {
    if (ns.argv.empty()) throw InputError("node launcher: the rank command line is empty");
    if (ns.ranks < 1 || ns.first_rank < 0 || ns.first_rank + ns.ranks > ns.mesh.world())
        throw InputError(str_cat("node launcher: ranks ", ns.first_rank, "+", ns.ranks,
                                 " do not fit the world of ", ns.mesh.world()));
    ::signal(SIGPIPE, SIG_IGN);  // a vanished job launcher shows up as a failed write
    std::unique_ptr<TcpStoreServer> server;
    if (ns.serve_store) server = std::make_unique<TcpStoreServer>("0.0.0.0", ns.master_port);
    LaunchSpec spec;
    spec.mesh = ns.mesh;
    spec.argv = ns.argv;
    spec.env = ns.env;
    spec.kill_grace = ns.kill_grace;
    EnvList node_env;
    if (!ns.gloo_host.empty()) node_env.push_back({"TESSERA_GLOO_HOST", ns.gloo_host});
    g_stop_requests.store(0);
    AttemptResult ar;
    {
        Attempt a(spec, nullptr, std::cout, Role::node);
        // a restart's resume arguments came in the node's argv from the job launcher
        ar = a.run_ranks(ns.first_rank, ns.ranks, ns.attempt, false, ns.master_addr, ns.master_port,
                         ns.run_id, 0, node_env);
    }
    write_line(1, node_line('d', ar.status));
    return run_status::exit_code(ar.status);
}

}  // namespace tessera
