// Vocab-parallel fused softmax cross-entropy: block-per-row reductions over the shard, then one
// pass that writes the loss and overwrites the logits with their gradient.
#include "engine/kernels/cuda/cross_entropy.cuh"

#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"

namespace tessera {

static constexpr int kCeBlock = 512;

// ---------------------------------------------------------------------------------------------
// kernels

// rowmax (N); logits (N, V). Block per row.
template <typename T>
static __global__ void ce_row_max_kernel(float* rowmax, const T* logits, int V, int ld) {
    const T* x = logits + (long)blockIdx.x * ld;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, to_float(x[i]));
    m = block_max(m);
    if (threadIdx.x == 0) rowmax[blockIdx.x] = m;
}

// sumexp, target_term, rowmax, targets (N); logits (N, V), columns [v0, v0 + V). Block per row.
template <typename T>
static __global__ void ce_row_sumexp_kernel(float* sumexp, float* target_term, const T* logits,
                                            const float* rowmax, const int* targets, long v0,
                                            int V, int ld) {
    const int n = blockIdx.x;
    const T* x = logits + (long)n * ld;
    const float m = rowmax[n];
    float sum = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) sum += expf(to_float(x[i]) - m);
    sum = block_sum(sum);
    if (threadIdx.x == 0) {
        sumexp[n] = sum;
        const long t = targets[n];
        target_term[n] = (t >= v0 && t < v0 + V) ? expf(to_float(x[t - v0]) - m) : 0.0f;
    }
}

// losses (N) or null; logits (N, V) -> dlogits in place; rowmax, sumexp, target_term, targets (N).
// Block per row. Written as the CPU kernel: p = e * (1 / sum); d = p * dloss, minus dloss at t.
template <typename T>
static __global__ void ce_loss_and_grad_kernel(float* losses, T* logits, const float* rowmax,
                                               const float* sumexp, const float* target_term,
                                               const int* targets, long v0, float dloss, int V,
                                               int ld) {
    const int n = blockIdx.x;
    T* x = logits + (long)n * ld;
    for (int i = V + threadIdx.x; i < ld; i += blockDim.x) x[i] = from_float<T>(0.0f);  // padding
    const long t = targets[n];
    const float m = rowmax[n];
    const float inv = 1.0f / sumexp[n];
    if (threadIdx.x == 0 && losses) losses[n] = t >= 0 ? -logf(target_term[n] * inv) : 0.0f;
    if (t < 0) {
        for (int i = threadIdx.x; i < V; i += blockDim.x) x[i] = from_float<T>(0.0f);
        return;
    }
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float d = expf(to_float(x[i]) - m) * inv * dloss;
        if (v0 + i == t) d -= dloss;
        x[i] = from_float<T>(d);
    }
}

// losses, sumexp, target_term, targets (N). Thread per row.
static __global__ void ce_loss_only_kernel(float* losses, const float* sumexp,
                                           const float* target_term, const int* targets, int N) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    losses[n] = targets[n] >= 0 ? -logf(target_term[n] * (1.0f / sumexp[n])) : 0.0f;
}

// ---------------------------------------------------------------------------------------------
// launchers

static int ce_block(int V) { return V >= kCeBlock ? kCeBlock : ((V + 31) / 32) * 32; }

template <typename T>
void ce_row_max_cuda(float* rowmax, const T* logits, int N, int V, cudaStream_t s, int ld) {
    if (ld == 0) ld = V;
    TS_CUDA_REQUIRE(N >= 0 && V > 0, "ce_row_max_cuda: bad shape N=", N, " V=", V);
    if (N == 0) return;
    TS_CUDA_REQUIRE(rowmax && logits, "ce_row_max_cuda: null rowmax/logits");
    ce_row_max_kernel<T><<<N, ce_block(V), 0, s>>>(rowmax, logits, V, ld);
    CUDA_CHECK_LAUNCH("ce_row_max_kernel");
}

template <typename T>
void ce_row_sumexp_cuda(float* sumexp, float* target_term, const T* logits, const float* rowmax,
                        const int* targets, long v0, int N, int V, cudaStream_t s, int ld) {
    if (ld == 0) ld = V;
    TS_CUDA_REQUIRE(N >= 0 && V > 0 && v0 >= 0, "ce_row_sumexp_cuda: bad shape N=", N, " V=", V,
                    " v0=", v0);
    if (N == 0) return;
    TS_CUDA_REQUIRE(sumexp && target_term && logits && rowmax && targets,
                    "ce_row_sumexp_cuda: null argument");
    ce_row_sumexp_kernel<T><<<N, ce_block(V), 0, s>>>(sumexp, target_term, logits, rowmax, targets,
                                                      v0, V, ld);
    CUDA_CHECK_LAUNCH("ce_row_sumexp_kernel");
}

template <typename T>
void ce_loss_and_grad_cuda(float* losses, T* logits, const float* rowmax, const float* sumexp,
                           const float* target_term, const int* targets, long v0, float dloss,
                           int N, int V, cudaStream_t s, int ld) {
    if (ld == 0) ld = V;
    TS_CUDA_REQUIRE(N >= 0 && V > 0 && v0 >= 0, "ce_loss_and_grad_cuda: bad shape N=", N, " V=", V,
                    " v0=", v0);
    if (N == 0) return;
    TS_CUDA_REQUIRE(logits && rowmax && sumexp && target_term && targets,
                    "ce_loss_and_grad_cuda: null argument");
    ce_loss_and_grad_kernel<T><<<N, ce_block(V), 0, s>>>(losses, logits, rowmax, sumexp,
                                                         target_term, targets, v0, dloss, V, ld);
    CUDA_CHECK_LAUNCH("ce_loss_and_grad_kernel");
}

void ce_loss_only_cuda(float* losses, const float* sumexp, const float* target_term,
                       const int* targets, int N, cudaStream_t s) {
    TS_CUDA_REQUIRE(N >= 0, "ce_loss_only_cuda: bad N=", N);
    if (N == 0) return;
    TS_CUDA_REQUIRE(losses && sumexp && target_term && targets, "ce_loss_only_cuda: null argument");
    ce_loss_only_kernel<<<ceil_div(N, 256), 256, 0, s>>>(losses, sumexp, target_term, targets, N);
    CUDA_CHECK_LAUNCH("ce_loss_only_kernel");
}

#define TS_INSTANTIATE_CE(T)                                                                     \
    template void ce_row_max_cuda<T>(float*, const T*, int, int, cudaStream_t, int);                   \
    template void ce_row_sumexp_cuda<T>(float*, float*, const T*, const float*, const int*, long,  \
                                        int, int, cudaStream_t, int);                             \
    template void ce_loss_and_grad_cuda<T>(float*, T*, const float*, const float*, const float*,   \
                                           const int*, long, float, int, int, cudaStream_t, int);
TS_INSTANTIATE_CE(float)
TS_INSTANTIATE_CE(bf16)

}  // namespace tessera
