#include "engine/kernels/cpu/layernorm.h"

#include <omp.h>

#include <cmath>
#include <vector>

namespace tessera {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
    const float eps = 1e-5f;
#pragma omp parallel for
    for (int n = 0; n < N; ++n) {
        const float* x = inp + (long)n * C;
        float m = 0.0f;
        for (int i = 0; i < C; ++i) m += x[i];
        m /= C;
        float v = 0.0f;
        for (int i = 0; i < C; ++i) {
            float d = x[i] - m;
            v += d * d;
        }
        v /= C;
        float s = 1.0f / std::sqrt(v + eps);
        float* o = out + (long)n * C;
        for (int i = 0; i < C; ++i) o[i] = (s * (x[i] - m)) * weight[i] + bias[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C) {
    // dweight/dbias are reductions over N: each thread accumulates privately, then adds in order
    // of thread id so the result is deterministic for a fixed thread count.
    int nthreads = omp_get_max_threads();
    std::vector<float> part((size_t)nthreads * 2 * C, 0.0f);
#pragma omp parallel num_threads(nthreads)
    {
        int tid = omp_get_thread_num();
        float* pw = part.data() + (size_t)tid * 2 * C;
        float* pb = pw + C;
#pragma omp for schedule(static)
        for (int n = 0; n < N; ++n) {
            const float* x = inp + (long)n * C;
            const float* g = dout + (long)n * C;
            float m = mean[n], s = rstd[n];
            if (!dinp) {  // the weight and bias gradients only (a split backward's W)
                for (int i = 0; i < C; ++i) {
                    float norm = (x[i] - m) * s;
                    pb[i] += g[i];
                    pw[i] += norm * g[i];
                }
                continue;
            }
            float* dx = dinp + (long)n * C;
            float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
            for (int i = 0; i < C; ++i) {
                float norm = (x[i] - m) * s;
                float dnorm = weight[i] * g[i];
                dnorm_mean += dnorm;
                dnorm_norm_mean += dnorm * norm;
            }
            dnorm_mean /= C;
            dnorm_norm_mean /= C;
            for (int i = 0; i < C; ++i) {
                float norm = (x[i] - m) * s;
                float dnorm = weight[i] * g[i];
                pb[i] += g[i];
                pw[i] += norm * g[i];
                dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
            }
        }
    }
    if (!dweight) return;  // the input gradient only (a split backward's B)
    for (int t = 0; t < nthreads; ++t) {
        const float* pw = part.data() + (size_t)t * 2 * C;
        for (int i = 0; i < C; ++i) {
            dweight[i] += pw[i];
            dbias[i] += pw[C + i];
        }
    }
}

}  // namespace tessera
