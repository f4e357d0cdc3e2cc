#include "engine/kernels/cpu/gelu.h"

#include <cmath>

namespace tessera {

static constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

void gelu_forward(float* out, const float* inp, int64_t N) {
#pragma omp parallel for
    for (int64_t i = 0; i < N; ++i) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + cube)));
    }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N) {
#pragma omp parallel for
    for (int64_t i = 0; i < N; ++i) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        float tanh_arg = kGeluScale * (x + cube);
        float tanh_out = std::tanh(tanh_arg);
        float cosh_out = std::cosh(tanh_arg);
        float sech2 = 1.0f / (cosh_out * cosh_out);
        float local = 0.5f * (1.0f + tanh_out) +
                      x * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += local * dout[i];
    }
}

}  // namespace tessera
