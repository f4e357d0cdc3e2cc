// What a user sees when a parallel job goes wrong, through the real `tessera train` launcher:
// a rank killed with SIGKILL, a rank that stalls before a collective (the watchdog), Ctrl-C, a
// crash with `restarts`, and memory that ZeRO divides by the DP degree.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tessera;
using Clock = std::chrono::steady_clock;

namespace {

fs::path make_project(const std::string& tag, const std::string& extra) {
    static const tessera::test_support::TempDir root("fail");  // removed when the process exits
    fs::path dir = root.path() / tag;
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "project.yaml") << "name: " << tag << R"(
model: {preset: gpt-tiny, n_layer: 8, n_head: 4, d_model: 64, seq_len: 16}
data: {dataset: brown}
checkpoint: {dir: ck, every: 2, keep: 3}
log: {db: runs.db, every: 1}
)" << extra;
    return dir;
}

struct Proc {
    pid_t pid = -1;
    int out_fd = -1;
    std::string output;
    // reads what is available (non-blocking)
    void pump() {
        char buf[4096];
        for (;;) {
            ssize_t n = ::read(out_fd, buf, sizeof buf);
            if (n <= 0) break;
            output.append(buf, n);
        }
    }
};

Proc start(const fs::path& dir, const std::vector<std::string>& env) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    Proc p;
    p.pid = ::fork();
    if (p.pid == 0) {
        ::dup2(fds[1], 1);
        ::dup2(fds[1], 2);
        ::close(fds[0]);
        for (const auto& e : env) ::putenv(strdup(e.c_str()));
        std::string bin = std::string(TESSERA_BIN_DIR) + "/tessera";
        std::string cfg = (dir / "project.yaml").string();
        ::execl(bin.c_str(), bin.c_str(), "train", cfg.c_str(), (char*)nullptr);
        ::_exit(127);
    }
    ::close(fds[1]);
    p.out_fd = fds[0];
    ::fcntl(p.out_fd, F_SETFL, O_NONBLOCK);
    return p;
}

