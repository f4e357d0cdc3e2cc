// CPU threads of this process: one OpenMP pool; OpenBLAS single-threaded (the kernels slice their
// GEMMs over the OpenMP threads themselves, so the two never compete for cores).
#pragma once

namespace tessera {

// threads > 0: that many; 0: the host's cores divided by the ranks sharing the host (at least 1).
// Returns the number set.
int threads_configure(int threads, int ranks_on_host = 1);

}  // namespace tessera
