// CPU threads of this process: one OpenMP pool; OpenBLAS single-threaded (the kernels slice their
// GEMMs over the OpenMP threads themselves, so the two never compete for cores).
#pragma once

namespace tessera {

// The OpenMP threads a rank gets when train.threads is unset: the host's cores shared among the
// ranks on it, less one when a rank has four or more (ranks > 1), for its communication (Gloo's
// loop thread, the shared-memory waits). Set when a comm thread ran beside the ranks: llama-tiny
// dp2 ZeRO-1 on a 16-core host spent 16.2 ms a step in its optimizer span at 8 threads a rank,
// 0.9 ms at 4. Since CPU collectives run in place (cpu_comm_thread), 8 and 7 threads a rank
// measured the same there, so the rule stays (docs/benchmarks.md). `tessera train` and the
// estimator both use it.
int default_threads_per_rank(int cores, int ranks_on_host);

// threads > 0: that many; 0: default_threads_per_rank(this host's cores, ranks_on_host).
// Returns the number set.
int threads_configure(int threads, int ranks_on_host = 1);

// The OpenMP team of the host's AdamW under a GPU rank's optimizer offload (the parameter
// store's host thread; op_sweep --host-optimizer times the same team), from the rank's threads
// (threads_configure): all but two, left to the training thread, which launches the device's
// work while the host updates, and to the rank's other threads. gpt2-xl B8 offloaded, 16 threads
// a rank, on two H100 machines (2026-12-07): a team of 16 10,551 / 10,729 tok/s, 15 11,334, 14
// 14,955 on one; 16 15,362 / 16,466, 14 16,032 / 16,785, 12 15,565 on the other
// (docs/benchmarks.md).
int host_optimizer_threads(int rank_threads);

// Whether this process's CPU rank runs its data-parallel collectives on a comm thread rather
// than on its main thread when it waits for them (ZeroOptions::comm_in_place): no, unless
// TESSERA_COMM_THREAD=1 (for tests and measurements). In place was as fast or faster on every
// plan measured, on the 2-core host (where a comm thread has no core of its own and a ZeRO-3
// gather waited for mid-step sits out the scheduler: gpt-tiny dp2 ZeRO-3 23,175 against 19,046
// tok/s) and on the 16-core one at 7 threads a rank (docs/benchmarks.md).
bool cpu_comm_thread();

}  // namespace tessera