// Waits for the launcher to exit; returns its exit status (-1 on timeout, after killing it).
int wait_exit(Proc& p, double timeout_s) {
    auto t0 = Clock::now();
    for (;;) {
        p.pump();
        int st = 0;
        pid_t r = ::waitpid(p.pid, &st, WNOHANG);
        if (r == p.pid) {
            p.pump();
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        if (std::chrono::duration<double>(Clock::now() - t0).count() > timeout_s) {
            ::kill(p.pid, SIGKILL);
            ::waitpid(p.pid, &st, 0);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

bool wait_for_output(Proc& p, const std::string& needle, double timeout_s) {
    auto t0 = Clock::now();
    while (std::chrono::duration<double>(Clock::now() - t0).count() < timeout_s) {
        p.pump();
        if (p.output.find(needle) != std::string::npos) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

// pids of `tessera _rank` processes whose command line mentions `config`
std::vector<pid_t> rank_pids(const std::string& config) {
    std::vector<pid_t> out;
    DIR* d = ::opendir("/proc");
    while (dirent* e = d ? ::readdir(d) : nullptr) {
        pid_t pid = std::atoi(e->d_name);
        if (pid <= 0) continue;
        std::ifstream f("/proc/" + std::string(e->d_name) + "/cmdline");
        std::string cmd((std::istreambuf_iterator<char>(f)), {});
        std::replace(cmd.begin(), cmd.end(), '\0', ' ');
        if (cmd.find(" _rank ") != std::string::npos && cmd.find(config) != std::string::npos)
            out.push_back(pid);
    }
    if (d) ::closedir(d);
    return out;
}

RunRow last_run(const fs::path& dir) {
    RunStore store = RunStore::open((dir / "runs.db").string(), true);
    auto runs = store.runs_list();
    EXPECT_FALSE(runs.empty());
    return runs.empty() ? RunRow{} : runs.back();
}

}  // namespace

TEST(Failure, KilledRankEndsTheJobWithinTenSecondsAndKeepsRows) {
    fs::path dir =
        make_project("kill",
                     "train: {steps: 100000, micro_batch: 2, grad_accum: 2, eval_every: 0}\n"
                     "parallel: {dp: 2, pp: 2}\n");
    Proc p = start(dir, {});
    ASSERT_TRUE(wait_for_output(p, "step      3/", 60)) << p.output;
    auto pids = rank_pids((dir / "project.yaml").string());
    ASSERT_EQ(pids.size(), 4u) << p.output;
    auto t0 = Clock::now();
    ASSERT_EQ(::kill(pids[1], SIGKILL), 0);
    int code = wait_exit(p, 30);
    double took = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_NE(code, 0);
    EXPECT_LT(took, 10.0) << p.output;
    for (pid_t r : pids) EXPECT_NE(::kill(r, 0), 0) << "rank " << r << " still alive";
    RunStore store = RunStore::open((dir / "runs.db").string(), true);
    EXPECT_EQ(store.integrity_check(), "ok");
    RunRow run = store.runs_list().back();
    EXPECT_EQ(run.status, run_status::failed);
    EXPECT_NE(run.message.find("SIGKILL"), std::string::npos) << run.message;
    EXPECT_NE(run.message.find("rank "), std::string::npos) << run.message;
    // every committed step is there, in order, without gaps
    auto losses = store.metrics(run.id, metric::train_loss);
    ASSERT_GE(losses.size(), 3u);
    for (size_t i = 0; i < losses.size(); ++i) EXPECT_EQ(losses[i].step, (int64_t)i + 1);
    EXPECT_GE(run.last_step, (int64_t)losses.size());
}

TEST(Failure, WatchdogNamesTheStalledCollective) {
    fs::path dir = make_project("stall",
                                "train: {steps: 50, micro_batch: 2, grad_accum: 1, eval_every: 0}\n"
                                "parallel: {dp: 2}\n");
    auto t0 = Clock::now();
    Proc p = start(dir, {"TESSERA_FAULT_STALL=1:2", "TESSERA_COMM_TIMEOUT_MS=2000"});
    int code = wait_exit(p, 60);
    double took = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_NE(code, 0) << p.output;
    EXPECT_LT(took, 30.0);
    // rank 0 waits in a collective that rank 1 never joins: the watchdog names both
    EXPECT_NE(p.output.find("did not complete within 2000 ms"), std::string::npos) << p.output;
    EXPECT_NE(p.output.find("rank 0 (dp0.tp0.pp0)"), std::string::npos) << p.output;
    RunRow run = last_run(dir);
    EXPECT_EQ(run.status, run_status::failed);
    RunStore store = RunStore::open((dir / "runs.db").string(), true);
    bool named = false;
    for (const auto& e : store.errors(run.id))
        named |= e.message.find("all_reduce") != std::string::npos ||
                 e.message.find("reduce_scatter") != std::string::npos;
    EXPECT_TRUE(named) << "no stored error names the collective";
}

TEST(Failure, CtrlCStopsEveryRankAfterTheSameStep) {
    fs::path dir =
        make_project("stop",
                     "train: {steps: 100000, micro_batch: 2, grad_accum: 2, eval_every: 0}\n"
                     "parallel: {tp: 2, pp: 2}\n");
    Proc p = start(dir, {});
    ASSERT_TRUE(wait_for_output(p, "step      2/", 60)) << p.output;
    ::kill(p.pid, SIGINT);
    int code = wait_exit(p, 30);
    EXPECT_EQ(code, 130) << p.output;  // the shell's code for a command stopped by Ctrl-C
    RunRow run = last_run(dir);
    EXPECT_EQ(run.status, run_status::stopped) << run.message;
    EXPECT_TRUE(fs::exists(dir / "ck" / "latest")) << "no checkpoint saved on stop";
}

TEST(Failure, RestartResumesFromTheLastCheckpoint) {
    fs::path dir = make_project(
        "restart",
        "train: {steps: 8, micro_batch: 2, grad_accum: 2, eval_every: 0, restarts: 1}\n"
        "parallel: {dp: 2, pp: 2}\n");
    Proc p = start(dir, {"TESSERA_FAULT_CRASH=1:5"});
    int code = wait_exit(p, 120);
    EXPECT_EQ(code, 0) << p.output;
    RunRow run = last_run(dir);
    EXPECT_EQ(run.status, run_status::completed) << run.message;
    RunStore store = RunStore::open((dir / "runs.db").string(), true);
    auto attempts = store.metrics(run.id, metric::launch_attempt);
    EXPECT_EQ(attempts.size(), 2u);
    // The second attempt resumed from the step-4 checkpoint: its first step is 5, and steps 1..4
    // appear once. (Whether the first attempt's own step 5 reached the store is a race between
    // rank 0's flush and the launcher tearing the job down after rank 1's crash.)
    auto losses = store.metrics(run.id, metric::train_loss);
    const double second_attempt = attempts.back().wall_time;
    int step1 = 0, again_before_5 = 0, again_5 = 0;
    for (const auto& m : losses) {
        step1 += m.step == 1;
        if (m.wall_time >= second_attempt) again_before_5 += m.step < 5, again_5 += m.step == 5;
    }
    EXPECT_EQ(step1, 1);
    EXPECT_EQ(again_before_5, 0);
    EXPECT_EQ(again_5, 1);
    EXPECT_EQ(losses.back().step, 8);
    // every rank recorded its device; the second attempt's records replaced the first's
    auto devices = store.devices(run.id);
    ASSERT_EQ(devices.size(), 4u);
    for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(devices[r].rank, r);
        EXPECT_EQ(devices[r].name, kDeviceCpu);
        EXPECT_GT(devices[r].memory_bytes, 0);
        EXPECT_GT(devices[r].wall_time, attempts.back().wall_time - 1.0);  // the second attempt's
    }
}

// Measured per-rank memory: ZeRO 1 halves the optimizer states on dp2, ZeRO 2 also the
// gradients, ZeRO 3 also the parameters. Slices are exact halves; ZeRO 2/3 also hold, for a
// moment, the full gradients (and ZeRO 3 the gathered parameters) of about one layer plus the
// tied embedding: with 8 blocks that is bounded by a quarter of the model.
TEST(ZeroMemory, MeasuredCategoriesDivideByDp) {
    std::map<int, std::map<std::string, double>> peak;  // zero -> category -> rank-0 bytes
    for (int zero = 0; zero <= 3; ++zero) {
        fs::path dir =
            make_project("mem" + std::to_string(zero),
                         "train: {steps: 2, micro_batch: 2, grad_accum: 2, eval_every: 0}\n"
                         "parallel: {dp: 2, zero: " +
                             std::to_string(zero) + "}\n");
        Proc p = start(dir, {"TESSERA_EXTRA_SETS="});
        ASSERT_EQ(wait_exit(p, 60), 0) << p.output;
        RunStore store = RunStore::open((dir / "runs.db").string(), true);
        RunRow run = store.runs_list().back();
        for (MemCategory cat : {MemCategory::params, MemCategory::grads, MemCategory::optimizer}) {
            double& p = peak[zero][std::string(mem_category_name(cat))];
            for (const auto& m : store.metrics(run.id, metric::mem_category_bytes(cat)))
                if (m.rank == 0) p = std::max(p, m.value);
        }
    }
    auto ratio = [&](int zero, const char* cat) { return peak[zero][cat] / peak[0][cat]; };
    EXPECT_NEAR(ratio(1, "optimizer"), 0.5, 0.01);
    EXPECT_DOUBLE_EQ(peak[1]["grads"], peak[0]["grads"]);
    EXPECT_NEAR(ratio(2, "optimizer"), 0.5, 0.01);
    EXPECT_LT(ratio(2, "grads"), 0.75) << peak[2]["grads"] << " vs " << peak[0]["grads"];
    EXPECT_DOUBLE_EQ(peak[2]["params"], peak[0]["params"]);
    EXPECT_NEAR(ratio(3, "optimizer"), 0.5, 0.01);
    EXPECT_LT(ratio(3, "grads"), 0.75);
    EXPECT_LT(ratio(3, "params"), 0.75) << peak[3]["params"] << " vs " << peak[0]["params"];
}
