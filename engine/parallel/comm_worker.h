// A thread that runs data-parallel collectives in posting order on its own communicator, so
// gradient buckets are reduced (and ZeRO-3 parameters gathered) while the main thread computes.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace tessera {

class CommWorker {
public:
    CommWorker();
    ~CommWorker();
    CommWorker(const CommWorker&) = delete;
    CommWorker& operator=(const CommWorker&) = delete;
    // Runs `task` after every task posted before it. The future rethrows the task's exception.
    std::shared_future<void> post(std::function<void()> task);
    // Waits for every posted task; rethrows the first failure.
    void drain();

private:
    void run();
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::pair<std::function<void()>, std::promise<void>>> queue_;
    std::vector<std::shared_future<void>> pending_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace tessera
