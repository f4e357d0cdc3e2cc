// RunController end to end: spawns `tessera train` on a tiny CPU config and checks console lines,
// exit states and what runs.db says afterwards; plus the rank-prefix parser and the pid file.
#include "engine/launch/run_control.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tessera;

namespace {
using tessera::test_support::TempDir;

std::string bin() {
    return std::string(TESSERA_BIN_DIR) + "/tessera";
}

void write_project(const fs::path& dir, int steps) {
    std::ofstream(dir / "project.yaml")
        << "model: {preset: gpt-tiny, n_layer: 2, d_model: 64, n_head: 2, seq_len: 32}\n"
           "data: {dataset: brown}\n"
        << "train: {steps: " << steps << ", micro_batch: 4, eval_every: 10}\n";
}

struct Lines {
    std::mutex mu;
    std::vector<ConsoleLine> v;
    void add(const ConsoleLine& l) {
        std::lock_guard<std::mutex> lk(mu);
        v.push_back(l);
    }
    int count_containing(const std::string& s) {
        std::lock_guard<std::mutex> lk(mu);
        int n = 0;
        for (auto& l : v) n += l.text.find(s) != std::string::npos;
        return n;
    }
};

// Starts `tessera train` on dir's project.yaml (runs.db beside it), its console lines into lines.
void start_run(RunController& rc, Lines& lines, const fs::path& dir) {
    rc.set_line_callback([&lines](const ConsoleLine& l) { lines.add(l); });
    rc.start(bin(), (dir / "project.yaml").string(), (dir / "runs.db").string());
}

std::vector<RunRow> runs_in(const fs::path& dir) {
    return RunStore::open((dir / "runs.db").string(), true).runs_list();
}

bool wait_for(const std::function<bool()>& f, double timeout_s) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
        if (f()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return f();
}

}  // namespace

TEST(RunControlParse, RankPrefix) {
    ConsoleLine a = run_control_parse_line("[dp1.tp0.pp2] step 3/20 | loss 4.1", false);
    EXPECT_EQ(a.coord, "dp1.tp0.pp2");
    EXPECT_EQ(a.dp, 1);
    EXPECT_EQ(a.tp, 0);
    EXPECT_EQ(a.pp, 2);
    EXPECT_EQ(a.text, "step 3/20 | loss 4.1");
    ConsoleLine b = run_control_parse_line("tessera: run 1 completed", true);
    EXPECT_EQ(b.coord, "");
    EXPECT_EQ(b.dp, -1);
    EXPECT_TRUE(b.is_stderr);
    EXPECT_EQ(b.text, "tessera: run 1 completed");
    EXPECT_EQ(run_control_parse_line("[not a prefix] x", false).coord, "");
}

TEST(RunControl, ShortRunCompletes) {
    TempDir t;
    write_project(t.path(), 20);
    Lines lines;
    RunController rc;
    start_run(rc, lines, t.path());
    EXPECT_GT(rc.pid(), 0);
    RunPidFile pf;
    EXPECT_TRUE(run_control_read_pid_file(t.path().string(), &pf));
    EXPECT_EQ(pf.pid, rc.pid());
    ASSERT_TRUE(rc.wait(120));
    EXPECT_EQ(rc.state(), RunState::finished) << rc.message();
    EXPECT_EQ(rc.exit_code(), 0);
    EXPECT_GE(lines.count_containing("step "), 20);
    EXPECT_FALSE(fs::exists(t.path() / kRunPidFileName));
    auto runs = runs_in(t.path());
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, tessera::run_status::completed);
    EXPECT_EQ(runs[0].last_step, 20);
}

TEST(RunControl, StopIsGraceful) {
    TempDir t;
    write_project(t.path(), 100000);
    Lines lines;
    RunController rc;
    start_run(rc, lines, t.path());
    ASSERT_TRUE(wait_for([&] { return lines.count_containing("step ") >= 3; }, 60));
    rc.stop(20.0);
    ASSERT_TRUE(rc.wait(60));
    EXPECT_EQ(rc.state(), RunState::finished) << rc.message();
    EXPECT_EQ(rc.exit_code(), 130);
    auto runs = runs_in(t.path());
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, tessera::run_status::stopped);
    EXPECT_LT(runs[0].last_step, 100000);
}

TEST(RunControl, KilledExternallyIsFailed) {
    TempDir t;
    write_project(t.path(), 100000);
    Lines lines;
    RunController rc;
    start_run(rc, lines, t.path());
    ASSERT_TRUE(wait_for([&] { return lines.count_containing("step ") >= 3; }, 60));
    ASSERT_EQ(::kill(rc.pid(), SIGKILL), 0);
    ASSERT_TRUE(rc.wait(60));
    EXPECT_EQ(rc.state(), RunState::failed);
    EXPECT_NE(rc.message().find("signal 9"), std::string::npos) << rc.message();
    auto runs = runs_in(t.path());
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, tessera::run_status::failed);
    EXPECT_NE(runs[0].message.find("signal 9"), std::string::npos) << runs[0].message;
}

TEST(RunControl, AttachMarksGoneProcessFailed) {
    TempDir t;
    write_project(t.path(), 100000);
    pid_t child_pid = 0;
    {
        // a previous "studio session": its run is SIGKILLed while the pid file stays behind
        Lines lines;
        RunController rc;
        start_run(rc, lines, t.path());
        child_pid = rc.pid();
        ASSERT_TRUE(wait_for([&] { return lines.count_containing("step ") >= 2; }, 60));
        // what a crashed studio leaves: a pid file naming a dead process, the run still "running"
        std::string keep;
        {
            std::ifstream f(t.path() / kRunPidFileName);
            std::getline(f, keep);
        }
        ::kill(child_pid, SIGKILL);
        ASSERT_TRUE(rc.wait(60));
        RunStore w = RunStore::open((t.path() / "runs.db").string(), false);
        w.run_finish(w.runs_list().at(0).id, "running", "", 2);  // as if nobody had noticed
        std::ofstream(t.path() / kRunPidFileName) << keep << "\n";
    }
    ASSERT_EQ(runs_in(t.path()).at(0).status, tessera::run_status::running);
    RunController rc2;
    RunState st = rc2.attach(t.path().string(), (t.path() / "runs.db").string());
    EXPECT_EQ(st, RunState::failed);
    EXPECT_FALSE(fs::exists(t.path() / kRunPidFileName));
    auto runs = runs_in(t.path());
    EXPECT_EQ(runs.at(0).status, tessera::run_status::failed);
    EXPECT_NE(runs.at(0).message.find(std::to_string(child_pid)), std::string::npos);
}

TEST(RunControl, MissingBinaryThrows) {
    TempDir t;
    write_project(t.path(), 5);
    RunController rc;
    EXPECT_THROW(rc.start((t.path() / "no-such-tessera").string(),
                          (t.path() / "project.yaml").string(), (t.path() / "runs.db").string()),
                 std::exception);
    EXPECT_EQ(rc.state(), RunState::failed);
    EXPECT_NE(rc.message().find("no-such-tessera"), std::string::npos);
}
