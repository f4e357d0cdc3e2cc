// The comm thread's two modes: a real thread runs tasks in posting order; the meta device's lazy
// worker (the estimator's ParamStore) runs a task only when it, or a later task, is waited for
// (FIFO, on the waiting thread), so a predicted step frees comm buffers at the latest point a
// real thread could, deterministically.
#include "engine/parallel/comm_worker.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace tessera;

TEST(CommWorker, ThreadRunsTasksInPostingOrder) {
    CommWorker w;
    std::vector<int> order;
    for (int i = 0; i < 5; ++i) w.post([&order, i] { order.push_back(i); });
    w.drain();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(CommWorker, LazyRunsNothingUntilWaitedThenEverythingUpToTheWaitedTask) {
    CommWorker w(CommWorker::Mode::lazy);
    std::string ran;
    const std::thread::id main = std::this_thread::get_id();
    std::thread::id where;
    auto a = w.post([&] { ran += 'a'; });
    auto b = w.post([&] { ran += 'b', where = std::this_thread::get_id(); });
    auto c = w.post([&] { ran += 'c'; });
    EXPECT_EQ(ran, "");
    b.get();
    EXPECT_EQ(ran, "ab");  // a ran first: FIFO
    EXPECT_EQ(where, main);
    a.get();  // already done: nothing runs again
    EXPECT_EQ(ran, "ab");
    w.drain();
    EXPECT_EQ(ran, "abc");
    c.get();
    EXPECT_EQ(ran, "abc");
}

TEST(CommWorker, LazyReleasesWhatATaskCapturedOnceItRan) {
    CommWorker w(CommWorker::Mode::lazy);
    auto held = std::make_shared<int>(1);
    std::weak_ptr<int> watch = held;
    auto f = w.post([held = std::move(held)] {});
    EXPECT_FALSE(watch.expired());
    f.get();
    EXPECT_TRUE(watch.expired());
}

TEST(CommWorker, LazyRethrowsATaskFailureToItsWaiter) {
    CommWorker w(CommWorker::Mode::lazy);
    auto f = w.post([] { throw std::runtime_error("collective failed"); });
    EXPECT_THROW(f.get(), std::runtime_error);
}
