// The one-writer design under real processes: a forked writer appends steps while this process
// polls through its own read-only connection (no SQLITE_BUSY, never half a step), and a writer
// killed with SIGKILL mid-stream leaves an intact database holding every batch it reported.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "engine/core/error.h"
#include "engine/store/run_store.h"
#include "store_test_util.h"

using namespace tessera;

namespace {

int64_t create_run(const std::string& path) {
    RunStore s = RunStore::open(path);
    return s.run_begin(RunStartRecord{"proc", "", "localhost", 1, "", telemetry_now()});
}

std::vector<Record> step_records(int64_t step, int n) {
    std::vector<Record> recs;
    for (int k = 0; k < n; ++k)
        recs.push_back(MetricRecord{step, k % 4, str_cat("m", k), double(step * 100 + k), 1.0});
    return recs;
}

bool read_full(int fd, void* buf, size_t n) {
    char* p = static_cast<char*>(buf);
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= size_t(r);
    }
    return true;
}

}  // namespace

TEST(StoreProcess, ConcurrentReaderNeverBusyNeverPartial) {
    constexpr int kSteps = 2000, kPerStep = 8;
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    int64_t run_id = create_run(path);
    int go[2];
    ASSERT_EQ(pipe(go), 0);

    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // writer: one transaction per step
        int rc = 0;
        try {
            close(go[1]);
            char c;
            if (!read_full(go[0], &c, 1)) _exit(3);
            RunStore w = RunStore::open(path);
            for (int64_t step = 0; step < kSteps; ++step)
                w.append(run_id, step_records(step, kPerStep));
        } catch (...) {
            rc = 1;
        }
        _exit(rc);
    }
    close(go[0]);
    RunStore reader = RunStore::open(path, /*read_only=*/true);
    ASSERT_EQ(write(go[1], "g", 1), 1);
    close(go[1]);

    std::map<int64_t, int> per_step;  // step -> rows seen so far (incremental)
    int64_t after = 0;
    int polls = 0, mid_polls = 0, status = 0;
    bool child_done = false;
    auto poll = [&] {
        std::vector<MetricRow> rows;
        try {
            rows = reader.metrics(run_id, "", after);
        } catch (const Error& e) {
            ADD_FAILURE() << "reader failed (busy?): " << e.what();
            return false;
        }
        ++polls;
        std::map<int64_t, int> delta;
        for (const MetricRow& r : rows) {
            ++delta[r.step];
            after = r.rowid;
        }
        for (auto [step, n] : delta) {
            per_step[step] += n;
            if (per_step[step] != kPerStep) {
                ADD_FAILURE() << "poll " << polls << " saw step " << step << " with "
                              << per_step[step] << " of " << kPerStep << " rows";
                return false;
            }
        }
        if (!per_step.empty() && int(per_step.size()) < kSteps) ++mid_polls;
        return true;
    };
    while (!child_done) {
        child_done = waitpid(pid, &status, WNOHANG) == pid;
        if (!poll()) break;
    }
    if (!child_done) waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
    ASSERT_TRUE(poll());
    EXPECT_EQ(int(per_step.size()), kSteps);
    EXPECT_GT(mid_polls, 0) << "the reader never observed the writer mid-stream";
    EXPECT_EQ(reader.integrity_check(), "ok");
}

TEST(StoreProcess, WriterKilledMidStreamLosesNoCommittedBatch) {
    constexpr int kPerBatch = 50, kReportsBeforeKill = 300;
    TempDir tmp;
    std::string path = tmp.file("runs.db");
    int64_t run_id = create_run(path);
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);

    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // writer: batch b is step b, reported on the pipe once committed
        close(fds[0]);
        try {
            RunStore w = RunStore::open(path);
            auto sink = store_sink(w, run_id, kPerBatch);
            for (int64_t b = 0; b < 1000000; ++b) {
                for (const Record& r : step_records(b, kPerBatch)) sink->write(r);  // flushes
                if (write(fds[1], &b, sizeof b) != sizeof b) _exit(2);
            }
        } catch (...) {
            _exit(1);
        }
        _exit(0);
    }
    close(fds[1]);
    int64_t last = -1, b = 0;
    int reports = 0;
    while (reports < kReportsBeforeKill && read_full(fds[0], &b, sizeof b)) {
        EXPECT_EQ(b, last + 1);
        last = b;
        ++reports;
    }
    ASSERT_EQ(reports, kReportsBeforeKill) << "writer stopped early";
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    while (read_full(fds[0], &b, sizeof b)) last = b;  // reports written before it died
    close(fds[0]);

    // The launcher reopens after a crash: WAL recovery, then everything reported is there.
    RunStore s = RunStore::open(path);
    EXPECT_EQ(s.integrity_check(), "ok");
    std::map<int64_t, int> per_step;
    for (const MetricRow& r : s.metrics(run_id)) ++per_step[r.step];
    for (int64_t step = 0; step <= last; ++step)
        EXPECT_EQ(per_step[step], kPerBatch) << "committed batch " << step << " incomplete";
    for (auto [step, n] : per_step) EXPECT_EQ(n, kPerBatch) << "partial batch " << step;
    EXPECT_LE(int64_t(per_step.size()), last + 2);  // at most one committed-but-unreported batch
    EXPECT_EQ(s.run_get(run_id)->status, "running");
    RunStore ro = RunStore::open(path, true);
    EXPECT_EQ(ro.integrity_check(), "ok");
}
