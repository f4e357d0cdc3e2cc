// BackgroundSink (background_sink.h): the caller buffers, a thread writes.
#include "engine/telemetry/background_sink.h"

#include <utility>

namespace tessera {

BackgroundSink::BackgroundSink(TelemetrySink& inner, size_t max_queued)
    : inner_(inner), max_queued_(max_queued) {
    thread_ = std::thread([this] { loop(); });
}

BackgroundSink::~BackgroundSink() {
    try {
        drain();
    } catch (...) {
        // a destructor cannot report: drain() is where callers who care see the failure
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    work_cv_.notify_one();
    thread_.join();
}

void BackgroundSink::rethrow_failure() {
    std::exception_ptr e;
    {
        std::lock_guard<std::mutex> lk(mu_);
        e = std::exchange(failure_, nullptr);
    }
    if (e) std::rethrow_exception(e);
}

void BackgroundSink::write(const Record& r) {
    pending_.push_back(r);
}

void BackgroundSink::flush() {
    {
        std::unique_lock<std::mutex> lk(mu_);
        // a full queue: wait for the thread to take it (it is writing the batch before)
        taken_cv_.wait(lk, [&] { return handed_.size() <= max_queued_ || failure_; });
        if (failure_) {
            pending_.clear();  // the run is failing: what follows is reported by the caller
        } else if (!pending_.empty()) {
            if (handed_.empty())
                handed_.swap(pending_);
            else
                handed_.insert(handed_.end(), std::make_move_iterator(pending_.begin()),
                               std::make_move_iterator(pending_.end()));
            pending_.clear();
        }
    }
    work_cv_.notify_one();
    rethrow_failure();
}

void BackgroundSink::drain() {
    flush();
    {
        std::unique_lock<std::mutex> lk(mu_);
        taken_cv_.wait(lk, [&] { return handed_.empty() && !busy_; });
    }
    rethrow_failure();
}

void BackgroundSink::loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
        work_cv_.wait(lk, [&] { return stop_ || !handed_.empty(); });
        if (handed_.empty()) return;  // stopping, nothing left
        std::vector<Record> batch;
        batch.swap(handed_);
        busy_ = true;
        lk.unlock();
        taken_cv_.notify_all();
        std::exception_ptr e;
        try {
            for (const Record& r : batch) inner_.write(r);
            inner_.flush();
        } catch (...) {
            e = std::current_exception();
        }
        lk.lock();
        if (e && !failure_) failure_ = e;
        busy_ = false;
        taken_cv_.notify_all();
    }
}

}  // namespace tessera
