// RunController: spawn / watch / stop `tessera train` for the studio. See run_control.h.
#include "engine/launch/run_control.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/unique_fd.h"
#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {

double steady_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
double epoch_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string pid_file_path(const std::string& project_dir) {
    return (fs::path(project_dir.empty() ? "." : project_dir) / kRunPidFileName).string();
}

void write_pid_file(const std::string& project_dir, pid_t pid, double start_time) {
    std::ofstream f(pid_file_path(project_dir), std::ios::trunc);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%d %.3f\n", (int)pid, start_time);
    f << buf;
}

void remove_pid_file(const std::string& project_dir, pid_t pid) {
    RunPidFile p;
    if (run_control_read_pid_file(project_dir, &p) && p.pid == pid) {
        std::error_code ec;
        fs::remove(pid_file_path(project_dir), ec);
    }
}

// Reads what is available from fd into buf and emits complete lines; false at EOF/error.
bool drain_fd(int fd, std::string& buf, bool is_err, const RunController::LineCallback& cb) {
    char tmp[4096];
    ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) {
        if (!buf.empty() && cb) cb(run_control_parse_line(buf, is_err));
        buf.clear();
        return false;
    }
    buf.append(tmp, (size_t)n);
    size_t start = 0, nl;
    while ((nl = buf.find('\n', start)) != std::string::npos) {
        std::string line = buf.substr(start, nl - start);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (cb) cb(run_control_parse_line(line, is_err));
        start = nl + 1;
    }
    buf.erase(0, start);
    return true;
}

std::string describe_status(int status) {
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        return str_cat("killed by signal ", sig, " (", strsignal(sig), ")");
    }
    return str_cat("exited with code ", WEXITSTATUS(status));
}

}  // namespace

const char* run_state_name(RunState s) {
    switch (s) {
        case RunState::idle:
            return "idle";
        case RunState::starting:
            return "starting";
        case RunState::running:
            return "running";
        case RunState::stopping:
            return "stopping";
        case RunState::finished:
            return "finished";
        case RunState::failed:
            return "failed";
    }
    return "?";
}

ConsoleLine run_control_parse_line(const std::string& line, bool is_stderr) {
    ConsoleLine c;
    c.is_stderr = is_stderr;
    int dp, tp, pp, used = 0;
    if (line.size() > 3 && line[0] == '[' &&
        std::sscanf(line.c_str(), "[dp%d.tp%d.pp%d]%n", &dp, &tp, &pp, &used) == 3 && used > 0) {
        c.dp = dp;
        c.tp = tp;
        c.pp = pp;
        c.coord = line.substr(1, (size_t)used - 2);
        size_t text_at = (size_t)used;
        if (text_at < line.size() && line[text_at] == ' ') ++text_at;
        c.text = line.substr(text_at);
    } else {
        c.text = line;
    }
    return c;
}

bool run_control_read_pid_file(const std::string& project_dir, RunPidFile* out) {
    std::ifstream f(pid_file_path(project_dir));
    if (!f) return false;
    long pid = 0;
    double t = 0;
    if (!(f >> pid >> t) || pid <= 0) return false;
    out->pid = (pid_t)pid;
    out->start_time = t;
    return true;
}

bool run_control_process_alive(pid_t pid) {
    if (pid <= 0) return false;
    if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
    // a zombie (exited, not yet reaped) counts as gone: field 3 of /proc/<pid>/stat is its state
    std::ifstream st(str_cat("/proc/", pid, "/stat"));
    std::string all;
    if (st && std::getline(st, all)) {
        size_t rp = all.rfind(')');
        if (rp != std::string::npos && rp + 2 < all.size() &&
            (all[rp + 2] == 'Z' || all[rp + 2] == 'X'))
            return false;
    }
    return true;
}

int run_control_mark_failed(const std::string& db_path, double since, const std::string& message) {
    if (db_path.empty() || !fs::exists(db_path)) return 0;
    RunStore store = RunStore::open(db_path, false);
    int n = 0;
    for (const RunRow& r : store.runs_list()) {
        if (r.status != run_status::running || r.start_time + 2.0 < since) continue;
        store.run_finish(r.id, run_status::failed, message, r.last_step);
        ++n;
    }
    return n;
}

