// Causal multi-head self-attention on the CPU (GPT-2). Scores are materialised per (batch, head)
// as a (T, T) matrix and multiplied through OpenBLAS; the CUDA backend has the fused version.
#pragma once

namespace tessera {

// out is (B, T, C); att is (B, NH, T, T) softmax probabilities saved for backward (upper triangle
// zero); qkv is (B, T, 3C) laid out [q | k | v], head h at columns h*hs .. (h+1)*hs of each part.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
// dqkv (B, T, 3C) += ; dout is (B, T, C); scratch is (T, T) floats per OpenMP thread.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int NH);

}  // namespace tessera
