#include "engine/kernels/cpu/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessera {

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH,
                       int KV) {
    const int hs = C / NH;
    if (KV <= 0) KV = NH;
    const int group = NH / KV, CK = KV * hs;  // query heads per kv head, the keys' width
    const int C3 = C + 2 * CK;                // a token's row of qkv
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; ++bh) {
        {
            const int b = bh / NH, h = bh % NH;
            const float* q = qkv + (long)b * T * C3 + h * hs;
            const float* k = qkv + (long)b * T * C3 + C + (h / group) * hs;
            const float* v = k + CK;
            float* a = att + ((long)b * NH + h) * T * T;
            // scores (T, T) = scale * q @ k^T
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3,
                        0.0f, a, T);
            for (int t = 0; t < T; ++t) {
                float* row = a + (long)t * T;
                float maxv = row[0];
                for (int j = 1; j <= t; ++j) maxv = row[j] > maxv ? row[j] : maxv;
                float sum = 0.0f;
                for (int j = 0; j <= t; ++j) {
                    row[j] = std::exp(row[j] - maxv);
                    sum += row[j];
                }
                float inv = 1.0f / sum;
                for (int j = 0; j <= t; ++j) row[j] *= inv;
                for (int j = t + 1; j < T; ++j) row[j] = 0.0f;
            }
            // out (T, hs) = att (T, T) @ v (T, hs)
            float* o = out + (long)b * T * C + h * hs;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, v, C3,
                        0.0f, o, C);
        }
    }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int NH, int KV) {
    const int hs = C / NH;
    if (KV <= 0) KV = NH;
    const int group = NH / KV, CK = KV * hs;
    const int C3 = C + 2 * CK;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
    {
        std::vector<float> datt((size_t)T * T);  // per thread
        // one (batch, kv head) per iteration: its query heads in order, so that their gradients of
        // the shared keys and values add up without races
#pragma omp for schedule(static)
        for (int bk = 0; bk < B * KV; ++bk) {
            const int b = bk / KV, kh = bk % KV;
            const float* k = qkv + (long)b * T * C3 + C + kh * hs;
            const float* v = k + CK;
            float* dk = dqkv + (long)b * T * C3 + C + kh * hs;
            float* dv = dk + CK;
            for (int h = kh * group; h < (kh + 1) * group; ++h) {
                const float* q = qkv + (long)b * T * C3 + h * hs;
                float* dq = dqkv + (long)b * T * C3 + h * hs;
                const float* a = att + ((long)b * NH + h) * T * T;
                const float* g = dout + (long)b * T * C + h * hs;
                // datt (T, T) = dout (T, hs) @ v^T ; dv (T, hs) += att^T @ dout
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, g, C, v, C3,
                            0.0f, datt.data(), T);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, g, C,
                            1.0f, dv, C3);
                // softmax backward, in place: dscores = att * (datt - sum_j att * datt)
                for (int t = 0; t < T; ++t) {
                    const float* arow = a + (long)t * T;
                    float* drow = datt.data() + (long)t * T;
                    float dot = 0.0f;
                    for (int j = 0; j <= t; ++j) dot += arow[j] * drow[j];
                    for (int j = 0; j <= t; ++j) drow[j] = arow[j] * (drow[j] - dot);
                    for (int j = t + 1; j < T; ++j) drow[j] = 0.0f;
                }
                // dq += scale * dscores @ k ; dk += scale * dscores^T @ q
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, datt.data(),
                            T, k, C3, 1.0f, dq, C3);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, datt.data(),
                            T, q, C3, 1.0f, dk, C3);
            }
        }
    }
}

void attention_decode(float* out, const float* q, long q_stride, const float* kc, const float* vc,
                      int B, int n, int pos0, int NH, int KV, int hd, int Tmax) {
    const float scale = 1.0f / std::sqrt((float)hd);
    const long kvw = (long)KV * hd;
#pragma omp parallel for collapse(2)
    for (int r = 0; r < B * n; ++r)
        for (int h = 0; h < NH; ++h) {
            const int b = r / n, t = pos0 + r % n, kh = h / (NH / KV);
            const float* qh = q + (long)r * q_stride + (long)h * hd;
            std::vector<float> p(t + 1);
            float m = -INFINITY;
            for (int j = 0; j <= t; ++j) {
                const float* k = kc + ((long)b * Tmax + j) * kvw + (long)kh * hd;
                float dot = 0.0f;
                for (int d = 0; d < hd; ++d) dot += qh[d] * k[d];
                p[j] = dot * scale;
                m = std::max(m, p[j]);
            }
            float sum = 0.0f;
            for (int j = 0; j <= t; ++j) sum += p[j] = std::exp(p[j] - m);
            float* o = out + (long)r * NH * hd + (long)h * hd;
            for (int d = 0; d < hd; ++d) o[d] = 0.0f;
            for (int j = 0; j <= t; ++j) {
                const float* v = vc + ((long)b * Tmax + j) * kvw + (long)kh * hd;
                const float w = p[j] / sum;
                for (int d = 0; d < hd; ++d) o[d] += w * v[d];
            }
        }
}

}  // namespace tessera
