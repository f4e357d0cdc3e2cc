// launch_job() with /bin/sh scripts as ranks: they print lines and write telemetry JSON to
// $TESSERA_TELEMETRY_FD. Checks prefixes, metrics in runs.db, teardown within seconds when a rank
// dies (no survivors), failure messages, restarts with resume arguments, and stop.
#include "engine/launch/launcher.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/core/error.h"
#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "tests/support/temp_dir.h"

using namespace tessera;

namespace {
using tessera::test_support::TempDir;

// A metric line the script prints with printf: %s = rank, step given.
std::string metric_printf(const std::string& name, int64_t step, double value) {
    return str_cat("printf '{\"v\":1,\"type\":\"metric\",\"step\":", step,
                   ",\"rank\":%s,\"name\":\"", name, "\",\"value\":", value,
                   ",\"wall_time\":1.0}\\n' $TESSERA_RANK >&$TESSERA_TELEMETRY_FD; ");
}

LaunchSpec spec_for(const MeshShape& mesh, const std::string& script, const std::string& db) {
    LaunchSpec s;
    s.mesh = mesh;
    s.argv = {"/bin/sh", "-c", script, "rank"};
    s.db_path = db;
    s.run.name = "launcher-test";
    s.kill_grace = std::chrono::milliseconds(1000);
    return s;
}

int open_fd_count() {
    int n = 0;
    DIR* d = opendir("/proc/self/fd");
    while (readdir(d)) ++n;
    closedir(d);
    return n;
}

// Alive = exists and is not a zombie (an orphaned grandchild killed with its group is reaped by
// init, not by us, so it may linger a moment as a zombie).
bool process_exists(pid_t pid) {
    std::ifstream f(str_cat("/proc/", pid, "/stat"));
    std::string line;
    if (!std::getline(f, line)) return false;
    size_t paren = line.rfind(')');
    return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

std::vector<pid_t> read_pids(const std::string& dir) {
    std::vector<pid_t> out;
    DIR* d = opendir(dir.c_str());
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n.rfind("pid", 0) != 0) continue;
        std::ifstream f(dir + "/" + n);
        pid_t p;
        while (f >> p) out.push_back(p);
    }
    closedir(d);
    return out;
}

// ------------------------------------------------------------------------------------------------

TEST(Launcher, PrefixesOutputAndStoresTelemetry) {
    TempDir t;
    std::string db = t.path().string() + "/runs.db";
    std::string script =
        "echo \"hello from $TESSERA_RANK of $TESSERA_WORLD_SIZE attempt $TESSERA_ATTEMPT\"; "
        "echo \"to stderr\" >&2; " +
        metric_printf("train/loss", 1, 2.5) + metric_printf("train/loss", 2, 2.0) +
        "echo 'not json {' >&$TESSERA_TELEMETRY_FD; "
        "echo \"fds: $(ls /proc/$$/fd | tr '\\n' ' ')\"; "
        "printf 'no newline at end'";
    int fds_before = open_fd_count();
    std::ostringstream out;
    LaunchResult r = launch_job(spec_for({2, 1, 1}, script, db), out);
    std::string o = out.str();
    SCOPED_TRACE(o);
    EXPECT_EQ(r.status, run_status::completed);
    EXPECT_EQ(r.attempts, 1);
    EXPECT_EQ(r.last_step, 2);
    EXPECT_NE(o.find("[dp0.tp0.pp0] hello from 0 of 2 attempt 1\n"), std::string::npos);
    EXPECT_NE(o.find("[dp1.tp0.pp0] hello from 1 of 2 attempt 1\n"), std::string::npos);
    EXPECT_NE(o.find("[dp1.tp0.pp0] to stderr\n"), std::string::npos);
    EXPECT_NE(o.find("[dp0.tp0.pp0] no newline at end\n"), std::string::npos);
    // stdin, stdout, stderr, telemetry -- nothing else leaked into the rank (ls's own dir fd aside)
    EXPECT_NE(o.find("[dp0.tp0.pp0] fds: 0 1 2 3 "), std::string::npos);
    EXPECT_NE(o.find("[launcher] warning: rank 1 sent a bad telemetry line"), std::string::npos);
    EXPECT_EQ(open_fd_count(), fds_before);

    RunStore store = RunStore::open(db, true);
    auto run = store.run_get(r.run_id);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->status, run_status::completed);
    EXPECT_EQ(run->world_size, 2);
    EXPECT_EQ(run->name, "launcher-test");
    auto loss = store.metrics(r.run_id, metric::train_loss);
    ASSERT_EQ(loss.size(), 4u);
    int rank1 = 0;
    for (auto& m : loss) rank1 += m.rank == 1;
    EXPECT_EQ(rank1, 2);
    auto attempt = store.metric_last(r.run_id, metric::launch_attempt);
    ASSERT_TRUE(attempt);
    EXPECT_EQ(attempt->value, 1.0);
}

