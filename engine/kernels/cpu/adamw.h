// AdamW (decoupled weight decay) on fp32 parameters, one contiguous range.
#pragma once
#include <cstdint>

namespace tessera {

struct AdamWHyper {
    float lr, beta1, beta2, eps, weight_decay;
    int64_t t;  // 1-based step count for bias correction
};

// One parameter range of a multi-range update (DeviceOps::adamw_ranges, adamw_multi_cuda): its
// own weight decay, the other hyperparameters shared.
struct AdamWRange {
    float* param;
    const float* grad;
    float* m;
    float* v;
    int64_t n;
    float weight_decay;
};

// param, grad, m, v are (N); updates param, m, v in place. grad is pre-scaled (clipping applied).
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t N,
                  const AdamWHyper& h, float grad_scale = 1.0f);

}  // namespace tessera
