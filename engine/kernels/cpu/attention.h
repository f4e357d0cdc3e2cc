// Causal multi-head self-attention on the CPU, with grouped-query attention (GPT-2: as many key /
// value heads as query heads; the Llama family: KV < NH, query head h reading kv head
// h / (NH / KV)). Scores are materialised per (batch, head) as a (T, T) matrix and multiplied
// through OpenBLAS; the CUDA backend has the fused version.
#pragma once

namespace tessera {

// C = NH·hs, the queries' width; KV key/value heads (0: NH). out is (B, T, C); att is
// (B, NH, T, T) softmax probabilities saved for backward (upper triangle zero); qkv is
// (B, T, C + 2·KV·hs) laid out [q | k | v], head h at columns h*hs .. (h+1)*hs of its part.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH, int KV = 0);
// dqkv (B, T, C + 2·KV·hs) += ; dout is (B, T, C); scratch is (T, T) floats per OpenMP thread.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int NH, int KV = 0);

}  // namespace tessera
