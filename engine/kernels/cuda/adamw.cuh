// AdamW (decoupled weight decay) on fp32 parameters on the GPU; exactly the formula of
// engine/kernels/cpu/adamw.cpp (PyTorch's), bias corrections computed in double on the host.
#pragma once
#include <cuda_runtime.h>

namespace tessera {

// param, grad, m, v are (n) fp32; updates param, m, v in place. g = grad * grad_scale; t is the
// 1-based step count.
void adamw_cuda(float* param, const float* grad, float* m, float* v, long n, float lr, float beta1,
                float beta2, float eps, float weight_decay, long t, float grad_scale,
                cudaStream_t s);

}  // namespace tessera
