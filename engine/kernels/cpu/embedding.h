// Token + position embedding (GPT-2 encoder), forward and backward.
#pragma once
#include <cstdint>

namespace tessera {

// out (B, T, C) = wte[inp[b, t]] + wpe[t]; inp is (B, T) token ids; wte (V, C); wpe (maxT, C).
void embedding_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                       int T, int C);
// dwte (V, C) +=, dwpe (maxT, C) += ; dout is (B, T, C). dwpe may be null.
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                        int T, int C);

}  // namespace tessera
