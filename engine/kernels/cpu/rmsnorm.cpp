#include "engine/kernels/cpu/rmsnorm.h"

#include <omp.h>

#include <cmath>
#include <vector>

namespace tessera {

namespace {

// Where the rows of C elements lie: R rows per group, groups `stride` elements apart (plain
// (N, C): R = 1, stride = C; the heads of q in qkv rows: R = heads, stride = the qkv row).
struct RowLayout {
    int R;
    long stride;
    int C;
    long offset(long row) const { return (row / R) * stride + (row % R) * (long)C; }
};

void forward_rows(float* out, float* rstd, const float* inp, const float* weight, long rows,
                  RowLayout L, float eps) {
    const int C = L.C;
#pragma omp parallel for
    for (long n = 0; n < rows; ++n) {
        const float* x = inp + L.offset(n);
        float ss = 0.0f;
        for (int c = 0; c < C; ++c) ss += x[c] * x[c];
        const float r = 1.0f / std::sqrt(ss / C + eps);
        rstd[n] = r;
        float* y = out + L.offset(n);
        for (int c = 0; c < C; ++c) y[c] = (x[c] * r) * weight[c];
    }
}

// With x̂ = x·r: dweight += Σ_n dout·x̂; dx = r·(g − x̂·mean(g·x̂)), g = dout·weight, added to dinp
// or (accumulate false) written over it; dinp may then be dout (each element is read before it is
// written). The weight gradient is summed per thread (rows split in order) and the partial sums
// added in thread order.
void backward_rows(float* dinp, float* dweight, const float* dout, const float* inp,
                   const float* weight, const float* rstd, long rows, RowLayout L,
                   bool accumulate) {
    const int C = L.C;
    const int nt = omp_get_max_threads();
    std::vector<float> part((size_t)nt * C, 0.0f);
#pragma omp parallel
    {
        float* dw = part.data() + (size_t)omp_get_thread_num() * C;
#pragma omp for schedule(static)
        for (long n = 0; n < rows; ++n) {
            const float* x = inp + L.offset(n);
            const float* d = dout + L.offset(n);
            const float r = rstd[n];
            if (!dinp) {  // the weight gradient only (a split backward's W)
                for (int c = 0; c < C; ++c) dw[c] += d[c] * (x[c] * r);
                continue;
            }
            float dot = 0.0f;
            for (int c = 0; c < C; ++c) dot += d[c] * weight[c] * (x[c] * r);
            dot /= C;
            float* dx = dinp + L.offset(n);
            for (int c = 0; c < C; ++c) {
                const float xh = x[c] * r;
                const float g = r * (d[c] * weight[c] - xh * dot);
                dw[c] += d[c] * xh;
                dx[c] = accumulate ? dx[c] + g : g;
            }
        }
    }
    if (!dweight) return;  // the input gradient only (a split backward's B)
    for (int t = 0; t < nt; ++t)
        for (int c = 0; c < C; ++c) dweight[c] += part[(size_t)t * C + c];
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                     float eps) {
    forward_rows(out, rstd, inp, weight, N, {1, C, C}, eps);
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C) {
    backward_rows(dinp, dweight, dout, inp, weight, rstd, N, {1, C, C}, true);
}

void rmsnorm_heads_forward(float* out, float* rstd, const float* inp, const float* weight, int N,
                           int heads, int hd, long stride, float eps) {
    forward_rows(out, rstd, inp, weight, (long)N * heads, {heads, stride, hd}, eps);
}

void rmsnorm_heads_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                            const float* weight, const float* rstd, int N, int heads, int hd,
                            long stride) {
    backward_rows(dinp, dweight, dout, inp, weight, rstd, (long)N * heads, {heads, stride, hd},
                  false);
}

}  // namespace tessera