TEST(Launcher, KilledRankTearsDownTheJob) {
    TempDir t;
    std::string db = t.path().string() + "/runs.db";
    // Every rank records its shell pid and its sleep's pid; rank 3 dies by SIGKILL at step 5.
    std::string script = metric_printf("train/loss", 1, 3.0) + "if [ $TESSERA_RANK = 3 ]; then " +
                         metric_printf("train/loss", 5, 1.5) +
                         "sleep 0.3; kill -9 $$; fi; "
                         "sleep 30 & echo $$ $! > " +
                         t.path().string() + "/pid$TESSERA_RANK; wait";
    auto t0 = std::chrono::steady_clock::now();
    std::ostringstream out;
    LaunchResult r = launch_job(spec_for({2, 2, 1}, script, db), out);
    auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    SCOPED_TRACE(out.str());
    EXPECT_LT(secs, 10.0);
    EXPECT_EQ(r.status, run_status::failed);
    EXPECT_EQ(r.message, "rank 3 (dp1.tp1.pp0) killed by signal 9 (SIGKILL) at step 5");
    EXPECT_EQ(r.last_step, 5);
    auto pids = read_pids(t.path().string());
    EXPECT_GE(pids.size(), 6u);  // three survivors x (shell, sleep)
    for (pid_t p : pids) EXPECT_FALSE(process_exists(p)) << "pid " << p << " survived";

    RunStore store = RunStore::open(db, true);
    EXPECT_EQ(store.integrity_check(), "ok");
    auto run = store.run_get(r.run_id);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->status, run_status::failed);
    EXPECT_EQ(run->message, r.message);
    EXPECT_EQ(store.metrics(r.run_id, metric::train_loss).size(),
              5u);  // 4 x step 1 + rank 3's step 5
    auto errors = store.errors(r.run_id);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0].rank, 3);
    EXPECT_NE(errors[0].message.find("SIGKILL"), std::string::npos);
}

TEST(Launcher, RanksIgnoringSigtermAreKilledAfterGrace) {
    TempDir t;
    std::ostringstream out;
    auto t0 = std::chrono::steady_clock::now();
    LaunchSpec s = spec_for({3, 1, 1},
                            "if [ $TESSERA_RANK = 0 ]; then sleep 0.2; exit 1; fi; "
                            "trap '' TERM; sleep 30",
                            t.path().string() + "/runs.db");
    s.kill_grace = std::chrono::milliseconds(700);
    LaunchResult r = launch_job(s, out);
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    EXPECT_EQ(r.status, run_status::failed);
    EXPECT_EQ(r.message, "rank 0 (dp0.tp0.pp0) exited with code 1 at step 0");
    EXPECT_GE(ms, 700 + 200);  // waited out the grace period
    EXPECT_LT(ms, 5000);
}

TEST(Launcher, ExitCodeIsNamed) {
    TempDir t;
    std::ostringstream out;
    LaunchResult r =
        launch_job(spec_for({2, 1, 1}, "if [ $TESSERA_RANK = 1 ]; then exit 3; fi; sleep 30",
                            t.path().string() + "/runs.db"),
                   out);
    EXPECT_EQ(r.status, run_status::failed);
    EXPECT_EQ(r.message, "rank 1 (dp1.tp0.pp0) exited with code 3 at step 0");
}

