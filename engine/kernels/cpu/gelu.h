// GELU with the tanh approximation (GPT-2), forward and backward.
#pragma once
#include <cstdint>

namespace tessera {

// out, inp are (N).
void gelu_forward(float* out, const float* inp, int64_t N);
// dinp (N) += gelu'(inp) * dout.
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N);
// dinp (N) = gelu'(inp) * dout; dinp may be dout.
void gelu_backward_set(float* dinp, const float* inp, const float* dout, int64_t N);

}  // namespace tessera
