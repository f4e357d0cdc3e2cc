#include "engine/kernels/cpu/adamw.h"

#include <cmath>

namespace tessera {

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t N,
                  const AdamWHyper& h, float grad_scale) {
    // PyTorch's formulation: p *= 1 - lr*wd; m = lerp(m, g, 1-b1); v = b2*v + (1-b2)*g*g;
    // p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps).
    const double bc1 = 1.0 - std::pow((double)h.beta1, (double)h.t);
    const double bc2 = 1.0 - std::pow((double)h.beta2, (double)h.t);
    const float step_size = static_cast<float>(h.lr / bc1);
    const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
#pragma omp parallel for
    for (int64_t i = 0; i < N; ++i) {
        float g = grad[i] * grad_scale;
        float mi = m[i] + (1.0f - h.beta1) * (g - m[i]);
        float vi = h.beta2 * v[i] + (1.0f - h.beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = param[i] * (1.0f - h.lr * h.weight_decay);
        param[i] = p - step_size * mi / (std::sqrt(vi) / bc2_sqrt + h.eps);
    }
}

}  // namespace tessera
