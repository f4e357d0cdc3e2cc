#include "engine/kernels/cpu/matmul.h"

#include <cblas.h>

namespace tessera {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC) {
    if (bias) {
#pragma omp parallel for
        for (int n = 0; n < N; ++n)
            for (int o = 0; o < OC; ++o) out[(long)n * OC + o] = bias[o];
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C,
                bias ? 1.0f : 0.0f, out, OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                    1.0f, dinp, C);
    if (dweight)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
                    dweight, C);
    if (dbias) {
#pragma omp parallel for
        for (int o = 0; o < OC; ++o) {
            double s = 0;
            for (int n = 0; n < N; ++n) s += dout[(long)n * OC + o];
            dbias[o] += static_cast<float>(s);
        }
    }
}

}  // namespace tessera
