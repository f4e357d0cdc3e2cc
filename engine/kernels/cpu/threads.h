// CPU threads of this process: one OpenMP pool; OpenBLAS single-threaded (the kernels slice their
// GEMMs over the OpenMP threads themselves, so the two never compete for cores).
#pragma once

namespace tessera {

// The OpenMP threads a rank gets when train.threads is unset: the host's cores shared among the
// ranks on it, less one for the rank's comm thread when a rank has four or more (ranks > 1). A
// comm thread without a core of its own waits behind OpenMP threads spinning at their barriers:
// llama-tiny dp2 ZeRO-1 on a 16-core host spent 16.2 ms a step in its optimizer span (waiting
// for the gradients the comm thread reduces) at 8 threads a rank, 0.9 ms at 4, its forward and
// backward as fast (docs/benchmarks.md). `tessera train` and the estimator both use this rule.
int default_threads_per_rank(int cores, int ranks_on_host);

// threads > 0: that many; 0: default_threads_per_rank(this host's cores, ranks_on_host).
// Returns the number set.
int threads_configure(int threads, int ranks_on_host = 1);

}  // namespace tessera
