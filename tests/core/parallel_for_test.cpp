// parallel_for (engine/core/parallel_for.h): every piece runs once, pieces run on several threads
// where the machine has them, the lowest piece's exception is the one rethrown after all finish,
// nested calls run inline on the calling thread, and concurrent callers each get all their pieces.
#include "engine/core/parallel_for.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace tessera;

TEST(ParallelFor, EveryPieceRunsOnceAndZeroPiecesIsANoOp) {
    parallel_for(0, [](size_t) { FAIL() << "no piece to run"; });
    for (size_t n : {1u, 2u, 7u, 100u}) {
        std::vector<std::atomic<int>> runs(n);
        parallel_for(n, [&](size_t i) { runs[i].fetch_add(1); });
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(runs[i].load(), 1) << "n " << n << ", piece " << i;
    }
}

TEST(ParallelFor, PiecesShareTheMachinesThreads) {
    if (parallel_threads() < 2) GTEST_SKIP() << "one hardware thread: nothing to share";
    // each piece waits (up to 5 s) until two pieces have started: only concurrent pieces pass
    std::atomic<int> started{0};
    std::mutex mu;
    std::set<std::thread::id> ids;
    parallel_for(2, [&](size_t) {
        started.fetch_add(1);
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (started.load() < 2 && std::chrono::steady_clock::now() < until)
            std::this_thread::yield();
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
    });
    EXPECT_EQ(started.load(), 2);
    EXPECT_EQ(ids.size(), 2u) << "both pieces ran on one thread";
}

TEST(ParallelFor, TheLowestPiecesErrorIsRethrownAfterEveryPieceFinished) {
    std::atomic<int> finished{0};
    try {
        parallel_for(20, [&](size_t i) {
            finished.fetch_add(1);
            if (i == 13 || i == 5 || i == 17) throw std::runtime_error(std::to_string(i));
        });
        FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "5");
    }
    EXPECT_EQ(finished.load(), 20);
}

TEST(ParallelFor, NestedCallsRunInlineOnTheCallingThread) {
    std::vector<std::vector<size_t>> order(4);
    std::vector<std::set<std::thread::id>> threads(4);
    parallel_for(4, [&](size_t outer) {
        const auto me = std::this_thread::get_id();
        parallel_for(5, [&](size_t inner) {
            order[outer].push_back(inner);  // no lock: inline, on this piece's thread
            threads[outer].insert(std::this_thread::get_id());
        });
        EXPECT_EQ(threads[outer], std::set<std::thread::id>{me});
    });
    for (const auto& o : order) EXPECT_EQ(o, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(ParallelFor, ConcurrentCallersEachGetAllTheirPieces) {
    std::vector<std::atomic<int>> a(50), b(50);
    std::thread other([&] { parallel_for(50, [&](size_t i) { b[i].fetch_add(1); }); });
    parallel_for(50, [&](size_t i) { a[i].fetch_add(1); });
    other.join();
    for (size_t i = 0; i < 50; ++i) {
        EXPECT_EQ(a[i].load(), 1);
        EXPECT_EQ(b[i].load(), 1);
    }
}

// A call made while another thread's call has the pool does not wait for it: it runs its pieces
// on its own thread, in order (the studio's live estimate beside a plan search on a worker).
TEST(ParallelFor, ACallWhileAnotherHasThePoolRunsOnItsOwnThread) {
    if (parallel_threads() < 2) GTEST_SKIP() << "one thread: every call runs inline anyway";
    std::atomic<bool> started{false}, release{false};
    std::thread search([&] {
        parallel_for(2, [&](size_t) {
            started = true;
            while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        });
    });
    while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::thread::id me = std::this_thread::get_id();
    std::vector<size_t> order;
    std::set<std::thread::id> threads;
    parallel_for(4, [&](size_t i) {
        order.push_back(i);  // no lock: inline
        threads.insert(std::this_thread::get_id());
    });
    // returned while the other call still holds the pool
    EXPECT_FALSE(release.load());
    EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3}));
    EXPECT_EQ(threads, std::set<std::thread::id>{me});
    release = true;
    search.join();
}
