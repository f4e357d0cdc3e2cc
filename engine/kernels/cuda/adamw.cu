// AdamW update: one elementwise kernel over one range, and a multi-range form that updates many
// parameter tensors in one launch (a block per 2048 elements of one range, a thread's elements
// four at a time, 16-byte loads and stores, where the range's arrays are aligned for them).
#include <cmath>
#include <cstdint>

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

// The update of one element: engine/kernels/cpu/adamw.cpp's formula, each operation rounded on
// its own (no fused multiply-adds, IEEE sqrt and division), so the host's AdamW (optimizer
// offload, CPU ranks) gives these bits exactly.
__device__ inline float adamw_value(float& param, float grad, float& m, float& v,
                                    float weight_decay, const AdamWConsts& c) {
    const float g = __fmul_rn(grad, c.grad_scale);
    const float mi = __fadd_rn(m, __fmul_rn(__fsub_rn(1.0f, c.beta1), __fsub_rn(g, m)));
    const float vi =
        __fadd_rn(__fmul_rn(c.beta2, v), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, c.beta2), g), g));
    m = mi;
    v = vi;
    const float p = __fmul_rn(param, __fsub_rn(1.0f, __fmul_rn(c.lr, weight_decay)));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bc2_sqrt), c.eps);
    param = __fsub_rn(p, __fdiv_rn(__fmul_rn(c.step_size, mi), denom));
    return param;
}
// ... of element i of the arrays
__device__ inline float adamw_one(float* param, const float* grad, float* m, float* v, long i,
                                  float weight_decay, const AdamWConsts& c) {
    float p = param[i], mi = m[i], vi = v[i];
    adamw_value(p, grad[i], mi, vi, weight_decay, c);
    m[i] = mi;
    v[i] = vi;
    param[i] = p;
    return p;
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
    float *P = a.p[s], *M = a.m[s], *V = a.v[s];
    const float* G = a.g[s];
    const float wd = a.wd[s];
    long i = base;
    // four elements a thread at a time where every array is 16-byte aligned (the image 8)
    if (((uintptr_t)P | (uintptr_t)G | (uintptr_t)M | (uintptr_t)V) % 16 == 0 &&
        (uintptr_t)img % 8 == 0) {
        constexpr int Q = kPerThread / 4;  // quads per thread in a whole block
        const long quads = (end - base) / 4;
        float4 p[Q], g[Q], m[Q], v[Q];
#pragma unroll
        for (int q = 0; q < Q; ++q) {
            const long k = threadIdx.x + (long)q * kBlock;
            if (k < quads) {
                const long e = base + 4 * k;
                p[q] = *reinterpret_cast<const float4*>(P + e);
                g[q] = *reinterpret_cast<const float4*>(G + e);
                m[q] = *reinterpret_cast<const float4*>(M + e);
                v[q] = *reinterpret_cast<const float4*>(V + e);
            }
        }
#pragma unroll
        for (int q = 0; q < Q; ++q) {
            const long k = threadIdx.x + (long)q * kBlock;
            if (k >= quads) continue;
            const long e = base + 4 * k;
            adamw_value(p[q].x, g[q].x, m[q].x, v[q].x, wd, c);
            adamw_value(p[q].y, g[q].y, m[q].y, v[q].y, wd, c);
            adamw_value(p[q].z, g[q].z, m[q].z, v[q].z, wd, c);
            adamw_value(p[q].w, g[q].w, m[q].w, v[q].w, wd, c);
            *reinterpret_cast<float4*>(P + e) = p[q];
            *reinterpret_cast<float4*>(M + e) = m[q];
            *reinterpret_cast<float4*>(V + e) = v[q];
            if (img) {  // the rounding cast_f32_to_bf16_cuda uses
                __align__(8) bf16 h[4] = {from_float<bf16>(p[q].x), from_float<bf16>(p[q].y),
                                          from_float<bf16>(p[q].z), from_float<bf16>(p[q].w)};
                *reinterpret_cast<uint2*>(img + e) = *reinterpret_cast<const uint2*>(h);
            }
        }
        i = base + 4 * quads;  // the range's last few elements, below
    }
    for (i += threadIdx.x; i < end; i += kBlock) {
        const float p = adamw_one(P, G, M, V, i, wd, c);
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