RunController::~RunController() {
    RunState s = state_.load();
    if (s == RunState::running || s == RunState::stopping || s == RunState::starting) {
        stop(5.0);
        wait(15.0);
    }
    join_thread();
}

std::string RunController::message() const {
    std::lock_guard<std::mutex> lk(mu_);
    return message_;
}

void RunController::set_state(RunState s) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        state_.store(s);
    }
    cv_.notify_all();
    if (state_cb_) state_cb_(s);
}

void RunController::join_thread() {
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void RunController::start(const std::string& tessera_bin, const std::string& yaml_path,
                          const std::string& db_path, const std::vector<std::string>& extra_args) {
    RunState s = state_.load();
    TS_CHECK(s != RunState::running && s != RunState::stopping && s != RunState::starting,
             "run control: a run is already active (pid ", pid_.load(), ")");
    join_thread();
    project_dir_ = fs::path(yaml_path).parent_path().string();
    db_path_ = db_path;
    exit_code_ = -1;
    pid_ = 0;
    stop_requested_ = false;
    kill_deadline_ = 0;
    {
        std::lock_guard<std::mutex> lk(mu_);
        message_.clear();
    }
    set_state(RunState::starting);

    std::vector<std::string> args{tessera_bin, "train", yaml_path, "--db", db_path};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv = exec_argv(args);

    UniquePipe out, err, exec_err;
    // a start that cannot happen: the controller says why, and so does the exception
    auto fail = [this](const std::string& m) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            message_ = m;
        }
        set_state(RunState::failed);
        throw Error(m);
    };
    if (!unique_pipe(out, O_CLOEXEC) || !unique_pipe(err, O_CLOEXEC) ||
        !unique_pipe(exec_err, O_CLOEXEC))
        fail(str_cat("run control: pipe: ", std::strerror(errno)));
    start_time_ = epoch_now();
    pid_t pid = ::fork();
    if (pid == 0) {
        // child: only async-signal-safe calls until exec
        ::setpgid(0, 0);
        ::signal(SIGINT, SIG_DFL);
        ::signal(SIGPIPE, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0) ::dup2(devnull, 0);
        ::dup2(out.write.get(), 1);
        ::dup2(err.write.get(), 2);
        ::execv(argv[0], argv.data());
        int e = errno;
        ssize_t w = ::write(exec_err.write.get(), &e, sizeof e);
        (void)w;
        ::_exit(127);
    }
    int fork_errno = errno;
    out.write.reset();
    err.write.reset();
    exec_err.write.reset();
    if (pid < 0) fail(str_cat("run control: fork: ", std::strerror(fork_errno)));  // pipes close
    ::setpgid(pid, pid);  // also from the parent: no race with an early killpg
    int e = 0;
    ssize_t n;
    do {
        n = ::read(exec_err.read.get(), &e, sizeof e);
    } while (n < 0 && errno == EINTR);
    exec_err.read.reset();
    if (n == (ssize_t)sizeof e) {  // exec failed
        ::waitpid(pid, nullptr, 0);
        out.read.reset();
        err.read.reset();
        fail(str_cat("run control: cannot run ", tessera_bin, ": ", std::strerror(e)));
    }
    pid_ = pid;
    write_pid_file(project_dir_, pid, start_time_);
    set_state(RunState::running);
    thread_ = std::thread([this, o = std::move(out.read), er = std::move(err.read)]() mutable {
        reader_loop(std::move(o), std::move(er));
    });
}

void RunController::stop(double grace_s) {
    RunState s = state_.load();
    if (s != RunState::running && s != RunState::starting) return;
    pid_t pid = pid_.load();
    if (pid <= 0) return;
    stop_requested_ = true;
    kill_deadline_ = steady_now() + grace_s;
    set_state(RunState::stopping);
    ::kill(pid, SIGINT);  // the launcher forwards it to its ranks
}

