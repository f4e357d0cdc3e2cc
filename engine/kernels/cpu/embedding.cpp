#include "engine/kernels/cpu/embedding.h"

namespace tessera {

void embedding_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                       int T, int C) {
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t) {
            float* o = out + ((long)b * T + t) * C;
            const float* e = wte + (long)inp[b * T + t] * C;
            const float* p = wpe + (long)t * C;
            for (int i = 0; i < C; ++i) o[i] = e[i] + (wpe ? p[i] : 0.0f);
        }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                        int T, int C) {
    // Sequential over rows (the same token may repeat); vectorised over C. Deterministic.
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t) {
            const float* g = dout + ((long)b * T + t) * C;
            float* dw = dwte + (long)inp[b * T + t] * C;
            for (int i = 0; i < C; ++i) dw[i] += g[i];
            if (dwpe) {
                float* dp = dwpe + (long)t * C;
                for (int i = 0; i < C; ++i) dp[i] += g[i];
            }
        }
}

}  // namespace tessera
