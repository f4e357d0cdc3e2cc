// GELU (tanh approximation) and ReLU, forward and backward: grid-stride elementwise kernels with
// 16-byte accesses when every pointer is aligned (a scalar loop finishes the tail).
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"
#include "engine/kernels/cuda/gelu.cuh"

namespace tessera {

// out, inp are (n).
template <typename T, int VEC>
static __global__ void gelu_forward_kernel(T* out, const T* inp, long n) {
    const long nv = n / VEC;
    for (long j = blockIdx.x * (long)blockDim.x + threadIdx.x; j < nv;
         j += (long)gridDim.x * blockDim.x) {
        Vec<T, VEC> x = load_vec<VEC>(inp + j * VEC);
#pragma unroll
        for (int k = 0; k < VEC; ++k) x.v[k] = from_float<T>(gelu_tanh(to_float(x.v[k])));
        store_vec<VEC>(out + j * VEC, x);
    }
    for (long i = nv * VEC + blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x)
        out[i] = from_float<T>(gelu_tanh(to_float(inp[i])));
}

// dinp, inp, dout are (n); dinp = gelu'(inp) * dout (dinp may be dout).
template <typename T, int VEC>
static __global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, long n) {
    const long nv = n / VEC;
    for (long j = blockIdx.x * (long)blockDim.x + threadIdx.x; j < nv;
         j += (long)gridDim.x * blockDim.x) {
        Vec<T, VEC> x = load_vec<VEC>(inp + j * VEC), d = load_vec<VEC>(dout + j * VEC);
#pragma unroll
        for (int k = 0; k < VEC; ++k)
            d.v[k] = from_float<T>(gelu_tanh_grad(to_float(x.v[k])) * to_float(d.v[k]));
        store_vec<VEC>(dinp + j * VEC, d);
    }
    for (long i = nv * VEC + blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x)
        dinp[i] = from_float<T>(gelu_tanh_grad(to_float(inp[i])) * to_float(dout[i]));
}

template <typename T>
void gelu_forward_cuda(T* out, const T* inp, long n, cudaStream_t s) {
    TS_CUDA_REQUIRE(n >= 0, "gelu_forward_cuda: negative n=", n);
    if (n == 0) return;
    TS_CUDA_REQUIRE(out && inp, "gelu_forward_cuda: null out/inp");
    constexpr int V = vec16<T>();
    if (aligned16(out) && aligned16(inp))
        gelu_forward_kernel<T, V><<<grid_for(n / V + 1, 256), 256, 0, s>>>(out, inp, n);
    else
        gelu_forward_kernel<T, 1><<<grid_for(n, 256), 256, 0, s>>>(out, inp, n);
    CUDA_CHECK_LAUNCH("gelu_forward_kernel");
}

template <typename T>
void gelu_backward_cuda(T* dinp, const T* inp, const T* dout, long n, cudaStream_t s) {
    TS_CUDA_REQUIRE(n >= 0, "gelu_backward_cuda: negative n=", n);
    if (n == 0) return;
    TS_CUDA_REQUIRE(dinp && inp && dout, "gelu_backward_cuda: null dinp/inp/dout");
    constexpr int V = vec16<T>();
    if (aligned16(dinp) && aligned16(inp) && aligned16(dout))
        gelu_backward_kernel<T, V><<<grid_for(n / V + 1, 256), 256, 0, s>>>(dinp, inp, dout, n);
    else
        gelu_backward_kernel<T, 1><<<grid_for(n, 256), 256, 0, s>>>(dinp, inp, dout, n);
    CUDA_CHECK_LAUNCH("gelu_backward_kernel");
}

template void gelu_forward_cuda<float>(float*, const float*, long, cudaStream_t);
template void gelu_forward_cuda<bf16>(bf16*, const bf16*, long, cudaStream_t);
template void gelu_backward_cuda<float>(float*, const float*, const float*, long, cudaStream_t);
template void gelu_backward_cuda<bf16>(bf16*, const bf16*, const bf16*, long, cudaStream_t);

// out = max(inp, 0); with `dout`: out = (inp > 0) · dout (the backward).
template <typename T>
static __global__ void relu_kernel(T* out, const T* inp, const T* dout, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x) {
        const bool on = to_float(inp[i]) > 0.0f;
        out[i] = dout ? (on ? dout[i] : from_float<T>(0.0f)) : (on ? inp[i] : from_float<T>(0.0f));
    }
}

template <typename T>
void relu_forward_cuda(T* out, const T* inp, long n, cudaStream_t s) {
    TS_CUDA_REQUIRE(n >= 0 && (n == 0 || (out && inp)), "relu_forward_cuda: bad arguments, n=", n);
    if (n == 0) return;
    relu_kernel<T><<<grid_for(n, 256), 256, 0, s>>>(out, inp, nullptr, n);
    CUDA_CHECK_LAUNCH("relu_kernel (forward)");
}

template <typename T>
void relu_backward_cuda(T* dinp, const T* inp, const T* dout, long n, cudaStream_t s) {
    TS_CUDA_REQUIRE(n >= 0 && (n == 0 || (dinp && inp && dout)),
                    "relu_backward_cuda: bad arguments, n=", n);
    if (n == 0) return;
    relu_kernel<T><<<grid_for(n, 256), 256, 0, s>>>(dinp, inp, dout, n);
    CUDA_CHECK_LAUNCH("relu_kernel (backward)");
}

template void relu_forward_cuda<float>(float*, const float*, long, cudaStream_t);
template void relu_forward_cuda<bf16>(bf16*, const bf16*, long, cudaStream_t);
template void relu_backward_cuda<float>(float*, const float*, const float*, long, cudaStream_t);
template void relu_backward_cuda<bf16>(bf16*, const bf16*, const bf16*, long, cudaStream_t);

}  // namespace tessera
