// Linear layer on the CPU through OpenBLAS sgemm. Weights are stored (OC, C) like nn.Linear.
#pragma once

namespace tessera {

// out is (N, OC) = inp (N, C) @ weight^T + bias; weight is (OC, C), bias is (OC) or null.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC);
// dinp (N, C) += dout @ weight; dweight (OC, C) += dout^T @ inp; dbias (OC) += sum_n dout.
// Any of dinp / dweight / dbias may be null to skip it.
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC);

}  // namespace tessera
