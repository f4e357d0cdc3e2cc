// AdamW (decoupled weight decay) on fp32 parameters, one contiguous range.
#pragma once
#include <cstdint>

namespace tessera {

struct AdamWHyper {
    float lr, beta1, beta2, eps, weight_decay;
    int64_t t;  // 1-based step count for bias correction
};

// One parameter range of a multi-range update (DeviceOps::adamw_ranges, adamw_multi_cuda): its
// own weight decay, the other hyperparameters shared. image16, where given (GPUs only): the
// updated values rounded to bf16 are written there as well, the copy bf16 layers compute with,
// so no separate cast pass reads the fp32 values again.
struct AdamWRange {
    float* param;
    const float* grad;
    float* m;
    float* v;
    int64_t n;
    float weight_decay;
    uint16_t* image16 = nullptr;
};

// The factor torch.nn.utils.clip_grad_norm_ scales gradients by: min(1, clip / (norm + 1e-6));
// 1 when clipping is off (clip <= 0). One definition for the host and for the CUDA AdamW kernel,
// which computes it on the device from the summed squared norm.
#ifdef __CUDACC__
__host__ __device__
#endif
    inline float
    clip_scale(double grad_clip, double grad_norm) {
    if (grad_clip <= 0.0) return 1.0f;
    double coef = grad_clip / (grad_norm + 1e-6);
    return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

// param, grad, m, v are (N); updates param, m, v in place. grad is pre-scaled (clipping applied).
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t N,
                  const AdamWHyper& h, float grad_scale = 1.0f);

}  // namespace tessera
