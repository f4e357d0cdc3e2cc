#include "engine/kernels/cpu/adamw.h"

#include <algorithm>
#include <cmath>

namespace tessera {

namespace {

struct AdamWStep {
    float beta1, beta2, eps, decay_factor, step_size, bc2_sqrt, grad_scale;
};

// One thread's part, the loop the compiler vectorises (-fno-math-errno: a square root that need
// not set errno; -ffp-contract=off: every operation rounded as written, as the CUDA kernel does,
// so each lane's result is the scalar one). Built for the widest of AVX-512, AVX2 and the
// baseline the CPU runs (target_clones picks at load time): the same bits at every width.
__attribute__((target_clones("avx512f", "avx2", "default"))) void adamw_span(
    float* __restrict param, const float* __restrict grad, float* __restrict m, float* __restrict v,
    int64_t n, AdamWStep k) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = grad[i] * k.grad_scale;
        const float mi = m[i] + (1.0f - k.beta1) * (g - m[i]);
        const float vi = k.beta2 * v[i] + (1.0f - k.beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        const float p = param[i] * k.decay_factor;
        param[i] = p - k.step_size * mi / (std::sqrt(vi) / k.bc2_sqrt + k.eps);
    }
}

}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t N,
                  const AdamWHyper& h, float grad_scale) {
    // PyTorch's formulation: p *= 1 - lr*wd; m = lerp(m, g, 1-b1); v = b2*v + (1-b2)*g*g;
    // p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps).
    const double bc1 = 1.0 - std::pow((double)h.beta1, (double)h.t);
    const double bc2 = 1.0 - std::pow((double)h.beta2, (double)h.t);
    const AdamWStep k{h.beta1,
                      h.beta2,
                      h.eps,
                      1.0f - h.lr * h.weight_decay,
                      static_cast<float>(h.lr / bc1),
                      static_cast<float>(std::sqrt(bc2)),
                      grad_scale};
    // spans of 16K elements (whole cache lines, enough per thread to amortise the call)
    constexpr int64_t kSpan = 16384;
    const int64_t spans = (N + kSpan - 1) / kSpan;
#pragma omp parallel for schedule(static) if (spans > 1)
    for (int64_t s = 0; s < spans; ++s) {
        const int64_t i = s * kSpan;
        adamw_span(param + i, grad + i, m + i, v + i, std::min(kSpan, N - i), k);
    }
}

}  // namespace tessera
