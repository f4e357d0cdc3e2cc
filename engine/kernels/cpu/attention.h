// Causal multi-head self-attention on the CPU, with grouped-query attention (GPT-2: as many key /
// value heads as query heads; the Llama family: KV < NH, query head h reading kv head
// h / (NH / KV)). Scores are materialised per (batch, head) as a (T, T) matrix and multiplied
// through OpenBLAS; the CUDA backend has the fused version.
#pragma once

namespace tessera {

// C = NH·hs, the queries' width; KV key/value heads (0: NH). out is (B, T, C); att is
// (B, NH, T, T) softmax probabilities saved for backward (upper triangle zero); qkv is
// (B, T, C + 2·KV·hs) laid out [q | k | v], head h at columns h*hs .. (h+1)*hs of its part.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH,
                       int KV = 0);
// dqkv (B, T, C + 2·KV·hs) += ; dout is (B, T, C); scratch is (T, T) floats per OpenMP thread.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int NH, int KV = 0);

// Cached decoding: n new queries per sequence against a key/value cache. q: B·n rows (row stride
// q_stride floats) holding NH heads of hd; kc, vc (B, Tmax, KV·hd); query i of sequence b is at
// position pos0 + i and sees the keys 0 .. pos0 + i (already in the cache). out (B·n, NH·hd).
void attention_decode(float* out, const float* q, long q_stride, const float* kc, const float* vc,
                      int B, int n, int pos0, int NH, int KV, int hd, int Tmax);

}  // namespace tessera
