// RunController: starts and stops `tessera train` for the studio (Qt-free). The child runs in its
// own process group with stdout and stderr on pipes; a reader thread splits them into lines (the
// launcher's "[dpD.tpT.ppP] " rank prefix parsed out) and hands each to a callback. stop() sends
// SIGINT (graceful: the run ends after its current step, exit 130) and SIGKILLs the group after a
// grace period. A pid file (.tessera-run.pid: "pid start_time") in the project folder lets a
// reopened studio re-attach to a run still alive, or mark a run whose process is gone as failed.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/unique_fd.h"

namespace tessera {

enum class RunState { idle, starting, running, stopping, finished, failed };
const char* run_state_name(RunState s);  // "idle", "starting", ...

// One console line of the child. coord is "dp0.tp1.pp0" for a rank's line of a parallel run, ""
// for the launcher's (or a single-rank run's) own lines; text is the line without the prefix.
struct ConsoleLine {
    std::string coord;
    int dp = -1, tp = -1, pp = -1;
    bool is_stderr = false;
    std::string text;
};

// Splits "[dp0.tp1.pp0] text" into its coordinates and text; lines without a prefix keep coord "".
ConsoleLine run_control_parse_line(const std::string& line, bool is_stderr);

inline constexpr const char* kRunPidFileName = ".tessera-run.pid";

struct RunPidFile {
    pid_t pid = 0;
    double start_time = 0;  // seconds since epoch, when the run was started
};
// Reads <project_dir>/.tessera-run.pid; false if there is none (or it is unreadable).
bool run_control_read_pid_file(const std::string& project_dir, RunPidFile* out);
// Whether `pid` is a live (not zombie) process.
bool run_control_process_alive(pid_t pid);
// Marks every run of `db_path` still "running" that started at or after `since` (epoch seconds,
// 2 s slack) as failed with `message`. Returns how many it marked.
int run_control_mark_failed(const std::string& db_path, double since, const std::string& message);

class RunController {
  public:
    using LineCallback = std::function<void(const ConsoleLine&)>;  // reader thread
    using StateCallback = std::function<void(RunState)>;           // any thread

    RunController() = default;
    ~RunController();  // a run still going is stopped (SIGINT, then SIGKILL) and waited for
    RunController(const RunController&) = delete;
    RunController& operator=(const RunController&) = delete;

    void set_line_callback(LineCallback cb) { line_cb_ = std::move(cb); }
    void set_state_callback(StateCallback cb) { state_cb_ = std::move(cb); }

    // Spawns `tessera_bin train yaml_path --db db_path [extra_args...]` (e.g. --resume, --set
    // k=v); writes the pid file next to yaml_path. Throws Error if a run is already active or the
    // binary cannot be started.
    void start(const std::string& tessera_bin, const std::string& yaml_path,
               const std::string& db_path, const std::vector<std::string>& extra_args = {});
    // Graceful stop: SIGINT now, SIGKILL to the process group after grace_s. Returns at once.
    void stop(double grace_s = 10.0);
    // Re-attaches to the run of a previous studio session: reads the pid file of project_dir. A
    // live process is watched (state running; no console, stop() still works); a dead one's
    // running runs in db_path are marked failed and the pid file removed. Returns the state.
    RunState attach(const std::string& project_dir, const std::string& db_path);
    // Blocks until the run has ended (finished/failed) or timeout_s passed; true if ended.
    bool wait(double timeout_s);

    RunState state() const { return state_.load(); }
    int exit_code() const { return exit_code_.load(); }  // -1 until exited, or killed by a signal
    pid_t pid() const { return pid_.load(); }
    std::string message() const;  // why it failed / how it ended

  private:
    void reader_loop(UniqueFd out_fd, UniqueFd err_fd);
    void watch_loop();  // attached runs: no pipes, poll liveness
    void finish(int wait_status, bool have_status);
    void set_state(RunState s);
    void join_thread();

    LineCallback line_cb_;
    StateCallback state_cb_;
    std::atomic<RunState> state_{RunState::idle};
    std::atomic<int> exit_code_{-1};
    std::atomic<pid_t> pid_{0};
    std::atomic<bool> stop_requested_{false};
    std::atomic<double> kill_deadline_{0};  // steady seconds; 0 = none
    std::thread thread_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::string message_;
    std::string project_dir_, db_path_;
    double start_time_ = 0;
};

}  // namespace tessera
