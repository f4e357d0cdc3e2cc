#include "engine/kernels/cpu/swiglu.h"

#include <cmath>

namespace tessera {

void swiglu_forward(float* out, const float* gu, int64_t N, int64_t F) {
#pragma omp parallel for
    for (int64_t n = 0; n < N; ++n) {
        const float* g = gu + n * 2 * F;
        const float* u = g + F;
        float* o = out + n * F;
        for (int64_t i = 0; i < F; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
}

// d gate = dout · up · σ(g)·(1 + g·(1 − σ(g))); d up = dout · silu(g)
void swiglu_backward(float* dgu, const float* dout, const float* gu, int64_t N, int64_t F) {
#pragma omp parallel for
    for (int64_t n = 0; n < N; ++n) {
        const float* g = gu + n * 2 * F;
        const float* u = g + F;
        const float* d = dout + n * F;
        float* dg = dgu + n * 2 * F;
        float* du = dg + F;
        for (int64_t i = 0; i < F; ++i) {
            const float s = 1.0f / (1.0f + std::exp(-g[i]));
            dg[i] = d[i] * u[i] * (s * (1.0f + g[i] * (1.0f - s)));
            du[i] = d[i] * (g[i] * s);
        }
    }
}

}  // namespace tessera
