// parallel_for (see parallel_for.h): a pool of worker threads started on first use and kept for
// the life of the process (never joined: a search may run while the process exits, and a worker's
// thread-local state, such as a meta device's offload queue, stays reachable), fed one call at a
// time; the calling thread works too.
#include "engine/core/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

namespace {

thread_local bool t_inside = false;  // this thread is running a piece (or is a worker)

struct Call {
    size_t n = 0;
    const std::function<void(size_t)>* fn = nullptr;
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> errors;  // by piece

    // Takes pieces until none is left.
    void work() {
        for (size_t i; (i = next.fetch_add(1)) < n;) {
            try {
                (*fn)(i);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        }
    }
};

class Pool {
  public:
    explicit Pool(int workers) {
        for (int w = 0; w < workers; ++w) std::thread([this] { loop(); }).detach();
    }

    // One call at a time: a second caller, while the workers serve the first, does its own
    // pieces on its own thread, in order (the studio's live estimate on the GUI thread never
    // waits for a plan search a worker thread started). When the caller's own work() returns
    // every piece has been taken; a worker holds a piece only while it counts in busy_, so once
    // busy_ is 0 (and no new worker can take the call) every piece is done.
    void run(Call& c) {
        std::unique_lock<std::mutex> turn(turn_mu_, std::try_to_lock);
        if (!turn.owns_lock()) {
            c.work();
            return;
        }
        {
            std::lock_guard<std::mutex> lock(mu_);
            call_ = &c;
            ++generation_;
        }
        cv_.notify_all();
        c.work();
        std::unique_lock<std::mutex> lock(mu_);
        call_ = nullptr;
        idle_cv_.wait(lock, [&] { return busy_ == 0; });
    }

  private:
    void loop() {
        t_inside = true;
        uint64_t seen = 0;
        for (;;) {
            Call* c = nullptr;
            {
                std::unique_lock<std::mutex> lock(mu_);
                cv_.wait(lock, [&] { return generation_ != seen && call_; });
                seen = generation_;
                c = call_;
                ++busy_;
            }
            c->work();
            std::lock_guard<std::mutex> lock(mu_);
            if (--busy_ == 0) idle_cv_.notify_all();
        }
    }

    std::mutex turn_mu_;
    std::mutex mu_;
    std::condition_variable cv_, idle_cv_;
    Call* call_ = nullptr;
    uint64_t generation_ = 0;
    int busy_ = 0;
};

Pool& pool() {
    static Pool* p = new Pool(parallel_threads() - 1);  // kept: see the file's comment
    return *p;
}

}  // namespace

int parallel_threads() {
    static const int n = [] {
        if (const char* e = std::getenv("TESSERA_PLAN_THREADS")) {
            const int v = std::atoi(e);
            if (v >= 1) return v;
        }
        return std::max(1, (int)std::thread::hardware_concurrency());
    }();
    return n;
}

void parallel_for(size_t n, const std::function<void(size_t)>& fn) {
    if (n == 0) return;
    Call c;
    c.n = n;
    c.fn = &fn;
    c.errors.resize(n);
    const bool outer = t_inside;
    t_inside = true;  // pieces that call parallel_for run theirs inline
    if (n == 1 || outer || parallel_threads() == 1)
        c.work();  // in order, on this thread
    else
        pool().run(c);
    t_inside = outer;
    for (const auto& e : c.errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace tessera