TEST(Launcher, RankFailureMessageFromRunEnd) {
    TempDir t;
    std::ostringstream out;
    std::string script =
        "echo '{\"v\":1,\"type\":\"run_end\",\"status\":\"failed\",\"message\":\"loss is NaN\","
        "\"last_step\":7,\"wall_time\":1.0}' >&$TESSERA_TELEMETRY_FD; exit 1";
    LaunchResult r = launch_job(spec_for({1, 1, 1}, script, t.path().string() + "/runs.db"), out);
    EXPECT_EQ(r.status, run_status::failed);
    EXPECT_EQ(r.message, "rank 0 (dp0.tp0.pp0) exited with code 1 at step 7: loss is NaN");
}

// The same record, arriving only after the rank's exit was reaped (written by a process the rank
// started in a session of its own, 0.3 s later): the launcher reads it before judging the exit.
TEST(Launcher, ARanksRunEndReadAfterItsExitStillNamesTheCause) {
    TempDir t;
    std::ostringstream out;
    // the outer shell's double quotes keep the JSON's quotes as \"
    std::string script =
        R"(setsid sh -c "sleep 0.3; echo '{\"v\":1,\"type\":\"run_end\",\"status\":\"failed\",)"
        R"(\"message\":\"loss is NaN\",\"last_step\":7,\"wall_time\":1.0}' )"
        R"(>&$TESSERA_TELEMETRY_FD" & exit 1)";
    LaunchResult r = launch_job(spec_for({1, 1, 1}, script, t.path().string() + "/runs.db"), out);
    EXPECT_EQ(r.status, run_status::failed);
    EXPECT_EQ(r.message, "rank 0 (dp0.tp0.pp0) exited with code 1 at step 7: loss is NaN")
        << out.str();
}

// Two ranks running `script` with `restarts` and resume argument --resume: a job that completes
// on its second attempt.
LaunchResult two_ranks_restarted(const std::string& script, const std::string& db, int restarts,
                                 std::ostringstream& out) {
    LaunchSpec s = spec_for({2, 1, 1}, script, db);
    s.restarts = restarts;
    s.resume_argv = {"--resume"};
    LaunchResult r = launch_job(s, out);
    EXPECT_EQ(r.status, run_status::completed) << out.str();
    EXPECT_EQ(r.attempts, 2) << out.str();
    return r;
}

// Rank 0 records a checkpoint, then rank 1 fails: the restart appends the resume arguments.
TEST(Launcher, RestartAppendsResumeArgs) {
    TempDir t;
    std::string db = t.path().string() + "/runs.db";
    std::string script =
        "if [ \"$1\" = --resume ]; then echo \"resumed attempt $TESSERA_ATTEMPT run "
        "$TESSERA_RUN_ID\"; exit 0; fi; "
        "if [ $TESSERA_RANK = 0 ]; then echo '{\"v\":1,\"type\":\"checkpoint\",\"step\":2,"
        "\"path\":\"ck/step_00000002\",\"wall_time\":1.0}' >&$TESSERA_TELEMETRY_FD; fi; "
        "if [ $TESSERA_RANK = 1 ]; then sleep 0.5; exit 1; fi; sleep 30";
    std::ostringstream out;
    LaunchResult r = two_ranks_restarted(script, db, 2, out);
    SCOPED_TRACE(out.str());
    EXPECT_NE(out.str().find(str_cat("[dp1.tp0.pp0] resumed attempt 2 run ", r.run_id)),
              std::string::npos);
    RunStore store = RunStore::open(db, true);
    EXPECT_EQ(store.runs_list().size(), 1u);  // one run row for the job
    EXPECT_EQ(store.run_get(r.run_id)->status, run_status::completed);
    auto errors = store.errors(r.run_id);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].message.find("attempt 1: rank 1 (dp1.tp0.pp0) exited with code 1"),
              std::string::npos);
    EXPECT_EQ(store.metric_last(r.run_id, metric::launch_attempt)->value, 2.0);
}

