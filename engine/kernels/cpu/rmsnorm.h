// RMSNorm (the Llama family): y = x / sqrt(mean(x²) + eps) · weight, no mean subtraction, no bias.
// Over the rows of a (N, C) array, or per head (Qwen3's q/k norm: each head's hd elements of a
// row of qkv, one weight of hd shared by the heads).
#pragma once

namespace tessera {

// out, inp are (N, C); weight (C); rstd (N) = 1 / sqrt(mean(x²) + eps), saved for backward.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                     float eps);
// dinp (N, C) +=, dweight (C) +=; dout, inp (N, C); rstd from the forward.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C);

// Per head: `heads` heads of hd at the start of each of N rows (row stride `stride` elements) of
// out and inp; weight (hd); rstd (N·heads), row n's head h at n·heads + h.
void rmsnorm_heads_forward(float* out, float* rstd, const float* inp, const float* weight, int N,
                           int heads, int hd, long stride, float eps);
// dinp (laid out as inp) = the gradient, OVERWRITTEN (dinp may be dout); dweight (hd) +=.
void rmsnorm_heads_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                            const float* weight, const float* rstd, int N, int heads, int hd,
                            long stride);

}  // namespace tessera
