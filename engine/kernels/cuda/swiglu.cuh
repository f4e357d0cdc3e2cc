// The SwiGLU activation of the Llama family's MLP on the GPU; same math as
// engine/kernels/cpu/swiglu.h. T is float or bf16; computed in fp32.
#pragma once
#include <cuda_runtime.h>

namespace tessera {

// out (N, F) = silu(gate) · up; gu (N, 2F), each row's gate then its up.
template <typename T>
void swiglu_forward_cuda(T* out, const T* gu, long N, long F, cudaStream_t s);

// dgu (N, 2F) = (overwritten) d gate, d up; dout (N, F).
template <typename T>
void swiglu_backward_cuda(T* dgu, const T* dout, const T* gu, long N, long F, cudaStream_t s);

}  // namespace tessera
