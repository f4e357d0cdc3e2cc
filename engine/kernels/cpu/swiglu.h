// SwiGLU, the Llama family's MLP activation: out = silu(gate) · up, silu(g) = g · σ(g).
#pragma once
#include <cstdint>

namespace tessera {

// out (N, F); gu (N, 2F) holds each row's gate then its up projection (one fused GEMM's output).
void swiglu_forward(float* out, const float* gu, int64_t N, int64_t F);
// dgu (N, 2F) = (overwritten) the gradients of gate and up; dout (N, F).
void swiglu_backward(float* dgu, const float* dout, const float* gu, int64_t N, int64_t F);

}  // namespace tessera
