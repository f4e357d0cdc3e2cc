// Small elementwise ops: residual add, accumulate, scale, ReLU.
#pragma once
#include <cstdint>

namespace tessera {

void residual_forward(float* out, const float* a, const float* b, int64_t N);  // out = a + b
void accumulate(float* dst, const float* src, int64_t N);                      // dst += src
void scale_inplace(float* x, float s, int64_t N);                              // x *= s
void relu_forward(float* out, const float* inp, int64_t N);
void relu_backward(float* dinp, const float* inp, const float* dout, int64_t N);  // dinp +=
// dinp = (inp > 0) · dout, overwritten (dinp may be dout)
void relu_backward_set(float* dinp, const float* inp, const float* dout, int64_t N);
double sum_squares(const float* x, int64_t N);  // in double, for gradient norms

}  // namespace tessera
