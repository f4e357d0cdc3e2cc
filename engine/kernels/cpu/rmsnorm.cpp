#include "engine/kernels/cpu/rmsnorm.h"

#include <cmath>
#include <vector>

#include <omp.h>

namespace tessera {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps) {
#pragma omp parallel for
    for (int n = 0; n < N; ++n) {
        const float* x = inp + (long)n * C;
        float ss = 0.0f;
        for (int c = 0; c < C; ++c) ss += x[c] * x[c];
        const float r = 1.0f / std::sqrt(ss / C + eps);
        rstd[n] = r;
        float* y = out + (long)n * C;
        for (int c = 0; c < C; ++c) y[c] = (x[c] * r) * weight[c];
    }
}

// With x̂ = x·r: dweight += Σ_n dout·x̂; dx = r·(g − x̂·mean(g·x̂)), g = dout·weight. The weight
// gradient is summed per thread (rows split in order) and the partial sums added in thread order.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C) {
    const int nt = omp_get_max_threads();
    std::vector<float> part((size_t)nt * C, 0.0f);
#pragma omp parallel
    {
        float* dw = part.data() + (size_t)omp_get_thread_num() * C;
#pragma omp for schedule(static)
        for (int n = 0; n < N; ++n) {
            const float* x = inp + (long)n * C;
            const float* d = dout + (long)n * C;
            const float r = rstd[n];
            float dot = 0.0f;
            for (int c = 0; c < C; ++c) dot += d[c] * weight[c] * (x[c] * r);
            dot /= C;
            float* dx = dinp + (long)n * C;
            for (int c = 0; c < C; ++c) {
                const float xh = x[c] * r;
                dw[c] += d[c] * xh;
                dx[c] += r * (d[c] * weight[c] - xh * dot);
            }
        }
    }
    for (int t = 0; t < nt; ++t)
        for (int c = 0; c < C; ++c) dweight[c] += part[(size_t)t * C + c];
}

}  // namespace tessera
