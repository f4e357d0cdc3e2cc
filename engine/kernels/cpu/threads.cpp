#include "engine/kernels/cpu/threads.h"

#include <cblas.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>

namespace tessera {

int threads_configure(int threads, int ranks_on_host) {
    int n = threads;
    if (n <= 0) {
        long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
        n = (int)std::max(1L, cores / std::max(1, ranks_on_host));
    }
    omp_set_num_threads(n);
    openblas_set_num_threads(1);
    return n;
}

}  // namespace tessera
