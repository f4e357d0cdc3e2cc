// RMSNorm (the Llama family): y = x / sqrt(mean(x²) + eps) · weight, no mean subtraction, no bias.
#pragma once

namespace tessera {

// out, inp are (N, C); weight (C); rstd (N) = 1 / sqrt(mean(x²) + eps), saved for backward.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps);
// dinp (N, C) +=, dweight (C) +=; dout, inp (N, C); rstd from the forward.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C);

}  // namespace tessera
