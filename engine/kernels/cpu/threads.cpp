#include "engine/kernels/cpu/threads.h"

#include <cblas.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tessera {

int default_threads_per_rank(int cores, int ranks_on_host) {
    const int ranks = std::max(1, ranks_on_host);
    const int share = std::max(1, cores / ranks);
    return ranks > 1 && share >= 4 ? share - 1 : share;
}

int threads_configure(int threads, int ranks_on_host) {
    int n = threads;
    if (n <= 0)
        n = default_threads_per_rank((int)std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)),
                                     ranks_on_host);
    omp_set_num_threads(n);
    openblas_set_num_threads(1);
    return n;
}

int host_optimizer_threads(int rank_threads) {
    return std::max(1, rank_threads - 2);
}

bool cpu_comm_thread() {
    const char* v = std::getenv("TESSERA_COMM_THREAD");
    return v && std::strcmp(v, "1") == 0;
}

}  // namespace tessera
