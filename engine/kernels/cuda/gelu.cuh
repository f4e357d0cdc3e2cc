// Activations on the GPU: GELU with the tanh approximation (GPT-2; same math as
// engine/kernels/cpu/gelu.h) and ReLU (the MLP; engine/kernels/cpu/elementwise.h).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace tessera {

// out, inp are (n). out may alias inp.
template <typename T>
void gelu_forward_cuda(T* out, const T* inp, long n, cudaStream_t s);

// dinp (n) = gelu'(inp) * dout -- OVERWRITTEN (the CPU kernel accumulates); inp, dout are (n).
// dinp may alias dout.
template <typename T>
void gelu_backward_cuda(T* dinp, const T* inp, const T* dout, long n, cudaStream_t s);

// out (n) = max(inp, 0); out may alias inp.
template <typename T>
void relu_forward_cuda(T* out, const T* inp, long n, cudaStream_t s);
// dinp (n) = (inp > 0) · dout, overwritten; dinp may alias dout.
template <typename T>
void relu_backward_cuda(T* dinp, const T* inp, const T* dout, long n, cudaStream_t s);

}  // namespace tessera
