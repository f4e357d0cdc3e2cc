// GELU (tanh approximation) forward and backward: grid-stride elementwise kernels.
#include "engine/kernels/cuda/gelu.cuh"

#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"

namespace tessera {

// out, inp are (n).
template <typename T>
static __global__ void gelu_forward_kernel(T* out, const T* inp, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x)
        out[i] = from_float<T>(gelu_tanh(to_float(inp[i])));
}

// dinp, inp, dout are (n); dinp = gelu'(inp) * dout.
template <typename T>
static __global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x)
        dinp[i] = from_float<T>(gelu_tanh_grad(to_float(inp[i])) * to_float(dout[i]));
}

template <typename T>
void gelu_forward_cuda(T* out, const T* inp, long n, cudaStream_t s) {
    TS_CUDA_REQUIRE(n >= 0, "gelu_forward_cuda: negative n=", n);
    if (n == 0) return;
    TS_CUDA_REQUIRE(out && inp, "gelu_forward_cuda: null out/inp");
    gelu_forward_kernel<T><<<grid_for(n, 256), 256, 0, s>>>(out, inp, n);
    CUDA_CHECK_LAUNCH("gelu_forward_kernel");
}

template <typename T>
void gelu_backward_cuda(T* dinp, const T* inp, const T* dout, long n, cudaStream_t s) {
    TS_CUDA_REQUIRE(n >= 0, "gelu_backward_cuda: negative n=", n);
    if (n == 0) return;
    TS_CUDA_REQUIRE(dinp && inp && dout, "gelu_backward_cuda: null dinp/inp/dout");
    gelu_backward_kernel<T><<<grid_for(n, 256), 256, 0, s>>>(dinp, inp, dout, n);
    CUDA_CHECK_LAUNCH("gelu_backward_kernel");
}

template void gelu_forward_cuda<float>(float*, const float*, long, cudaStream_t);
template void gelu_forward_cuda<bf16>(bf16*, const bf16*, long, cudaStream_t);
template void gelu_backward_cuda<float>(float*, const float*, const float*, long, cudaStream_t);
template void gelu_backward_cuda<bf16>(bf16*, const bf16*, const bf16*, long, cudaStream_t);

}  // namespace tessera
