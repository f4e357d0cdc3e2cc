// Rotary embeddings: one thread per (row, frequency j) computes the angle's sine and cosine once
// and rotates the pair (j, j + hd/2) of every head of the row; a warp's threads hold consecutive
// j, so each head's two halves are read and written contiguously.
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"
#include "engine/kernels/cuda/rope.cuh"

namespace tessera {

template <typename T>
static __global__ void rope_kernel(T* x, long rows, int T_, int heads, int half, long stride,
                                   const float* inv_freq, float sign, int pos0) {
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * half) return;
    const long row = i / half;
    const int j = (int)(i % half);
    float sn, cs;
    sincosf((float)(pos0 + row % T_) * inv_freq[j], &sn, &cs);
    sn *= sign;
    T* p = x + row * stride + j;
    for (int h = 0; h < heads; ++h, p += 2 * half) {
        const float a = to_float(p[0]), b = to_float(p[half]);
        p[0] = from_float<T>(a * cs - b * sn);
        p[half] = from_float<T>(b * cs + a * sn);
    }
}

template <typename T>
void rope_cuda(T* x, int B, int T_, int heads, int hd, long stride, const float* inv_freq,
               bool inverse, cudaStream_t s, int pos0) {
    TS_CUDA_REQUIRE(
        B >= 0 && T_ > 0 && heads >= 0 && hd > 0 && hd % 2 == 0 && stride >= (long)heads * hd,
        "rope_cuda: bad shape B=", B, " T=", T_, " heads=", heads, " hd=", hd, " stride=", stride);
    const long rows = (long)B * T_, n = rows * (hd / 2);
    if (n == 0 || heads == 0) return;
    TS_CUDA_REQUIRE(x && inv_freq, "rope_cuda: null x/inv_freq");
    rope_kernel<T><<<ceil_div(n, 256), 256, 0, s>>>(x, rows, T_, heads, hd / 2, stride, inv_freq,
                                                    inverse ? -1.0f : 1.0f, pos0);
    CUDA_CHECK_LAUNCH("rope_kernel");
}

template void rope_cuda<float>(float*, int, int, int, int, long, const float*, bool, cudaStream_t,
                               int);
template void rope_cuda<bf16>(bf16*, int, int, int, int, long, const float*, bool, cudaStream_t,
                              int);

}  // namespace tessera
