#include "engine/kernels/cpu/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <vector>

namespace tessera {

// One thread pool: OpenBLAS runs single-threaded (set once by the trainer) and each OpenMP thread
// multiplies its own slice of rows, so BLAS and elementwise threads never compete for cores.
template <typename F>
static void parallel_rows(int rows, F&& f) {
    int nt = std::min(omp_get_max_threads(), std::max(1, rows / 16));
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        int r0 = (int)((long)rows * t / n), r1 = (int)((long)rows * (t + 1) / n);
        if (r1 > r0) f(r0, r1);
    }
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC) {
    if (bias) {
#pragma omp parallel for
        for (int n = 0; n < N; ++n)
            for (int o = 0; o < OC; ++o) out[(long)n * OC + o] = bias[o];
    }
    parallel_rows(N, [&](int r0, int r1) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, OC, C, 1.0f,
                    inp + (long)r0 * C, C, weight, C, bias ? 1.0f : 0.0f, out + (long)r0 * OC, OC);
    });
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
    if (dinp)
        parallel_rows(N, [&](int r0, int r1) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, C, OC, 1.0f,
                        dout + (long)r0 * OC, OC, weight, C, 1.0f, dinp + (long)r0 * C, C);
        });
    if (dweight)  // rows of dweight are output features: slice those
        parallel_rows(OC, [&](int o0, int o1) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o1 - o0, C, N, 1.0f, dout + o0, OC,
                        inp, C, 1.0f, dweight + (long)o0 * C, C);
        });
    if (dbias) {
        // row-major friendly: each thread sums its rows into a private vector (in double), then
        // the partial sums are added in thread order — deterministic for a fixed thread count
        int nt = omp_get_max_threads();
        std::vector<double> part((size_t)nt * OC, 0.0);
#pragma omp parallel num_threads(nt)
        {
            double* acc = part.data() + (size_t)omp_get_thread_num() * OC;
#pragma omp for schedule(static)
            for (int n = 0; n < N; ++n) {
                const float* row = dout + (long)n * OC;
                for (int o = 0; o < OC; ++o) acc[o] += row[o];
            }
        }
        for (int o = 0; o < OC; ++o) {
            double s = 0;
            for (int t = 0; t < nt; ++t) s += part[(size_t)t * OC + o];
            dbias[o] += static_cast<float>(s);
        }
    }
}

}  // namespace tessera
