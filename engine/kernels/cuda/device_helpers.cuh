// Device-side helpers shared by the CUDA ops (include from .cu files only: device code):
// warp/block reductions, 16-byte vector loads/stores, asynchronous copies to shared memory, the
// column reductions' second pass, grid sizing for grid-stride loops, and per-thread scratch
// buffers for the deterministic two-pass reductions.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tessera {

// ---------------------------------------------------------------------------------------------
// reductions

__device__ inline float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ inline float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ inline double warp_sum_double(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block-wide sum/max over a 1-D block (blockDim.x a multiple of 32, at most 1024); every thread
// gets the result. Safe to call several times in a row (the leading barrier guards the buffer).
__device__ inline float block_sum(float v) {
    __shared__ float sh[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    return warp_sum(lane < nwarps ? sh[lane] : 0.0f);
}

__device__ inline float block_max(float v) {
    __shared__ float sh[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    return warp_max(lane < nwarps ? sh[lane] : -INFINITY);
}

// ---------------------------------------------------------------------------------------------
// vector loads: VEC elements of T in one access (VEC * sizeof(T) is 16 bytes, or VEC = 1)

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
    T v[VEC];
};

template <int VEC, typename T>
__device__ inline Vec<T, VEC> load_vec(const T* p) {
    return *reinterpret_cast<const Vec<T, VEC>*>(p);
}

template <int VEC, typename T>
__device__ inline void store_vec(T* p, const Vec<T, VEC>& x) {
    *reinterpret_cast<Vec<T, VEC>*>(p) = x;
}

// Elements of T per 16-byte access.
template <typename T>
constexpr int vec16() {
    return (int)(16 / sizeof(T));
}

inline bool aligned16(const void* p) {
    return p == nullptr || ((uintptr_t)p % 16) == 0;
}

// ---------------------------------------------------------------------------------------------
// asynchronous copies global -> shared (cp.async, sm_80 on)

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

// 16 bytes global -> shared, asynchronously; zero-fills the destination when !valid (src must
// still be a mapped address).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
// Waits until at most N of this thread's committed groups are in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ---------------------------------------------------------------------------------------------
// GELU, tanh approximation (GPT-2), written exactly as the CPU kernel (engine/kernels/cpu/gelu.cpp)

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

__device__ inline float gelu_tanh(float x) {
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(kGeluScale * (x + cube)));
}

// d gelu(x) / dx, with sech^2 = 1 - tanh^2 as PyTorch computes it.
__device__ inline float gelu_tanh_grad(float x) {
    float cube = 0.044715f * x * x * x;
    float tanh_out = tanhf(kGeluScale * (x + cube));
    float sech2 = 1.0f - tanh_out * tanh_out;
    return 0.5f * (1.0f + tanh_out) +
           x * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
}

// ---------------------------------------------------------------------------------------------
// the second pass of the deterministic column reductions (bias and LayerNorm parameter gradients)

// out (C) += sum over chunks c of partial[c * stride + i], in a fixed order; blockIdx.y picks the
// output: y = 0 writes out0 from partial, y = 1 out1 from partial + C (a null output is
// skipped). Block of 8 warps over 32 columns: warp w sums chunks w, w + 8, ...; then the warps'
// sums in warp order.
static __global__ void chunk_column_sum_kernel(float* out0, float* out1, const float* partial,
                                               int chunks, int C, long stride) {
    float* out = blockIdx.y == 0 ? out0 : out1;
    if (!out) return;
    partial += blockIdx.y * (long)C;
    __shared__ float sh[8][33];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int i = blockIdx.x * 32 + lane;
    float s = 0.0f;
    if (i < C)
        for (int c = warp; c < chunks; c += 8) s += partial[c * stride + i];
    sh[warp][lane] = s;
    __syncthreads();
    if (warp != 0 || i >= C) return;
    s = 0.0f;
    for (int w = 0; w < 8; ++w) s += sh[w][lane];
    out[i] += s;
}

// Launches it for out0 and, unless null, out1 (read at partial + C); out0 may be null too.
inline void chunk_column_sum(float* out0, float* out1, const float* partial, int chunks, int C,
                             long stride, cudaStream_t s) {
    const dim3 grid((C + 31) / 32, out1 ? 2 : 1);
    chunk_column_sum_kernel<<<grid, 256, 0, s>>>(out0, out1, partial, chunks, C, stride);
}

// ---------------------------------------------------------------------------------------------
// launch sizing

// Blocks for a grid-stride loop over n elements (capped; the loop covers the rest).
inline int grid_for(long n, int block) {
    long g = (n + block - 1) / block;
    return (int)std::max(1L, std::min(g, 65536L * 4));
}

// ---------------------------------------------------------------------------------------------
// scratch: one growable device buffer per (thread, device, slot). Launchers from one host thread
// are stream-ordered on that thread's stream; two streams of one thread must not run the same
// op concurrently (they would share the slot).

enum class ScratchSlot {
    matmul_dbias,
    matmul_dbias_done,
    layernorm_dparams,
    sum_squares,
    embedding_sort,
    count
};
void* cuda_scratch(ScratchSlot slot, size_t bytes);
// The same, zeroed whenever it is (re)allocated: counters that the kernels using them set back to
// zero when they are done with them.
void* cuda_scratch_zeroed(ScratchSlot slot, size_t bytes, cudaStream_t s);

}  // namespace tessera
