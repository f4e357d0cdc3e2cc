// Elementwise kernels (grid-stride loops, 16-byte accesses where aligned) and the two-pass
// deterministic sum of squares.
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"
#include "engine/kernels/cuda/elementwise.cuh"

namespace tessera {

static constexpr int kEwBlock = 256;
static constexpr int kSsqBlocks = 1024;      // partial sums of sum_squares (fixed: deterministic)
static constexpr int kSsqMaxSegments = 128;  // ranges per sum_squares_multi_cuda launch

#define TS_GRID_STRIDE(i, n)                                            \
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < (n); \
         i += (long)gridDim.x * blockDim.x)

// ---------------------------------------------------------------------------------------------
// kernels

// dst, src are (n); VEC elements per access (VEC > 1: both 16-byte aligned), then the tail.
template <int VEC>
static __global__ void accumulate_kernel(float* dst, const float* src, long n) {
    const long nv = n / VEC;
    TS_GRID_STRIDE(j, nv) {
        Vec<float, VEC> a = load_vec<VEC>(dst + j * VEC), b = load_vec<VEC>(src + j * VEC);
#pragma unroll
        for (int k = 0; k < VEC; ++k) a.v[k] += b.v[k];
        store_vec<VEC>(dst + j * VEC, a);
    }
    for (long i = nv * VEC + blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

// x is (n).
static __global__ void scale_kernel(float* x, float factor, long n) {
    TS_GRID_STRIDE(i, n) x[i] *= factor;
}

// x is (n).
static __global__ void fill_kernel(float* x, float value, long n) {
    TS_GRID_STRIDE(i, n) x[i] = value;
}

// dst, src are (n); VEC elements per access (VEC > 1: both aligned to VEC elements), then the tail.
template <typename TO, typename TI, int VEC>
static __global__ void cast_kernel(TO* dst, const TI* src, long n) {
    const long nv = n / VEC;
    TS_GRID_STRIDE(j, nv) {
        Vec<TI, VEC> a = load_vec<VEC>(src + j * VEC);
        Vec<TO, VEC> b;
#pragma unroll
        for (int k = 0; k < VEC; ++k) b.v[k] = from_float<TO>(to_float(a.v[k]));
        store_vec<VEC>(dst + j * VEC, b);
    }
    for (long i = nv * VEC + blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x)
        dst[i] = from_float<TO>(to_float(src[i]));
}

// y, res are (N, C) (res may be null); bias is (C) or null. VEC elements per access (VEC > 1:
// C % VEC == 0 and every pointer 16-byte aligned).
template <typename T, int VEC>
static __global__ void add_bias_residual_kernel(T* y, const T* bias, const T* res, long N, int C) {
    TS_GRID_STRIDE(j, N * C / VEC) {
        const long i = j * VEC;
        Vec<T, VEC> a = load_vec<VEC>(y + i), b, r;
        if (bias) b = load_vec<VEC>(bias + i % C);
        if (res) r = load_vec<VEC>(res + i);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            float x = to_float(a.v[k]);
            if (bias) x = to_float(b.v[k]) + x;
            if (res) x = x + to_float(r.v[k]);
            a.v[k] = from_float<T>(x);
        }
        store_vec<VEC>(y + i, a);
    }
}

// The sum of every thread's `acc` over a block of kEwBlock threads, in a fixed order: its warps'
// sums, then thread 0 adds them up; thread 0 then stores it to *out (adds it with `add`).
static __device__ void block_sum_double(double acc, double* out, bool add) {
    __shared__ double sh[kEwBlock / 32];
    acc = warp_sum_double(acc);
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x != 0) return;
    double s = 0.0;
    for (int w = 0; w < kEwBlock / 32; ++w) s += sh[w];
    *out = add ? *out + s : s;
}

// partial (gridDim.x) = per-block sums of x^2 (or of x when !square) in double; x is (n).
// Block of kEwBlock threads.
static __global__ void sum_squares_partial_kernel(double* partial, const float* x, long n,
                                                  bool square = true) {
    double acc = 0.0;
    TS_GRID_STRIDE(i, n) acc += square ? (double)x[i] * x[i] : (double)x[i];
    block_sum_double(acc, partial + blockIdx.x, false);
}

// Up to kSsqMaxSegments ranges passed by value (about 2 KB of kernel parameters), read as one
// concatenation: prefix[j] is range j's first index in it, prefix[count] its length.
struct SsqSegments {
    const float* x[kSsqMaxSegments];
    long prefix[kSsqMaxSegments + 1];
    int count;
};

