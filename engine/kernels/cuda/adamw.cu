// AdamW update: one grid-stride elementwise kernel.
#include "engine/kernels/cuda/adamw.cuh"

#include <cmath>

#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"

namespace tessera {

// param, grad, m, v are (n).
static __global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, long n,
                                    float lr, float beta1, float beta2, float eps,
                                    float weight_decay, float step_size, float bc2_sqrt,
                                    float grad_scale) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x) {
        float g = grad[i] * grad_scale;
        float mi = m[i] + (1.0f - beta1) * (g - m[i]);
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = param[i] * (1.0f - lr * weight_decay);
        param[i] = p - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

void adamw_cuda(float* param, const float* grad, float* m, float* v, long n, float lr, float beta1,
                float beta2, float eps, float weight_decay, long t, float grad_scale,
                cudaStream_t s) {
    TS_CUDA_REQUIRE(n >= 0 && t >= 1, "adamw_cuda: bad n=", n, " or step t=", t, " (1-based)");
    if (n == 0) return;
    TS_CUDA_REQUIRE(param && grad && m && v, "adamw_cuda: null param/grad/m/v");
    const double bc1 = 1.0 - std::pow((double)beta1, (double)t);
    const double bc2 = 1.0 - std::pow((double)beta2, (double)t);
    const float step_size = static_cast<float>(lr / bc1);
    const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
    adamw_kernel<<<grid_for(n, 256), 256, 0, s>>>(param, grad, m, v, n, lr, beta1, beta2, eps,
                                                   weight_decay, step_size, bc2_sqrt, grad_scale);
    CUDA_CHECK_LAUNCH("adamw_kernel");
}

}  // namespace tessera
