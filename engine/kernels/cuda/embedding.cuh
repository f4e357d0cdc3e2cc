// Token + position embedding (GPT-2 encoder) on the GPU, vocab-parallel: this rank holds the wte
// rows of the token ids [v0, v1); same math as engine/kernels/cpu/embedding.h for v0 = 0, v1 = V.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace tessera {

// out (B, Tseq, C) = (v0 <= tok < v1 ? wte[tok - v0] : 0) + (wpe ? wpe[t] : 0), tok = tokens[b, t];
// tokens (B, Tseq) int32; wte (v1 - v0, C); wpe (>= Tseq, C) or null.
template <typename T>
void embedding_forward_cuda(T* out, const int* tokens, const T* wte, const T* wpe, long v0, long v1,
                            int B, int Tseq, int C, cudaStream_t s);

// dwte (v1 - v0, C) += dout rows of the tokens in [v0, v1); dwpe (>= Tseq, C) += sum over b of
// dout[b, t] (or null), fp32. Each token's rows and each position's batch rows are added in row
// order, as engine/kernels/cpu/embedding.cpp does: deterministic, and in fp32 the CPU's bits.
template <typename T>
void embedding_backward_cuda(float* dwte, float* dwpe, const T* dout, const int* tokens, long v0,
                             long v1, int B, int Tseq, int C, cudaStream_t s);

}  // namespace tessera