// Block b of the grid sums the squares of the concatenation's elements [L·b/G, L·(b+1)/G), its
// thread t those at offsets t, t + kEwBlock, ... from the block's start, in order, across range
// boundaries: the partials depend on the values and the concatenation's length only, not on
// where the ranges split it.
static __global__ void sum_squares_segments_kernel(double* partial, SsqSegments a) {
    const long L = a.prefix[a.count];
    const long b0 = L * blockIdx.x / gridDim.x, b1 = L * (blockIdx.x + 1) / gridDim.x;
    int s = 0, hi_s = a.count - 1;  // the range holding b0: the last with prefix <= b0
    while (s < hi_s) {
        const int mid = (s + hi_s + 1) / 2;
        if (a.prefix[mid] <= b0)
            s = mid;
        else
            hi_s = mid - 1;
    }
    double acc = 0.0;
    for (; s < a.count && a.prefix[s] < b1; ++s) {
        const long lo = max(b0, a.prefix[s]), hi = min(b1, a.prefix[s + 1]);
        // this thread's first element at or after lo: b0 + t + k·kEwBlock
        const long first = lo + ((long)threadIdx.x - (lo - b0) % kEwBlock + kEwBlock) % kEwBlock;
        const float* x = a.x[s];
        for (long i = first; i < hi; i += kEwBlock) {
            const float v = x[i - a.prefix[s]];
            acc += (double)v * v;
        }
    }
    block_sum_double(acc, partial + blockIdx.x, false);
}

// *out += sum of partial (count); one block of kEwBlock threads, a fixed order (deterministic).
static __global__ void sum_squares_final_kernel(double* out, const double* partial, int count) {
    double s = 0.0;
    for (int b = threadIdx.x; b < count; b += blockDim.x) s += partial[b];
    block_sum_double(s, out, true);
}

// ---------------------------------------------------------------------------------------------
// launchers

#define TS_EW_REQUIRE(name, n, ...)                       \
    TS_CUDA_REQUIRE((n) >= 0, name ": negative n=", (n)); \
    if ((n) == 0) return;                                 \
    TS_CUDA_REQUIRE(__VA_ARGS__, name ": null pointer argument")

void accumulate_cuda(float* dst, const float* src, long n, cudaStream_t s) {
    TS_EW_REQUIRE("accumulate_cuda", n, dst && src);
    if (aligned16(dst) && aligned16(src))
        accumulate_kernel<4><<<grid_for(n / 4 + 1, kEwBlock), kEwBlock, 0, s>>>(dst, src, n);
    else
        accumulate_kernel<1><<<grid_for(n, kEwBlock), kEwBlock, 0, s>>>(dst, src, n);
    CUDA_CHECK_LAUNCH("accumulate_kernel");
}

void scale_cuda(float* x, float factor, long n, cudaStream_t s) {
    TS_EW_REQUIRE("scale_cuda", n, x);
    scale_kernel<<<grid_for(n, kEwBlock), kEwBlock, 0, s>>>(x, factor, n);
    CUDA_CHECK_LAUNCH("scale_kernel");
}

void fill_cuda(float* x, float value, long n, cudaStream_t s) {
    TS_EW_REQUIRE("fill_cuda", n, x);
    fill_kernel<<<grid_for(n, kEwBlock), kEwBlock, 0, s>>>(x, value, n);
    CUDA_CHECK_LAUNCH("fill_kernel");
}

void cast_f32_to_bf16_cuda(bf16* dst, const float* src, long n, cudaStream_t s) {
    TS_EW_REQUIRE("cast_f32_to_bf16_cuda", n, dst && src);
    if (aligned16(src) && ((uintptr_t)dst % 8) == 0)  // 4 floats in, 4 bf16 (8 bytes) out
        cast_kernel<bf16, float, 4><<<grid_for(n / 4 + 1, kEwBlock), kEwBlock, 0, s>>>(dst, src, n);
    else
        cast_kernel<bf16, float, 1><<<grid_for(n, kEwBlock), kEwBlock, 0, s>>>(dst, src, n);
    CUDA_CHECK_LAUNCH("cast_kernel (fp32 to bf16)");
}

template <typename T>
void cast_to_f32_cuda(float* dst, const T* src, long n, cudaStream_t s) {
    TS_EW_REQUIRE("cast_to_f32_cuda", n, dst && src);
    cast_kernel<float, T, 1><<<grid_for(n, kEwBlock), kEwBlock, 0, s>>>(dst, src, n);
    CUDA_CHECK_LAUNCH("cast_kernel (to fp32)");
}

