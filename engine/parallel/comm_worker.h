// A thread that runs data-parallel collectives in posting order on its own communicator, so
// gradient buckets are reduced (and ZeRO-3 parameters gathered) while the main thread computes.
// On the meta device (the estimator) the worker is lazy instead: no thread, and a posted task
// runs only when the main thread waits for it or for a later task (FIFO), or drains the queue —
// the latest a real comm thread could finish it, so a predicted peak never counts on overlap,
// and the replay is deterministic.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

class CommWorker {
  public:
    enum class Mode { thread, lazy };
    explicit CommWorker(Mode mode = Mode::thread);
    ~CommWorker();
    CommWorker(const CommWorker&) = delete;
    CommWorker& operator=(const CommWorker&) = delete;
    // Runs `task` after every task posted before it. The future rethrows the task's exception
    // (lazy: waiting on it runs the queue up to and including it, on the waiting thread).
    std::shared_future<void> post(std::function<void()> task);
    // Waits for every posted task; rethrows the first failure.
    void drain();

  private:
    void run();
    void run_until(size_t k);  // lazy: runs tasks [done_, k]
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::pair<std::function<void()>, std::promise<void>>> queue_;
    std::vector<std::shared_future<void>> pending_;
    bool stop_ = false;
    Mode mode_;
    size_t posted_ = 0, done_ = 0;  // lazy: tasks posted and run so far
    std::thread thread_;
};

}  // namespace tessera
