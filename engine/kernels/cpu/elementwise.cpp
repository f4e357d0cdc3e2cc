#include "engine/kernels/cpu/elementwise.h"

namespace tessera {

void residual_forward(float* out, const float* a, const float* b, int64_t N) {
#pragma omp parallel for
    for (int64_t i = 0; i < N; ++i) out[i] = a[i] + b[i];
}

void accumulate(float* dst, const float* src, int64_t N) {
#pragma omp parallel for
    for (int64_t i = 0; i < N; ++i) dst[i] += src[i];
}

void scale_inplace(float* x, float s, int64_t N) {
#pragma omp parallel for
    for (int64_t i = 0; i < N; ++i) x[i] *= s;
}

void relu_forward(float* out, const float* inp, int64_t N) {
#pragma omp parallel for
    for (int64_t i = 0; i < N; ++i) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void relu_backward(float* dinp, const float* inp, const float* dout, int64_t N) {
#pragma omp parallel for
    for (int64_t i = 0; i < N; ++i) dinp[i] += inp[i] > 0.0f ? dout[i] : 0.0f;
}

void relu_backward_set(float* dinp, const float* inp, const float* dout, int64_t N) {
#pragma omp parallel for
    for (int64_t i = 0; i < N; ++i) dinp[i] = inp[i] > 0.0f ? dout[i] : 0.0f;
}

double sum_squares(const float* x, int64_t N) {
    double s = 0.0;
    for (int64_t i = 0; i < N; ++i) s += (double)x[i] * x[i];
    return s;
}

}  // namespace tessera