template <typename T>
void add_bias_residual_cuda(T* y, const T* bias, const T* res, int N, int C, cudaStream_t s) {
    TS_CUDA_REQUIRE(N >= 0 && C > 0, "add_bias_residual_cuda: bad shape N=", N, " C=", C);
    if (N == 0) return;
    TS_CUDA_REQUIRE(y, "add_bias_residual_cuda: null y");
    constexpr int V = vec16<T>();
    if (C % V == 0 && aligned16(y) && aligned16(bias) && aligned16(res))
        add_bias_residual_kernel<T, V>
            <<<grid_for((long)N * C / V, kEwBlock), kEwBlock, 0, s>>>(y, bias, res, N, C);
    else
        add_bias_residual_kernel<T, 1>
            <<<grid_for((long)N * C, kEwBlock), kEwBlock, 0, s>>>(y, bias, res, N, C);
    CUDA_CHECK_LAUNCH("add_bias_residual_kernel");
}

// *out += sum of x^2 (square) or of x: per-block partials into the scratch slot, then one block.
static void reduce_into(double* out, const float* x, long n, bool square, cudaStream_t s) {
    const int blocks = std::min(kSsqBlocks, grid_for(n, kEwBlock));
    double* partial =
        static_cast<double*>(cuda_scratch(ScratchSlot::sum_squares, sizeof(double) * kSsqBlocks));
    sum_squares_partial_kernel<<<blocks, kEwBlock, 0, s>>>(partial, x, n, square);
    CUDA_CHECK_LAUNCH("sum_squares_partial_kernel");
    sum_squares_final_kernel<<<1, kEwBlock, 0, s>>>(out, partial, blocks);
    CUDA_CHECK_LAUNCH("sum_squares_final_kernel");
}

void sum_squares_cuda(double* out, const float* x, long n, cudaStream_t s) {
    TS_EW_REQUIRE("sum_squares_cuda", n, out && x);
    reduce_into(out, x, n, true, s);
}

void sum_squares_multi_cuda(double* out, const float* const* x, const long* n, int count,
                            cudaStream_t s) {
    TS_CUDA_REQUIRE(count >= 0 && out, "sum_squares_multi_cuda: bad count=", count, " or null out");
    double* partial =
        static_cast<double*>(cuda_scratch(ScratchSlot::sum_squares, sizeof(double) * kSsqBlocks));
    int k = 0;
    while (k < count) {
        SsqSegments a{};
        a.prefix[0] = 0;
        for (; k < count && a.count < kSsqMaxSegments; ++k) {
            TS_CUDA_REQUIRE(n[k] >= 0, "sum_squares_multi_cuda: range ", k, " has n=", n[k]);
            if (n[k] == 0) continue;
            TS_CUDA_REQUIRE(x[k], "sum_squares_multi_cuda: range ", k, " has a null pointer");
            a.x[a.count] = x[k];
            a.prefix[a.count + 1] = a.prefix[a.count] + n[k];
            ++a.count;
        }
        if (a.count == 0) continue;
        const long L = a.prefix[a.count];
        const int blocks = (int)std::min<long>(kSsqBlocks, (L + kEwBlock - 1) / kEwBlock);
        sum_squares_segments_kernel<<<blocks, kEwBlock, 0, s>>>(partial, a);
        CUDA_CHECK_LAUNCH("sum_squares_segments_kernel");
        sum_squares_final_kernel<<<1, kEwBlock, 0, s>>>(out, partial, blocks);
        CUDA_CHECK_LAUNCH("sum_squares_final_kernel");
    }
}

void sum_cuda(double* out, const float* x, long n, cudaStream_t s) {
    TS_EW_REQUIRE("sum_cuda", n, out && x);
    reduce_into(out, x, n, false, s);
}

static __global__ void pack_step_scalars_kernel(float* out, const double* sum_squares,
                                                const double* sum, float stop) {
    out[0] = (float)*sum_squares;
    out[1] = (float)*sum;
    out[2] = stop;
}

void pack_step_scalars_cuda(float* out, const double* sum_squares, const double* sum, float stop,
                            cudaStream_t s) {
    TS_CUDA_REQUIRE(out && sum_squares && sum, "pack_step_scalars_cuda: null pointer");
    pack_step_scalars_kernel<<<1, 1, 0, s>>>(out, sum_squares, sum, stop);
    CUDA_CHECK_LAUNCH("pack_step_scalars_kernel");
}

template void cast_to_f32_cuda<float>(float*, const float*, long, cudaStream_t);
template void cast_to_f32_cuda<bf16>(float*, const bf16*, long, cudaStream_t);
template void add_bias_residual_cuda<float>(float*, const float*, const float*, int, int,
                                            cudaStream_t);
template void add_bias_residual_cuda<bf16>(bf16*, const bf16*, const bf16*, int, int, cudaStream_t);

}  // namespace tessera
