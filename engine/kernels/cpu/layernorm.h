// LayerNorm over the last dimension (eps 1e-5), forward and backward.
#pragma once

namespace tessera {

// out is (N, C); mean, rstd are (N) saved for backward; inp is (N, C); weight, bias are (C).
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);
// dinp (N, C) +=, dweight (C) +=, dbias (C) += ; dout is (N, C).
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C);

}  // namespace tessera
