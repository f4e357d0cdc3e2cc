#include "engine/parallel/comm_worker.h"

#include <chrono>
#include <cstdlib>

#include "engine/parallel/comm.h"

namespace tessera {

bool comm_trace() {
    static const bool on = std::getenv("TESSERA_COMM_TRACE") != nullptr;
    return on;
}

double trace_ms() {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

CommWorker::CommWorker(Mode mode) : mode_(mode) {
    if (mode_ == Mode::thread) thread_ = std::thread([this] { run(); });
}

CommWorker::~CommWorker() {
    if (mode_ == Mode::lazy) return;  // unwaited tasks never run
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

std::shared_future<void> CommWorker::post(std::function<void()> task) {
    if (mode_ == Mode::lazy) {
        queue_.emplace_back(std::move(task), std::promise<void>());
        const size_t k = posted_++;
        std::shared_future<void> f =
            std::async(std::launch::deferred, [this, k] { run_until(k); }).share();
        pending_.push_back(f);
        return f;
    }
    std::promise<void> p;
    std::shared_future<void> f = p.get_future().share();
    {
        std::lock_guard<std::mutex> lk(mu_);
        queue_.emplace_back(std::move(task), std::move(p));
        pending_.push_back(f);
    }
    cv_.notify_one();
    return f;
}

void CommWorker::drain() {
    std::vector<std::shared_future<void>> pending;
    {
        std::lock_guard<std::mutex> lk(mu_);
        pending.swap(pending_);
    }
    std::exception_ptr first;
    for (auto& f : pending) {
        try {
            f.get();
        } catch (...) {
            if (!first) first = std::current_exception();
        }
    }
    if (first) std::rethrow_exception(first);
}

// Lazy: the queue's front is task done_; each task (and what it captured) is gone once it ran.
void CommWorker::run_until(size_t k) {
    while (done_ <= k && !queue_.empty()) {
        std::function<void()> task = std::move(queue_.front().first);
        queue_.pop_front();
        ++done_;
        task();
    }
}

void CommWorker::run() {
    for (;;) {
        std::pair<std::function<void()>, std::promise<void>> item;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return;
            item = std::move(queue_.front());
            queue_.pop_front();
        }
        try {
            item.first();
            item.second.set_value();
        } catch (...) {
            item.second.set_exception(std::current_exception());
        }
    }
}

}  // namespace tessera
