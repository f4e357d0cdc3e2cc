// AdamW update: one elementwise kernel over one range, and a multi-range form that updates many
// parameter tensors in one launch (a block per 2048 elements of one range).
#include <cmath>

#include "engine/kernels/cuda/adamw.cuh"
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"

namespace tessera {

namespace {

// Step-dependent constants, computed once on the host (bias corrections in double).
struct AdamWConsts {
    float lr, beta1, beta2, eps, step_size, bc2_sqrt, grad_scale;
};

AdamWConsts adamw_consts(float lr, float beta1, float beta2, float eps, long t, float grad_scale) {
    const double bc1 = 1.0 - std::pow((double)beta1, (double)t);
    const double bc2 = 1.0 - std::pow((double)beta2, (double)t);
    return {lr,
            beta1,
            beta2,
            eps,
            static_cast<float>(lr / bc1),
            static_cast<float>(std::sqrt(bc2)),
            grad_scale};
}

// The update of element i: engine/kernels/cpu/adamw.cpp's formula, each operation rounded on its
// own (no fused multiply-adds, IEEE sqrt and division), so the host's AdamW (optimizer offload,
// CPU ranks) gives these bits exactly.
__device__ inline float adamw_one(float* param, const float* grad, float* m, float* v, long i,
                                  float weight_decay, const AdamWConsts& c) {
    const float g = __fmul_rn(grad[i], c.grad_scale);
    const float mi = __fadd_rn(m[i], __fmul_rn(__fsub_rn(1.0f, c.beta1), __fsub_rn(g, m[i])));
    const float vi =
        __fadd_rn(__fmul_rn(c.beta2, v[i]), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, c.beta2), g), g));
    m[i] = mi;
    v[i] = vi;
    const float p = __fmul_rn(param[i], __fsub_rn(1.0f, __fmul_rn(c.lr, weight_decay)));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bc2_sqrt), c.eps);
    const float updated = __fsub_rn(p, __fdiv_rn(__fmul_rn(c.step_size, mi), denom));
    param[i] = updated;
    return updated;
}
constexpr int kBlock = 256, kPerThread = 8, kPerBlock = kBlock * kPerThread;

// Up to kAdamWMaxSegments ranges, passed by value (about 3 KB of kernel parameters).
struct MultiArgs {
    float* p[kAdamWMaxSegments];
    const float* g[kAdamWMaxSegments];
    float* m[kAdamWMaxSegments];
    float* v[kAdamWMaxSegments];
    long n[kAdamWMaxSegments];
    float wd[kAdamWMaxSegments];
    bf16* img[kAdamWMaxSegments];  // null: no bf16 image of the range
    long first_block[kAdamWMaxSegments + 1];
    int count;
};

}  // namespace

// param, grad, m, v are (n).
static __global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, long n,
                                    float weight_decay, AdamWConsts c) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x)
        adamw_one(param, grad, m, v, i, weight_decay, c);
}

// Block b updates elements [k * kPerBlock, (k + 1) * kPerBlock) of the range it falls in.
// clip_norm2, where given: the squared global gradient norm on the device, from which the
// gradient scale is computed (clip_scale, the host's own definition).
static __global__ void adamw_multi_kernel(MultiArgs a, AdamWConsts c, const float* clip_norm2,
                                          double grad_clip) {
    if (clip_norm2) c.grad_scale = clip_scale(grad_clip, sqrt((double)*clip_norm2));
    int s = 0;
    while (s + 1 < a.count && blockIdx.x >= a.first_block[s + 1]) ++s;
    const long base = (blockIdx.x - a.first_block[s]) * (long)kPerBlock;
    const long end = min(a.n[s], base + kPerBlock);
    bf16* img = a.img[s];
    for (long i = base + threadIdx.x; i < end; i += kBlock) {
        const float p = adamw_one(a.p[s], a.g[s], a.m[s], a.v[s], i, a.wd[s], c);
        if (img) img[i] = from_float<bf16>(p);  // the rounding cast_f32_to_bf16_cuda uses
    }
}

void adamw_cuda(float* param, const float* grad, float* m, float* v, long n, float lr, float beta1,
                float beta2, float eps, float weight_decay, long t, float grad_scale,
                cudaStream_t s) {
    TS_CUDA_REQUIRE(n >= 0 && t >= 1, "adamw_cuda: bad n=", n, " or step t=", t, " (1-based)");
    if (n == 0) return;
    TS_CUDA_REQUIRE(param && grad && m && v, "adamw_cuda: null param/grad/m/v");
    adamw_kernel<<<grid_for(n, kBlock), kBlock, 0, s>>>(
        param, grad, m, v, n, weight_decay, adamw_consts(lr, beta1, beta2, eps, t, grad_scale));
    CUDA_CHECK_LAUNCH("adamw_kernel");
}

void adamw_multi_cuda(const AdamWRange* ranges, int count, float lr, float beta1, float beta2,
                      float eps, long t, float grad_scale, cudaStream_t s, const float* clip_norm2,
                      double grad_clip) {
    TS_CUDA_REQUIRE(count >= 0 && t >= 1, "adamw_multi_cuda: bad count=", count, " or step t=", t);
    const AdamWConsts c = adamw_consts(lr, beta1, beta2, eps, t, grad_scale);
    int k = 0;
    while (k < count) {
        MultiArgs a{};
        long blocks = 0;
        for (; k < count && a.count < kAdamWMaxSegments; ++k) {
            const AdamWRange& r = ranges[k];
            TS_CUDA_REQUIRE(r.n >= 0, "adamw_multi_cuda: range ", k, " has n=", r.n);
            if (r.n == 0) continue;
            TS_CUDA_REQUIRE(r.param && r.grad && r.m && r.v, "adamw_multi_cuda: range ", k,
                            " has a null pointer");
            const int j = a.count++;
            a.p[j] = r.param;
            a.g[j] = r.grad;
            a.m[j] = r.m;
            a.v[j] = r.v;
            a.n[j] = r.n;
            a.wd[j] = r.weight_decay;
            a.img[j] = reinterpret_cast<bf16*>(r.image16);
            a.first_block[j] = blocks;
            blocks += (r.n + kPerBlock - 1) / kPerBlock;
        }
        if (a.count == 0) continue;
        a.first_block[a.count] = blocks;
        TS_CUDA_REQUIRE(blocks < (1L << 31), "adamw_multi_cuda: too many elements in one launch");
        adamw_multi_kernel<<<(unsigned)blocks, kBlock, 0, s>>>(a, c, clip_norm2, grad_clip);
        CUDA_CHECK_LAUNCH("adamw_multi_kernel");
    }
}

}  // namespace tessera
