// parallel_for: independent pieces of one computation over this machine's cores (the planner's
// estimates: one per pipeline stage, one per layout a search tries). Results go to slots indexed
// by i, so what a caller computes does not depend on the thread count or on timing.
#pragma once
#include <cstddef>
#include <functional>

namespace tessera {

// Runs fn(i) for every i in [0, n), the calling thread taking part, on up to parallel_threads()
// threads; returns when all are done. If any threw, the exception of the lowest i is rethrown
// (after every piece has finished). A call from inside a piece runs its pieces on the calling
// thread in order, so nesting never oversubscribes the cores; so does a call made while another
// thread's call has the pool (it never waits for that one).
void parallel_for(size_t n, const std::function<void(size_t)>& fn);

// The threads parallel_for uses: the machine's hardware threads, or TESSERA_PLAN_THREADS when set
// (1: everything on the calling thread).
int parallel_threads();

}  // namespace tessera
