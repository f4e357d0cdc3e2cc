// Gloo communicators across real processes: the test forks N ranks that rendezvous through a TCP
// store, runs collectives and point-to-point transfers, and checks
// every result; the watchdog test checks the timeout message names collective, sequence, group
// and the missing rank. The store runs in a process of its own (StoreProcess).
#include "engine/parallel/comm.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "engine/core/error.h"
#include "engine/parallel/shm_group.h"
#include "engine/parallel/tcp_store.h"
#include "tests/support/temp_dir.h"

using namespace tessera;

namespace {

// ------------------------------------------------------------------------------------------------
// Harness: run body(groups) in `world` forked ranks; each rank writes "ok" or its failure to
// <dir>/rank<R>.txt. Returns the per-rank texts.

#define RANK_CHECK(cond, ...)                                                         \
    do {                                                                              \
        if (!(cond)) throw Error(str_cat(__LINE__, ": `", #cond, "` ", __VA_ARGS__)); \
    } while (0)

std::string read_text(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The TCP store in a process of its own, killed when the ranks are done: the ranks are forked from
// this process while it is still single-threaded, so none inherits another thread's state
// (ThreadSanitizer refuses a child of a multi-threaded fork that starts threads, as every rank's
// communicator does).
struct StoreProcess {
    pid_t pid = -1;
    int port = 0;
    StoreProcess() {
        int fds[2];
        if (pipe(fds) != 0) throw Error("pipe failed");
        pid = fork();
        if (pid == 0) {
            close(fds[0]);
            TcpStoreServer server("127.0.0.1", 0);
            const int p = server.port();
            if (write(fds[1], &p, sizeof p) != (ssize_t)sizeof p) _exit(1);
            close(fds[1]);
            for (;;) pause();  // serves until killed
        }
        close(fds[1]);
        const ssize_t n = read(fds[0], &port, sizeof port);
        close(fds[0]);
        if (pid < 0 || n != (ssize_t)sizeof port) throw Error("the store process did not start");
    }
    ~StoreProcess() {
        if (pid <= 0) return;
        kill(pid, SIGKILL);
        int st = 0;
        waitpid(pid, &st, 0);
    }
};

std::vector<std::string> run_ranks(const MeshShape& mesh, std::chrono::milliseconds timeout,
                                   const std::function<std::string(ProcessGroups&)>& body) {
    StoreProcess server;
    const test_support::TempDir scratch("comm");  // the ranks' results; _exit leaves it be
    const std::string dir = scratch.path().string();
    std::vector<pid_t> pids;
    for (int r = 0; r < mesh.world(); ++r) {
        pid_t pid = fork();
        if (pid == 0) {
            std::string result;
            try {
                RankEnv env;
                env.rank = r;
                env.world_size = mesh.world();
                env.master_addr = "127.0.0.1";
                env.master_port = server.port;
                env.source = "tessera";
                CommOptions o;
                o.timeout = timeout;
                ProcessGroups g = comm_create_groups(env, mesh, o);
                result = body(g);
            } catch (const std::exception& e) {
                result = str_cat("error: ", e.what());
            }
            std::ofstream(str_cat(dir, "/rank", r, ".txt")) << result;
            std::fflush(nullptr);
            _exit(0);  // no destructors: peers may already be gone
        }
        pids.push_back(pid);
    }
    for (pid_t p : pids) {
        int st = 0;
        waitpid(p, &st, 0);
    }
    std::vector<std::string> out;
    for (int r = 0; r < mesh.world(); ++r)
        out.push_back(read_text(str_cat(dir, "/rank", r, ".txt")));
    return out;
}

void expect_all_ok(const std::vector<std::string>& results) {
    for (size_t r = 0; r < results.size(); ++r) EXPECT_EQ(results[r], "ok") << "rank " << r;
}

// ------------------------------------------------------------------------------------------------
// Collectives on the world group of N ranks (mesh dp=N).

std::string check_world_collectives(ProcessGroups& g) {
    Communicator* c = g.world.get();
    RANK_CHECK(c != nullptr, "world group missing");
    int n = c->size(), r = c->rank();
    RANK_CHECK(r == g.rank, "group rank ", r, " vs global ", g.rank);

    // all_reduce sum: element i of rank r is r * 10 + i  ->  sum_r (10 r + i)
    std::vector<float> a(5);
    for (int i = 0; i < 5; ++i) a[i] = float(r * 10 + i);
    c->all_reduce(a.data(), 5, ReduceOp::sum);
    for (int i = 0; i < 5; ++i)
        RANK_CHECK(a[i] == float(10 * n * (n - 1) / 2 + n * i), "sum[", i, "] = ", a[i]);

    // all_reduce max: rank r contributes (r, -r)
    float m[2] = {float(r), float(-r)};
    c->all_reduce(m, 2, ReduceOp::max);
    RANK_CHECK(m[0] == float(n - 1) && m[1] == 0.f, "max = ", m[0], ",", m[1]);

    // reduce_scatter: in[j] = r + j over size*3 elements; out[k] = sum_r (r + 3*rank + k)
    std::vector<float> in(size_t(n) * 3), out(3);
    for (int j = 0; j < n * 3; ++j) in[size_t(j)] = float(r + j);
    c->reduce_scatter(in.data(), out.data(), 3);
    for (int k = 0; k < 3; ++k)
        RANK_CHECK(out[k] == float(n * (n - 1) / 2 + n * (3 * r + k)), "rs[", k, "] = ", out[k]);

    // all_gather: each contributes (r, r + 0.5)
    float mine[2] = {float(r), float(r) + 0.5f};
    std::vector<float> all(size_t(n) * 2);
    c->all_gather(mine, all.data(), 2);
    for (int q = 0; q < n; ++q)
        RANK_CHECK(all[2 * q] == float(q) && all[2 * q + 1] == float(q) + 0.5f, "gather ", q);

    // broadcast from the last rank
    float b[3] = {float(r), float(r), float(r)};
    c->broadcast(b, 3, n - 1);
    for (float x : b) RANK_CHECK(x == float(n - 1), "broadcast got ", x);

    c->barrier();
    RANK_CHECK(c->sequence() == 6, "sequence ", c->sequence());
    RANK_CHECK(c->name() == (n == 2 ? "world[0,1]" : "world[0,1,2,3]"), "name ", c->name());
    return "ok";
}

TEST(CommGloo, CollectivesTwoRanks) {
    expect_all_ok(run_ranks({2, 1, 1}, std::chrono::milliseconds(20000), check_world_collectives));
}

TEST(CommGloo, CollectivesFourRanks) {
    expect_all_ok(run_ranks({4, 1, 1}, std::chrono::milliseconds(20000), check_world_collectives));
}

// Ranks on one host reduce through shared memory (shm_group.h): three members, messages spanning
// several of its 1 MiB slots (and ends that do not fill one), every collective against the sum
// taken in rank order (the same bits on every member; for two members also Gloo's bits: one
// addition), and TESSERA_SHM=0 keeping Gloo's TCP path (its ring adds three in another order:
// equal within rounding).
std::string check_large_collectives(ProcessGroups& g) {
    Communicator* c = g.world.get();
    const int n = c->size(), r = c->rank();
    const int64_t big = 2 * ShmGroup::kSlotFloats + 12345;
    // shared memory adds in rank order; Gloo's ring in its own order (the same within rounding)
    const bool exact = c->transport() == "shared memory";
    auto same = [exact](float got, float want) {
        return exact ? got == want : std::fabs(got - want) <= 1e-6f * std::fabs(want);
    };
    auto value = [](int rank, int64_t i) {
        return 0.1f * float(rank + 1) + 1e-7f * float(i % 977);
    };
    std::vector<float> a(static_cast<size_t>(big));
    for (int64_t i = 0; i < big; ++i) a[size_t(i)] = value(r, i);
    c->all_reduce(a.data(), big, ReduceOp::sum);
    for (int64_t i = 0; i < big; ++i) {
        float want = value(0, i);
        for (int q = 1; q < n; ++q) want += value(q, i);
        RANK_CHECK(same(a[size_t(i)], want), "sum[", i, "] = ", a[size_t(i)], " want ", want);
    }
    const int64_t part = ShmGroup::kSlotFloats / 2 + 7;  // several phases of size chunks
    std::vector<float> in(static_cast<size_t>(n * part)), out(static_cast<size_t>(part));
    for (int64_t j = 0; j < n * part; ++j) in[size_t(j)] = value(r, j);
    c->reduce_scatter(in.data(), out.data(), part);
    for (int64_t k = 0; k < part; ++k) {
        float want = value(0, r * part + k);
        for (int q = 1; q < n; ++q) want += value(q, r * part + k);
        RANK_CHECK(same(out[size_t(k)], want), "rs[", k, "] = ", out[size_t(k)], " want ", want);
    }
    std::vector<float> mine(static_cast<size_t>(big / 2)), all(static_cast<size_t>(n * (big / 2)));
    for (int64_t i = 0; i < big / 2; ++i) mine[size_t(i)] = value(r, i);
    c->all_gather(mine.data(), all.data(), big / 2);
    for (int q = 0; q < n; ++q)
        for (int64_t i = 0; i < big / 2; i += 4099)
            RANK_CHECK(all[size_t(q * (big / 2) + i)] == value(q, i), "gather ", q, " ", i);
    std::vector<float> b(static_cast<size_t>(big), float(r));
    c->broadcast(b.data(), big, 1);
    for (int64_t i = 0; i < big; i += 1001) RANK_CHECK(b[size_t(i)] == 1.f, "bcast ", b[size_t(i)]);
    return c->transport();
}

// body on every rank, once with shared memory allowed and once with TESSERA_SHM=0: each rank
// returns the transport its group took.
void expect_shared_memory_then_gloo(const MeshShape& mesh,
                                    const std::function<std::string(ProcessGroups&)>& body) {
    for (const std::string& v : {"", "0"}) {
        SCOPED_TRACE("TESSERA_SHM=" + v);
        if (v.empty())
            unsetenv("TESSERA_SHM");
        else
            setenv("TESSERA_SHM", v.c_str(), 1);
        auto results = run_ranks(mesh, std::chrono::milliseconds(20000), body);
        for (size_t r = 0; r < results.size(); ++r)
            EXPECT_EQ(results[r], v.empty() ? "shared memory" : "gloo tcp") << "rank " << r;
    }
    unsetenv("TESSERA_SHM");
}

TEST(CommGloo, RanksOnOneHostReduceThroughSharedMemoryInRankOrder) {
    expect_shared_memory_then_gloo({3, 1, 1}, check_large_collectives);
}

// A member that exits in the middle of a job fails its peers' next collective within moments,
// naming it, as Gloo's closed socket did — not after the watchdog's timeout (20 s here).
TEST(CommGloo, AMemberThatExitsFailsTheSharedMemoryCollectiveAtOnce) {
    auto results = run_ranks({3, 1, 1}, std::chrono::milliseconds(20000), [](ProcessGroups& g) {
        Communicator* c = g.world.get();
        float x = 1;
        c->all_reduce(&x, 1);
        if (g.rank == 2) return std::string("exited");  // the process ends here
        const auto t0 = std::chrono::steady_clock::now();
        try {
            c->all_reduce(&x, 1);
        } catch (const Error& e) {
            const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - t0)
                                .count();
            return str_cat(c->transport(), " ", ms < 5000 ? "fast" : "slow", "\n", e.what());
        }
        return std::string("all_reduce #2 did not throw");
    });
    EXPECT_EQ(results[2], "exited");
    for (int r = 0; r < 2; ++r) {
        SCOPED_TRACE(results[size_t(r)]);
        EXPECT_EQ(results[size_t(r)].rfind("shared memory fast\n", 0), 0u);
        EXPECT_NE(results[size_t(r)].find("all_reduce #2 on group world[0,1,2]"),
                  std::string::npos);
        EXPECT_NE(results[size_t(r)].find("group rank 2 (pid "), std::string::npos);
    }
}

// ------------------------------------------------------------------------------------------------
// dp2 x tp2: rank = tp + 2 dp. dp groups {0,2},{1,3}; tp groups {0,1},{2,3}.

TEST(CommGloo, MeshGroupsDp2Tp2) {
    auto results = run_ranks({2, 2, 1}, std::chrono::milliseconds(20000), [](ProcessGroups& g) {
        RANK_CHECK(g.world && g.dp && g.tp && g.dp_async, "missing group");
        RANK_CHECK(!g.pp && !g.embedding, "pp/embedding must be null with pp=1");
        int tp = g.coord.tp, dp = g.coord.dp;
        std::string dp_name = str_cat("dp[", tp, ",", tp + 2, "]");
        std::string tp_name = str_cat("tp[", 2 * dp, ",", 2 * dp + 1, "]");
        RANK_CHECK(g.dp->name() == dp_name, "dp name ", g.dp->name());
        RANK_CHECK(g.tp->name() == tp_name, "tp name ", g.tp->name());
        RANK_CHECK(g.dp_async->name() == str_cat("dp_async[", tp, ",", tp + 2, "]"), "async");
        RANK_CHECK(g.dp->rank() == dp && g.tp->rank() == tp, "group ranks");

        float x = float(g.rank);
        g.dp->all_reduce(&x, 1);  // tp + (tp + 2)
        RANK_CHECK(x == float(2 * tp + 2), "dp sum ", x);
        float y = float(g.rank);
        g.tp->all_reduce(&y, 1);  // 2dp + 2dp + 1
        RANK_CHECK(y == float(4 * dp + 1), "tp sum ", y);
        float z = float(g.rank);
        g.dp_async->all_reduce(&z, 1);
        RANK_CHECK(z == float(2 * tp + 2), "dp_async sum ", z);
        float w = 1;
        g.world->all_reduce(&w, 1);
        RANK_CHECK(w == 4.f, "world sum ", w);
        return std::string("ok");
    });
    expect_all_ok(results);
}

// ------------------------------------------------------------------------------------------------
// Point to point: tags are separate streams, messages on one tag arrive in order, and both sides
// may send before receiving.

TEST(CommGloo, SendRecvTagsAndOrder) {
    auto results = run_ranks({2, 1, 1}, std::chrono::milliseconds(20000), [](ProcessGroups& g) {
        Communicator* c = g.world.get();
        if (c->rank() == 0) {
            for (int k = 0; k < 3; ++k) {
                float v[4] = {float(k), float(k + 1), float(k + 2), float(k + 3)};
                c->send(v, 4, 1, /*tag=*/1);
            }
            for (int k = 0; k < 2; ++k) {
                float v = 100.f + float(k);
                c->send(&v, 1, 1, /*tag=*/2);
            }
        } else {
            // tag 2 first although it was sent last: tags do not block each other
            for (int k = 0; k < 2; ++k) {
                float v = 0;
                c->recv(&v, 1, 0, 2);
                RANK_CHECK(v == 100.f + float(k), "tag 2 message ", k, " = ", v);
            }
            for (int k = 0; k < 3; ++k) {
                float v[4] = {};
                c->recv(v, 4, 0, 1);
                for (int i = 0; i < 4; ++i)
                    RANK_CHECK(v[i] == float(k + i), "tag 1 message ", k, "[", i, "] = ", v[i]);
            }
        }
        // Exchange: both post isend then irecv (a pipeline's forward/backward crossing).
        int peer = 1 - c->rank();
        std::vector<float> out(1000, float(c->rank() + 1)), in(1000, 0.f);
        auto s = c->isend(out.data(), 1000, peer, 7);
        auto r = c->irecv(in.data(), 1000, peer, 7);
        r->wait();
        s->wait();
        for (float v : in) RANK_CHECK(v == float(peer + 1), "exchange got ", v);
        c->barrier();
        RANK_CHECK(c->sequence() == 1, "p2p must not count as collectives: ", c->sequence());
        return std::string("ok");
    });
    expect_all_ok(results);
}

// A pipeline's group moves its messages through shared-memory rings on one host: tags still
// arrive in order and do not block each other while more than a ring holds waits to be taken,
// a message longer than half a ring goes through gloo, both neighbours may send before either
// receives, and a receive of the wrong length fails naming the sender. With TESSERA_SHM=0 the
// same messages go through gloo.
std::string check_pipeline_messages(ProcessGroups& g) {
    Communicator* c = g.pp.get();
    RANK_CHECK(c && c->size() == 3, "pp group missing");
    const int r = c->rank();
    auto value = [](int tag, int k, int64_t i) { return float(tag * 1000 + k) + float(i % 97); };
    const int64_t part = 256 * 1024;  // 1 MiB: 24 of them are more than the 10.7 MiB ring holds
    if (r == 0) {
        std::vector<float> v(static_cast<size_t>(part));
        for (int k = 0; k < 12; ++k)
            for (int tag : {1, 2}) {
                for (int64_t i = 0; i < part; ++i) v[size_t(i)] = value(tag, k, i);
                c->send(v.data(), part, 1, tag);
            }
    } else if (r == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 0 sends ahead
        std::vector<float> v(static_cast<size_t>(part));
        for (int tag : {2, 1})  // tag 2 first, although its messages went out interleaved
            for (int k = 0; k < 12; ++k) {
                c->recv(v.data(), part, 0, tag);
                for (int64_t i = 0; i < part; i += 1021)
                    RANK_CHECK(v[size_t(i)] == value(tag, k, i), "tag ", tag, " message ", k);
            }
    }
    // longer than half a ring: gloo
    const int64_t big = 1536 * 1024;
    std::vector<float> b(static_cast<size_t>(big), float(r));
    if (r == 1) c->send(b.data(), big, 2, 5);
    if (r == 2) {
        c->recv(b.data(), big, 1, 5);
        RANK_CHECK(b[0] == 1.f && b[size_t(big - 1)] == 1.f, "the long message");
    }
    // every member sends to both neighbours before receiving (a pipeline's forward and backward
    // crossing, and the last stage's wrap to the first)
    std::vector<float> to_next(5000, float(r + 1)), to_prev(3000, float(-r - 1));
    std::vector<float> from_prev(5000), from_next(3000);
    const int next = (r + 1) % 3, prev = (r + 2) % 3;
    auto s1 = c->isend(to_next.data(), 5000, next, 7);
    auto s2 = c->isend(to_prev.data(), 3000, prev, 8);
    auto r1 = c->irecv(from_prev.data(), 5000, prev, 7);
    auto r2 = c->irecv(from_next.data(), 3000, next, 8);
    r2->wait();
    r1->wait();
    s1->wait();
    s2->wait();
    RANK_CHECK(from_prev[4999] == float(prev + 1) && from_next[0] == float(-next - 1), "exchange");
    if (r == 0) c->send(nullptr, 0, 1, 11);  // an empty message is still one
    if (r == 1) c->recv(nullptr, 0, 0, 11);
    c->barrier();
    const std::string transport = c->transport();
    if (transport == "shared memory") {  // last: the communicator is unusable after it
        float x[12] = {};
        if (r == 2) c->send(x, 10, 0, 9);
        if (r == 0) {
            try {
                c->recv(x, 12, 2, 9);
                return std::string("a receive of the wrong length did not fail");
            } catch (const Error& e) {
                const std::string what = e.what();
                RANK_CHECK(what.find("group rank 2 sent 40 bytes with tag 9 to a receive of 48") !=
                               std::string::npos,
                           what);
            }
        }
    }
    return transport;
}

TEST(CommGloo, PipelineMessagesThroughSharedMemory) {
    expect_shared_memory_then_gloo({1, 1, 3}, check_pipeline_messages);
}

// ------------------------------------------------------------------------------------------------
// Watchdog: rank 2 sleeps past the timeout before the second all_reduce.

TEST(CommGloo, WatchdogNamesCollectiveSequenceGroupAndMissingRank) {
    const auto timeout = std::chrono::milliseconds(1000);
    auto results = run_ranks({3, 1, 1}, timeout, [&](ProcessGroups& g) {
        Communicator* c = g.world.get();
        float x = 1;
        c->all_reduce(&x, 1);  // #1 completes everywhere
        if (g.rank == 2) {
            std::this_thread::sleep_for(std::chrono::milliseconds(3000));
            return std::string("slept");
        }
        auto t0 = std::chrono::steady_clock::now();
        try {
            c->all_reduce(&x, 1);  // #2: rank 2 never joins
        } catch (const Error& e) {
            auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
            // the next call must refuse at once
            try {
                c->barrier();
                return std::string("barrier after failure did not throw");
            } catch (const Error& e2) {
                if (std::string(e2.what()).find("unusable") == std::string::npos)
                    return str_cat("unexpected: ", e2.what());
            }
            return str_cat("elapsed_ms=", ms, "\n", e.what());
        }
        return std::string("all_reduce #2 did not throw");
    });
    EXPECT_EQ(results[2], "slept");
    std::printf("rank 0 saw: %s\n", results[0].c_str());
    for (int r = 0; r < 2; ++r) {
        const std::string& t = results[size_t(r)];
        SCOPED_TRACE(t);
        ASSERT_EQ(t.rfind("elapsed_ms=", 0), 0u);
        long ms = std::stol(t.substr(11));
        EXPECT_GE(ms, 900);
        EXPECT_LT(ms, 1000 + 1500);
        EXPECT_NE(t.find(str_cat("rank ", r, " (dp", r,
                                 ".tp0.pp0): all_reduce #2 on group "
                                 "world[0,1,2] did not complete within 1000 ms (")),
                  std::string::npos);
        EXPECT_NE(t.find("rank 2 (dp2.tp0.pp0) has only reached #1"), std::string::npos);
    }
}

TEST(CommGloo, MeshSizeMismatchIsInputError) {
    RankEnv env;
    env.world_size = 3;
    env.source = "tessera";
    try {
        comm_create_groups(env, {2, 1, 1}, {});
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("= 2 ranks, but the job has 3"), std::string::npos)
            << e.what();
    }
}

TEST(CommGloo, SingleRankHasNoGroups) {
    RankEnv env;
    env.source = "single";
    ProcessGroups g = comm_create_groups(env, {1, 1, 1}, {});
    EXPECT_FALSE(g.world || g.dp || g.tp || g.pp || g.embedding || g.dp_async);
}

}  // namespace