void RunController::reader_loop(UniqueFd out_owned, UniqueFd err_owned) {
    const int out_fd = out_owned.get(), err_fd = err_owned.get();
    std::string out_buf, err_buf;
    bool out_open = true, err_open = true;
    pid_t pid = pid_.load();
    while (out_open || err_open) {
        pollfd fds[2];
        int nf = 0;
        if (out_open) fds[nf++] = {out_fd, POLLIN, 0};
        if (err_open) fds[nf++] = {err_fd, POLLIN, 0};
        int r = ::poll(fds, (nfds_t)nf, 100);
        double dl = kill_deadline_.load();
        if (dl > 0 && steady_now() > dl) {
            ::killpg(pid, SIGKILL);
            kill_deadline_ = 0;
        }
        if (r < 0 && errno != EINTR) break;
        if (r <= 0) continue;
        for (int i = 0; i < nf; ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            bool is_err = fds[i].fd == err_fd;
            if (!drain_fd(fds[i].fd, is_err ? err_buf : out_buf, is_err, line_cb_)) {
                (is_err ? err_open : out_open) = false;
            }
        }
    }
    out_owned.reset();
    err_owned.reset();
    // pipes closed: the child (or whatever held them) has exited; reap it, still honouring the
    // SIGKILL deadline in case a grandchild kept the pipes and the child ignores SIGINT
    int status = 0;
    for (;;) {
        pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            finish(0, false);
            return;
        }
        double dl = kill_deadline_.load();
        if (dl > 0 && steady_now() > dl) {
            ::killpg(pid, SIGKILL);
            kill_deadline_ = 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    finish(status, true);
}

void RunController::watch_loop() {
    pid_t pid = pid_.load();
    while (run_control_process_alive(pid)) {
        double dl = kill_deadline_.load();
        if (dl > 0 && steady_now() > dl) {
            ::killpg(pid, SIGKILL);
            ::kill(pid, SIGKILL);
            kill_deadline_ = 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    finish(0, false);
}

// Decides finished vs failed; a run left "running" in the db is marked failed with the cause.
void RunController::finish(int status, bool have_status) {
    pid_t pid = pid_.load();
    std::string how;
    bool ok = false;
    if (have_status) {
        how = describe_status(status);
        if (WIFEXITED(status)) {
            exit_code_ = WEXITSTATUS(status);
            ok = exit_code_ == 0 || exit_code_ == 130;  // 130: stopped gracefully
        }
    } else {
        how = "ended (exit status unknown: process of an earlier studio session)";
    }
    std::string cause = str_cat("tessera (pid ", pid, ") ", how);
    int marked = 0;
    try {
        marked = run_control_mark_failed(
            db_path_, start_time_,
            stop_requested_ ? str_cat(cause, " after a stop request") : cause);
    } catch (const std::exception& e) {
        cause += str_cat("; could not mark the run failed: ", e.what());
    }
    if (marked > 0) ok = false;
    if (!have_status && marked == 0) ok = true;  // it finished its run itself
    remove_pid_file(project_dir_, pid);
    {
        std::lock_guard<std::mutex> lk(mu_);
        message_ = exit_code_ == 0     ? std::string(run_status::completed)
                   : exit_code_ == 130 ? std::string(run_status::stopped)
                                       : cause;
        if (!have_status) message_ = ok ? "ended" : cause;
    }
    set_state(ok ? RunState::finished : RunState::failed);
}

RunState RunController::attach(const std::string& project_dir, const std::string& db_path) {
    RunState s = state_.load();
    if (s == RunState::running || s == RunState::stopping || s == RunState::starting) return s;
    join_thread();
    RunPidFile p;
    if (!run_control_read_pid_file(project_dir, &p)) return state_.load();
    project_dir_ = project_dir;
    db_path_ = db_path;
    start_time_ = p.start_time;
    pid_ = p.pid;
    exit_code_ = -1;
    stop_requested_ = false;
    kill_deadline_ = 0;
    if (run_control_process_alive(p.pid)) {
        set_state(RunState::running);
        thread_ = std::thread([this] { watch_loop(); });
    } else {
        finish(0, false);
    }
    return state_.load();
}

bool RunController::wait(double timeout_s) {
    std::unique_lock<std::mutex> lk(mu_);
    bool ended = cv_.wait_for(lk, std::chrono::duration<double>(timeout_s), [this] {
        RunState s = state_.load();
        return s == RunState::finished || s == RunState::failed || s == RunState::idle;
    });
    lk.unlock();
    if (ended) join_thread();
    return ended;
}

}  // namespace tessera
