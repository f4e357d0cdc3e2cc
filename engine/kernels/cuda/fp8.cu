// FP8 quantization for the fp8 GEMMs (fp8.cuh): absolute maximum, then scale-and-saturate into
// e4m3 or e5m2, straight or transposed (cuBLASLt's FP8 GEMMs take only the "TN" layout, so the
// backward's operands are quantized into their transposes).
#include <cuda_fp8.h>

#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"
#include "engine/kernels/cuda/fp8.cuh"

namespace tessera {

namespace {

// ---------------------------------------------------------------------------------------------
// kernels

template <Fp8Format F>
__device__ __forceinline__ float fp8_max() {
    return F == Fp8Format::e4m3 ? 448.0f : 57344.0f;
}

// the quantization scale of a tensor with absolute maximum amax (finite; 1 for an all-zero one)
template <Fp8Format F>
__device__ __forceinline__ float fp8_scale(float amax) {
    return amax > 0.0f ? fminf(fp8_max<F>() / amax, 1e30f) : 1.0f;
}

template <Fp8Format F>
__device__ __forceinline__ uint16_t to_fp8x2(float a, float b) {
    return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE,
                                    F == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2);
}

// amax = max(amax, max |x|); x (n); 8 elements per 16-byte load where `vec`
static __global__ void amax_kernel(float* amax, const bf16* x, long n, bool vec) {
    const long stride = (long)gridDim.x * blockDim.x;
    const long first = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const long nv = vec ? n / 8 : 0;
    float m = 0.0f;
    for (long v = first; v < nv; v += stride) {
        const int4 raw = reinterpret_cast<const int4*>(x)[v];
        const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const float2 f = __bfloat1622float2(p[k]);
            m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
        }
    }
    for (long i = nv * 8 + first; i < n; i += stride) m = fmaxf(m, fabsf(__bfloat162float(x[i])));
    m = block_max(m);
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));  // m >= 0
}

// q (n) = saturate(x (n) · s); 8 elements per thread and step where `vec`
template <Fp8Format F>
static __global__ void quantize_kernel(uint8_t* q, float* scale_inv, const bf16* x,
                                       const float* amax, long n, bool vec) {
    const float s = fp8_scale<F>(*amax);
    if (blockIdx.x == 0 && threadIdx.x == 0) *scale_inv = 1.0f / s;
    const long stride = (long)gridDim.x * blockDim.x;
    const long first = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const long nv = vec ? n / 8 : 0;
    for (long v = first; v < nv; v += stride) {
        const int4 raw = reinterpret_cast<const int4*>(x)[v];
        const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&raw);
        uint2 out;
        uint16_t h[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const float2 f = __bfloat1622float2(p[k]);
            h[k] = to_fp8x2<F>(f.x * s, f.y * s);
        }
        out.x = h[0] | ((uint32_t)h[1] << 16);
        out.y = h[2] | ((uint32_t)h[3] << 16);
        reinterpret_cast<uint2*>(q)[v] = out;
    }
    for (long i = nv * 8 + first; i < n; i += stride)
        q[i] = (uint8_t)(to_fp8x2<F>(__bfloat162float(x[i]) * s, 0.0f) & 0xff);
}

// q (cols, rows) = saturate(x (rows, cols) · s)ᵀ; grid (cols/64, rows/64) tiles of 64 x 64, 256
// threads. Each thread writes 16 consecutive bytes of one output row (one 16-byte store where
// the row is aligned and whole).
template <Fp8Format F>
static __global__ void quantize_t_kernel(uint8_t* q, float* scale_inv, const bf16* x,
                                         const float* amax, int rows, int cols) {
    __shared__ float tile[64][65];
    const float s = fp8_scale<F>(*amax);
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale_inv = 1.0f / s;
    const int r0 = blockIdx.y * 64, c0 = blockIdx.x * 64;
    for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {
        const int r = i / 64, c = i % 64;
        tile[r][c] = r0 + r < rows && c0 + c < cols
                         ? __bfloat162float(x[(long)(r0 + r) * cols + c0 + c]) * s
                         : 0.0f;
    }
    __syncthreads();
    const int c = threadIdx.x / 4,
              rr = (threadIdx.x % 4) * 16;  // output row c0 + c, columns r0 + rr ..
    if (c0 + c >= cols) return;
    uint8_t* dst = q + (long)(c0 + c) * rows + r0 + rr;
    if (r0 + rr + 16 <= rows && ((uintptr_t)dst % 16) == 0) {
        uint32_t w[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
            w[k] = to_fp8x2<F>(tile[rr + 4 * k][c], tile[rr + 4 * k + 1][c]) |
                   ((uint32_t)to_fp8x2<F>(tile[rr + 4 * k + 2][c], tile[rr + 4 * k + 3][c]) << 16);
        *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
        for (int k = 0; k < 16 && r0 + rr + k < rows; ++k)
            dst[k] = (uint8_t)(to_fp8x2<F>(tile[rr + k][c], 0.0f) & 0xff);
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

void fp8_amax(float* amax, const bf16* x, long n, cudaStream_t s) {
    TS_CUDA_REQUIRE(amax && x && n >= 0, "fp8_amax: null pointer or negative size");
    if (n == 0) return;
    const bool vec = aligned16(x);
    amax_kernel<<<std::min(grid_for(vec ? n / 8 + 1 : n, 256), 132 * 8), 256, 0, s>>>(amax, x, n,
                                                                                      vec);
    CUDA_CHECK_LAUNCH("amax_kernel");
}

void fp8_quantize(uint8_t* q, float* scale_inv, const bf16* x, const float* amax, int rows,
                  int cols, Fp8Format format, bool transpose, cudaStream_t s) {
    TS_CUDA_REQUIRE(q && scale_inv && x && amax && rows >= 0 && cols >= 0,
                    "fp8_quantize: null pointer or negative shape");
    const long n = (long)rows * cols;
    if (n == 0) return;
    if (transpose) {
        const dim3 grid(ceil_div(cols, 64), ceil_div(rows, 64));
        if (format == Fp8Format::e4m3)
            quantize_t_kernel<Fp8Format::e4m3>
                <<<grid, 256, 0, s>>>(q, scale_inv, x, amax, rows, cols);
        else
            quantize_t_kernel<Fp8Format::e5m2>
                <<<grid, 256, 0, s>>>(q, scale_inv, x, amax, rows, cols);
        CUDA_CHECK_LAUNCH("quantize_t_kernel");
        return;
    }
    const bool vec = aligned16(x) && ((uintptr_t)q % 8) == 0;
    const int grid = grid_for(vec ? n / 8 + 1 : n, 256);
    if (format == Fp8Format::e4m3)
        quantize_kernel<Fp8Format::e4m3><<<grid, 256, 0, s>>>(q, scale_inv, x, amax, n, vec);
    else
        quantize_kernel<Fp8Format::e5m2><<<grid, 256, 0, s>>>(q, scale_inv, x, amax, n, vec);
    CUDA_CHECK_LAUNCH("quantize_kernel");
}

}  // namespace tessera
