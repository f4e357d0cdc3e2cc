// SwiGLU forward and backward: one thread per VEC adjacent columns of a row (16-byte accesses
// when F and the pointers allow it, else VEC = 1).
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"
#include "engine/kernels/cuda/swiglu.cuh"

namespace tessera {

__device__ inline float sigmoidf_(float g) {
    return 1.0f / (1.0f + expf(-g));
}

template <typename T, int VEC>
static __global__ void swiglu_forward_kernel(T* out, const T* gu, long N, long F) {
    const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * VEC;  // element of out
    if (i >= N * F) return;
    const long n = i / F, c = i % F;
    const T* g = gu + n * 2 * F + c;
    Vec<T, VEC> vg = load_vec<VEC>(g), vu = load_vec<VEC>(g + F), o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        const float x = to_float(vg.v[k]);
        o.v[k] = from_float<T>(x * sigmoidf_(x) * to_float(vu.v[k]));
    }
    store_vec<VEC>(out + i, o);
}

// d gate = dout · up · σ(g)·(1 + g·(1 − σ(g))); d up = dout · silu(g)
template <typename T, int VEC>
static __global__ void swiglu_backward_kernel(T* dgu, const T* dout, const T* gu, long N, long F) {
    const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (i >= N * F) return;
    const long n = i / F, c = i % F;
    const T* g = gu + n * 2 * F + c;
    Vec<T, VEC> vg = load_vec<VEC>(g), vu = load_vec<VEC>(g + F), vd = load_vec<VEC>(dout + i), dg,
                du;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        const float x = to_float(vg.v[k]), u = to_float(vu.v[k]), d = to_float(vd.v[k]);
        const float sg = sigmoidf_(x);
        dg.v[k] = from_float<T>(d * u * (sg * (1.0f + x * (1.0f - sg))));
        du.v[k] = from_float<T>(d * (x * sg));
    }
    T* o = dgu + n * 2 * F + c;
    store_vec<VEC>(o, dg);
    store_vec<VEC>(o + F, du);
}

template <typename T>
void swiglu_forward_cuda(T* out, const T* gu, long N, long F, cudaStream_t s) {
    TS_CUDA_REQUIRE(N >= 0 && F > 0, "swiglu_forward_cuda: bad shape N=", N, " F=", F);
    if (N == 0) return;
    TS_CUDA_REQUIRE(out && gu, "swiglu_forward_cuda: null out/gu");
    constexpr int V = vec16<T>();
    if (F % V == 0 && aligned16(out) && aligned16(gu))
        swiglu_forward_kernel<T, V><<<ceil_div(N * F / V, 256), 256, 0, s>>>(out, gu, N, F);
    else
        swiglu_forward_kernel<T, 1><<<ceil_div(N * F, 256), 256, 0, s>>>(out, gu, N, F);
    CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
}

template <typename T>
void swiglu_backward_cuda(T* dgu, const T* dout, const T* gu, long N, long F, cudaStream_t s) {
    TS_CUDA_REQUIRE(N >= 0 && F > 0, "swiglu_backward_cuda: bad shape N=", N, " F=", F);
    if (N == 0) return;
    TS_CUDA_REQUIRE(dgu && dout && gu, "swiglu_backward_cuda: null dgu/dout/gu");
    constexpr int V = vec16<T>();
    if (F % V == 0 && aligned16(dgu) && aligned16(dout) && aligned16(gu))
        swiglu_backward_kernel<T, V><<<ceil_div(N * F / V, 256), 256, 0, s>>>(dgu, dout, gu, N, F);
    else
        swiglu_backward_kernel<T, 1><<<ceil_div(N * F, 256), 256, 0, s>>>(dgu, dout, gu, N, F);
    CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
}

template void swiglu_forward_cuda<float>(float*, const float*, long, long, cudaStream_t);
template void swiglu_forward_cuda<bf16>(bf16*, const bf16*, long, long, cudaStream_t);
template void swiglu_backward_cuda<float>(float*, const float*, const float*, long, long,
                                          cudaStream_t);
template void swiglu_backward_cuda<bf16>(bf16*, const bf16*, const bf16*, long, long, cudaStream_t);

}  // namespace tessera
