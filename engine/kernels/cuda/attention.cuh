// Fused causal multi-head self-attention on the GPU (FlashAttention-2 style): the (T, T) scores
// are never materialised. The forward saves one logsumexp per (b, h, t) instead of the CPU's
// probabilities; the backward recomputes the probabilities tile by tile from it. Same layout as
// the CPU kernel (engine/kernels/cpu/attention.h): qkv is (B, T, C + 2·KV·hs) laid out
// [q | k | v], head h at columns h*hs .. (h+1)*hs of its part, scale 1/sqrt(hs), hs = C / NH in
// {32, 64, 128}. Grouped-query attention: KV key/value heads (KV divides NH; GPT-2 has KV = NH),
// query head h reads kv head h / (NH / KV) in place (no copies).
// T = float: plain fp32 FMA math (matches the CPU to ~1e-6). T = bf16: tensor cores (mma.sync,
// fp32 accumulation and fp32 softmax statistics); the forward at hs 64 on an sm_90a build and a
// compute capability 9.0 device runs warpgroup products (wgmma, attention_wgmma.cuh) instead.
#pragma once
#include "engine/kernels/cuda/cuda_common.cuh"

namespace tessera {

// out (B, T_, C); lse (B, NH, T_) fp32 logsumexp of each row of scaled scores; qkv
// (B, T_, C + 2·KV·hs).
// (T_ is the sequence length; T is the activation type.) qkv must be 16-byte aligned.
template <typename T>
void attention_forward_cuda(T* out, float* lse, const T* qkv, int B, int T_, int C, int NH, int KV,
                            cudaStream_t s);

// dqkv (B, T_, C + 2·KV·hs) is OVERWRITTEN (unlike the CPU kernel, which accumulates); dout and
// out are (B, T_, C), out and lse as written by attention_forward_cuda; qkv as dqkv. A kv head's
// dK, dV sum over its query heads within one block. qkv and dout
// must be 16-byte aligned. Deterministic (no atomics: dK/dV and dQ are separate passes). Uses
// B*NH*T_ floats of stream-ordered scratch (cudaMallocAsync on s).
template <typename T>
void attention_backward_cuda(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse,
                             int B, int T_, int C, int NH, int KV, cudaStream_t s);

// Cached decoding (tessera sample), as engine/kernels/cpu/attention.h's attention_decode: q B·n
// rows (stride q_stride elements) of NH heads of hd; kc, vc (B, Tmax, KV·hd); query i of sequence
// b at position pos0 + i sees keys 0 .. pos0 + i. out (B·n, NH·hd). One warp per (row, head),
// an online softmax over the keys; hd <= 128.
template <typename T>
void attention_decode_cuda(T* out, const T* q, long q_stride, const T* kc, const T* vc, int B,
                           int n, int pos0, int NH, int KV, int hd, int Tmax, cudaStream_t s);

extern template void attention_forward_cuda<float>(float*, float*, const float*, int, int, int, int,
                                                   int, cudaStream_t);
extern template void attention_forward_cuda<bf16>(bf16*, float*, const bf16*, int, int, int, int,
                                                  int, cudaStream_t);
extern template void attention_backward_cuda<float>(float*, const float*, const float*,
                                                    const float*, const float*, int, int, int, int,
                                                    int, cudaStream_t);
extern template void attention_backward_cuda<bf16>(bf16*, const bf16*, const bf16*, const bf16*,
                                                   const float*, int, int, int, int, int,
                                                   cudaStream_t);

}  // namespace tessera
