// AdamW (decoupled weight decay) on fp32 parameters on the GPU; exactly the formula of
// engine/kernels/cpu/adamw.cpp (PyTorch's), bias corrections computed in double on the host.
#pragma once
#include <cuda_runtime.h>

#include "engine/kernels/cpu/adamw.h"  // AdamWRange

namespace tessera {

// param, grad, m, v are (n) fp32; updates param, m, v in place. g = grad * grad_scale; t is the
// 1-based step count.
void adamw_cuda(float* param, const float* grad, float* m, float* v, long n, float lr, float beta1,
                float beta2, float eps, float weight_decay, long t, float grad_scale,
                cudaStream_t s);

constexpr int kAdamWMaxSegments = 48;  // ranges per launch (more: several launches)

// adamw_cuda over every range (count of them), in one launch per kAdamWMaxSegments ranges:
// the same result as one adamw_cuda call per range.
// clip_norm2 (device memory), where given, replaces grad_scale by the gradient-clipping scale
// for the squared global norm it holds (grad_clip <= 0: no clipping, scale 1).
void adamw_multi_cuda(const AdamWRange* ranges, int count, float lr, float beta1, float beta2,
                      float eps, long t, float grad_scale, cudaStream_t s,
                      const float* clip_norm2 = nullptr, double grad_clip = 0.0);

}  // namespace tessera
