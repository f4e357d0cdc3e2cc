// LayerNorm over the last dimension (eps 1e-5) on the GPU, forward (plain and fused with the
// residual add) and backward; same math as engine/kernels/cpu/layernorm.h. RMSNorm (the Llama
// family; engine/kernels/cpu/rmsnorm.h) shares its weight-gradient reduction. T is float or bf16;
// statistics and reductions are fp32.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace tessera {

// out (N, C) = (inp - mean) * rstd * weight + bias; mean, rstd (N) fp32, saved for the backward
// (either may be null for inference); inp is (N, C); weight, bias are (C).
template <typename T>
void layernorm_forward_cuda(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                            const T* bias, int N, int C, cudaStream_t s);

// residual_out (N, C) = a + b (rounded to T), then ln_out = layernorm(residual_out) as above.
// residual_out may alias a or b.
template <typename T>
void fused_residual_layernorm_forward_cuda(T* residual_out, T* ln_out, float* mean, float* rstd,
                                           const T* a, const T* b, const T* weight, const T* bias,
                                           int N, int C, cudaStream_t s);

// dinp (N, C) +=, dweight (C) +=, dbias (C) += (fp32); dout, inp are (N, C); weight is (C);
// mean, rstd are the forward's (N). Any of dinp / dweight / dbias may be null.
// dweight/dbias are deterministic: per-chunk partial sums in a scratch buffer (layernorm_dparams
// slot), then a final reduce in chunk order -- no atomics.
template <typename T>
void layernorm_backward_cuda(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                             const T* weight, const float* mean, const float* rstd, int N, int C,
                             cudaStream_t s);

// out (N, C) = inp · rstd · weight, rstd = 1 / sqrt(mean(inp²) + eps) (N, fp32, may be null).
template <typename T>
void rmsnorm_forward_cuda(T* out, float* rstd, const T* inp, const T* weight, int N, int C,
                          float eps, cudaStream_t s);

// dinp (N, C) += (may be null), dweight (C) += (fp32, may be null); dout, inp (N, C); rstd the
// forward's. Deterministic like layernorm_backward_cuda (same scratch slot).
template <typename T>
void rmsnorm_backward_cuda(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                           const float* rstd, int N, int C, cudaStream_t s);

// Per head (Qwen3's q/k norm): `heads` heads of hd at the start of each of N rows (row stride
// `stride` elements) of out and inp; weight (hd); rstd (N·heads).
template <typename T>
void rmsnorm_heads_forward_cuda(T* out, float* rstd, const T* inp, const T* weight, int N,
                                int heads, int hd, long stride, float eps, cudaStream_t s);
// dinp (laid out as inp) = the gradient, OVERWRITTEN (dinp may be dout); dweight (hd) +=.
template <typename T>
void rmsnorm_heads_backward_cuda(T* dinp, float* dweight, const T* dout, const T* inp,
                                 const T* weight, const float* rstd, int N, int heads, int hd,
                                 long stride, cudaStream_t s);

}  // namespace tessera