// A run that fails before its first checkpoint restarts from the start: the newest checkpoint in
// checkpoint.dir then is another run's, which --resume would continue.
TEST(Launcher, RestartBeforeAnyCheckpointStartsAfresh) {
    TempDir t;
    std::string script =
        "if [ \"$1\" = --resume ]; then echo resumed; exit 3; fi; "
        "if [ $TESSERA_ATTEMPT = 1 ] && [ $TESSERA_RANK = 1 ]; then exit 1; fi; "
        "if [ $TESSERA_ATTEMPT = 1 ]; then sleep 30; fi; echo \"fresh attempt $TESSERA_ATTEMPT\"";
    std::ostringstream out;
    two_ranks_restarted(script, t.path().string() + "/runs.db", 1, out);
    SCOPED_TRACE(out.str());
    EXPECT_NE(out.str().find("[dp1.tp0.pp0] fresh attempt 2"), std::string::npos);
    EXPECT_EQ(out.str().find("resumed"), std::string::npos);
    EXPECT_NE(out.str().find("relaunching every rank from the start (this run saved no "
                             "checkpoint yet)"),
              std::string::npos);
}

TEST(Launcher, RestartsExhaustedFails) {
    TempDir t;
    LaunchSpec s = spec_for({1, 1, 1}, "exit 4", t.path().string() + "/runs.db");
    s.restarts = 1;
    std::ostringstream out;
    LaunchResult r = launch_job(s, out);
    EXPECT_EQ(r.status, run_status::failed);
    EXPECT_EQ(r.attempts, 2);
    EXPECT_NE(r.message.find("exited with code 4"), std::string::npos);
}

TEST(Launcher, StopForwardsSigint) {
    TempDir t;
    std::string script =
        "trap 'echo stopping; exit 0' INT; i=0; while [ $i -lt 300 ]; do "
        "sleep 0.1; i=$((i+1)); done; exit 5";
    std::thread stopper([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        launch_request_stop();
    });
    std::ostringstream out;
    auto t0 = std::chrono::steady_clock::now();
    LaunchResult r = launch_job(spec_for({2, 1, 1}, script, t.path().string() + "/runs.db"), out);
    stopper.join();
    SCOPED_TRACE(out.str());
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
    EXPECT_EQ(r.status, run_status::stopped);
    EXPECT_NE(out.str().find("[dp1.tp0.pp0] stopping"), std::string::npos);
}

// Two fake node launchers (the multi-host job launcher's children): each waits for the "stop"
// line, exits 130 at once and says "d stopped" only afterwards, through a grandchild in its own
// session, so the exit is always reaped before the line is read. The run must end stopped, not
// failed: the launcher reads what a node still said before judging its exit (a race that failed
// SshTest.CtrlCStopsEveryHostAfterTheSameStep about once in eight runs).
TEST(Launcher, ANodeThatSaysDoneAfterItsExitIsReapedStillStoppedTheRun) {
    TempDir t;
    LaunchSpec spec = spec_for({2, 1, 1}, "true", t.path().string() + "/runs.db");
    spec.nodes = {{"node-a", 0, 1}, {"node-b", 1, 1}};
    spec.node_argv = [](int, int, bool, int64_t) {
        return std::vector<std::string>{"/bin/sh", "-c",
                                        "read line; [ \"$line\" = stop ] || exit 9; "
                                        "setsid sh -c 'sleep 0.3; echo \"d stopped\"' & exit 130"};
    };
    std::thread stopper([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        launch_request_stop();
    });
    std::ostringstream out;
    LaunchResult r = launch_job(spec, out);
    stopper.join();
    SCOPED_TRACE(out.str());
    EXPECT_EQ(r.status, run_status::stopped);
    EXPECT_EQ(out.str().find("exited with code 130"), std::string::npos);
}

TEST(Launcher, MissingExecutable) {
    TempDir t;
    LaunchSpec s;
    s.argv = {"/nonexistent/tessera-rank"};
    s.db_path = t.path().string() + "/runs.db";
    std::ostringstream out;
    LaunchResult r = launch_job(s, out);
    EXPECT_EQ(r.status, run_status::failed);
    EXPECT_NE(r.message.find("exited with code 127"), std::string::npos);
    EXPECT_NE(out.str().find("cannot execute /nonexistent/tessera-rank"), std::string::npos);
}

TEST(Launcher, EmptyArgvIsInputError) {
    LaunchSpec s;
    std::ostringstream out;
    EXPECT_THROW(launch_job(s, out), InputError);
}

}  // namespace
