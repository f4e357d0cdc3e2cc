// Vocab-parallel fused softmax cross-entropy: one online pass per row (max and sum of exponentials
// together, 16-byte loads), then one pass that writes the loss and overwrites the logits with
// their gradient. Training over a whole vocabulary takes one pass instead: a row's logits staged
// in the shared memory of a cluster of blocks, read from global memory once.
#include <cooperative_groups.h>

#include "engine/kernels/cuda/cross_entropy.cuh"
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"

namespace tessera {

static constexpr int kCeBlock = 256;

// exp for the softmax: the fast approximation in bf16 mode (its error is far below bf16's), the
// accurate one in fp32 mode (the fp32 ops are held to 1e-5 of the CPU kernels).
template <typename T>
__device__ inline float ce_exp(float x) {
    if constexpr (std::is_same_v<T, float>)
        return expf(x);
    else
        return __expf(x);
}

// (m, s) <- the online-softmax merge of (m, s) and (m2, s2): max, and both sums rescaled to it.
template <typename T>
__device__ inline void ce_merge(float& m, float& s, float m2, float s2) {
    const float mx = fmaxf(m, m2);
    if (mx == -INFINITY) return;  // both empty
    s = (m == -INFINITY ? 0.0f : s * ce_exp<T>(m - mx)) +
        (m2 == -INFINITY ? 0.0f : s2 * ce_exp<T>(m2 - mx));
    m = mx;
}

// (m, s) <- the online softmax's max and sum with a vector of VEC logits added, the first `valid`
// of them real (the others are read as -inf: no term).
template <typename T, int VEC>
__device__ inline void ce_add_vec(float& m, float& s, const Vec<T, VEC>& v, int valid) {
    float f[VEC];
    float lm = -INFINITY;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        f[k] = k < valid ? to_float(v.v[k]) : -INFINITY;
        lm = fmaxf(lm, f[k]);
    }
    if (lm > m) {
        s = m == -INFINITY ? 0.0f : s * ce_exp<T>(m - lm);
        m = lm;
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) s += ce_exp<T>(f[k] - m);
}

// The block's (m, s): each warp's by shuffles, then the warps' in warp order through shared
// memory (a fixed order: deterministic). Thread 0 gets the result; every thread calls it.
template <typename T>
__device__ inline void ce_block_merge(float& m, float& s) {
    __shared__ float shm[32], shs[32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o),
                    s2 = __shfl_xor_sync(0xffffffffu, s, o);
        ce_merge<T>(m, s, m2, s2);
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) {
        shm[warp] = m;
        shs[warp] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < (int)blockDim.x / 32; ++w) ce_merge<T>(m, s, shm[w], shs[w]);
}

// ---------------------------------------------------------------------------------------------
// kernels

// rowmax, sumexp, target_term, targets (N); logits (N, V) with row stride ld, columns
// [v0, v0 + V). Block per row; VEC elements per load (VEC > 1: ld % VEC == 0, rows aligned).
template <typename T, int VEC>
static __global__ void ce_row_stats_kernel(float* rowmax, float* sumexp, float* target_term,
                                           const T* logits, const int* targets, long v0, int V,
                                           int ld) {
    const int n = blockIdx.x;
    const T* x = logits + (long)n * ld;
    float m = -INFINITY, s = 0.0f;
    const int Vv = V / VEC * VEC;
    for (int i = threadIdx.x * VEC; i < Vv; i += blockDim.x * VEC)
        ce_add_vec<T, VEC>(m, s, load_vec<VEC>(x + i), VEC);
    for (int i = Vv + threadIdx.x; i < V; i += blockDim.x) {  // the tail (VEC > 1)
        const float f = to_float(x[i]);
        ce_merge<T>(m, s, f, 1.0f);
    }
    ce_block_merge<T>(m, s);
    if (threadIdx.x != 0) return;
    rowmax[n] = m;
    sumexp[n] = s;
    const long t = targets[n];
    target_term[n] = (t >= v0 && t < v0 + V) ? ce_exp<T>(to_float(x[t - v0]) - m) : 0.0f;
}

// rowmax, sumexp, target_term (N) become relative to gmax (N), the all-reduced row max.
static __global__ void ce_rescale_kernel(float* rowmax, float* sumexp, float* target_term,
                                         const float* gmax, int N) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float f = rowmax[n] == -INFINITY ? 0.0f : expf(rowmax[n] - gmax[n]);
    sumexp[n] *= f;
    target_term[n] *= f;
    rowmax[n] = gmax[n];
}

// losses (N) or null; logits (N, V) -> dlogits in place; rowmax, sumexp, target_term, targets (N).
// Block per row. Written as the CPU kernel: p = e * (1 / sum); d = p * dloss, minus dloss at t.
template <typename T, int VEC>
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
    const float scale = t >= 0 ? inv * dloss : 0.0f;  // ignored rows: a zero gradient
    const int Vv = V / VEC * VEC;
    for (int i = threadIdx.x * VEC; i < Vv; i += blockDim.x * VEC) {
        Vec<T, VEC> v = load_vec<VEC>(x + i);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            float d = ce_exp<T>(to_float(v.v[k]) - m) * scale;
            if (v0 + i + k == t) d -= dloss;
            v.v[k] = from_float<T>(d);
        }
        store_vec<VEC>(x + i, v);
    }
    for (int i = Vv + threadIdx.x; i < V; i += blockDim.x) {
        float d = ce_exp<T>(to_float(x[i]) - m) * scale;
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

// One row's loss and gradient in one read of its logits (a whole vocabulary: v0 = 0). A cluster of
// blocks takes the row: block r of it stages columns [r·chunk, (r+1)·chunk) of the row (ld
// columns, a multiple of VEC; chunk one too) in shared memory with asynchronous copies, takes
// their max and sum of exponentials over the real columns (< V), and puts them with its share of
// the target's logit where the cluster reads them. Every block merges the cluster's parts in rank
// order (the same statistics in each), then writes its columns' gradient from shared memory:
// exp(x − max) · (1 / sum) · dloss, minus dloss at the target, zero on padding and ignored rows.
// The first block writes the row's loss. Blocks of kCeBlock threads.
template <typename T, int VEC>
static __global__ void __launch_bounds__(kCeBlock)
    ce_one_pass_kernel(float* losses, T* logits, const int* targets, float dloss, int V, int ld,
                       int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();  // clusters need sm_90: ce_train_cuda takes the two passes for this code
#else
    namespace cg = cooperative_groups;
    const cg::cluster_group cluster = cg::this_cluster();
    const int c = (int)cluster.num_blocks(), rank = (int)cluster.block_rank();
    const int n = blockIdx.x / c;
    extern __shared__ __align__(16) unsigned char ce_row_smem[];
    T* row = reinterpret_cast<T*>(ce_row_smem);
    __shared__ float part[3];  // this block's max, sum of exponentials, target logit (or -inf)
    T* x = logits + (long)n * ld;
    const int c0 = rank * chunk, c1 = min(ld, c0 + chunk), r1 = min(c1, V);
    for (int i = c0 + threadIdx.x * VEC; i < c1; i += kCeBlock * VEC)
        cp_async16(row + (i - c0), x + i, true);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    float m = -INFINITY, s = 0.0f;
    for (int i = c0 + threadIdx.x * VEC; i < r1; i += kCeBlock * VEC)
        ce_add_vec<T, VEC>(m, s, load_vec<VEC>(row + (i - c0)), r1 - i);
    ce_block_merge<T>(m, s);
    const int t = targets[n];
    if (threadIdx.x == 0) {
        part[0] = m;
        part[1] = s;
        part[2] = (t >= c0 && t < r1) ? to_float(row[t - c0]) : -INFINITY;
    }
    cluster.sync();  // every block's part written
    __shared__ float row_stats[3];
    if (threadIdx.x == 0) {
        float M = -INFINITY, S = 0.0f, xt = -INFINITY;
        for (int r = 0; r < c; ++r) {
            const float* p = cluster.map_shared_rank(part, r);
            ce_merge<T>(M, S, p[0], p[1]);
            xt = fmaxf(xt, p[2]);
        }
        row_stats[0] = M;
        row_stats[1] = S;
        row_stats[2] = xt;
    }
    cluster.sync();  // the parts read: a block may now exit
    const float M = row_stats[0], inv = 1.0f / row_stats[1];
    if (rank == 0 && threadIdx.x == 0 && losses)
        losses[n] = t >= 0 ? -logf(ce_exp<T>(row_stats[2] - M) * inv) : 0.0f;
    const float scale = t >= 0 ? inv * dloss : 0.0f;  // ignored rows: a zero gradient
    for (int i = c0 + threadIdx.x * VEC; i < c1; i += kCeBlock * VEC) {
        Vec<T, VEC> v = load_vec<VEC>(row + (i - c0));
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            float d = i + k < V ? ce_exp<T>(to_float(v.v[k]) - M) * scale : 0.0f;
            if (i + k == t) d -= dloss;
            v.v[k] = from_float<T>(d);
        }
        store_vec<VEC>(x + i, v);
    }
#endif
}

// ---------------------------------------------------------------------------------------------
// launchers

// 16-byte accesses when every row starts aligned (the GPU head's padded shard always does).
template <typename T>
static bool ce_vectorizable(const T* logits, int ld) {
    return ld % vec16<T>() == 0 && aligned16(logits);
}

template <typename T>
void ce_row_stats_cuda(float* rowmax, float* sumexp, float* target_term, const T* logits,
                       const int* targets, long v0, int N, int V, cudaStream_t s, int ld) {
    if (ld == 0) ld = V;
    TS_CUDA_REQUIRE(N >= 0 && V > 0 && v0 >= 0 && ld >= V, "ce_row_stats_cuda: bad shape N=", N,
                    " V=", V, " v0=", v0, " ld=", ld);
    if (N == 0) return;
    TS_CUDA_REQUIRE(rowmax && sumexp && target_term && logits && targets,
                    "ce_row_stats_cuda: null argument");
    if (ce_vectorizable(logits, ld))
        ce_row_stats_kernel<T, vec16<T>()>
            <<<N, kCeBlock, 0, s>>>(rowmax, sumexp, target_term, logits, targets, v0, V, ld);
    else
        ce_row_stats_kernel<T, 1>
            <<<N, kCeBlock, 0, s>>>(rowmax, sumexp, target_term, logits, targets, v0, V, ld);
    CUDA_CHECK_LAUNCH("ce_row_stats_kernel");
}

void ce_rescale_cuda(float* rowmax, float* sumexp, float* target_term, const float* gmax, int N,
                     cudaStream_t s) {
    TS_CUDA_REQUIRE(N >= 0, "ce_rescale_cuda: bad N=", N);
    if (N == 0) return;
    TS_CUDA_REQUIRE(rowmax && sumexp && target_term && gmax, "ce_rescale_cuda: null argument");
    ce_rescale_kernel<<<ceil_div(N, 256), 256, 0, s>>>(rowmax, sumexp, target_term, gmax, N);
    CUDA_CHECK_LAUNCH("ce_rescale_kernel");
}

template <typename T>
void ce_loss_and_grad_cuda(float* losses, T* logits, const float* rowmax, const float* sumexp,
                           const float* target_term, const int* targets, long v0, float dloss,
                           int N, int V, cudaStream_t s, int ld) {
    if (ld == 0) ld = V;
    TS_CUDA_REQUIRE(N >= 0 && V > 0 && v0 >= 0 && ld >= V, "ce_loss_and_grad_cuda: bad shape N=", N,
                    " V=", V, " v0=", v0, " ld=", ld);
    if (N == 0) return;
    TS_CUDA_REQUIRE(logits && rowmax && sumexp && target_term && targets,
                    "ce_loss_and_grad_cuda: null argument");
    if (ce_vectorizable(logits, ld))
        ce_loss_and_grad_kernel<T, vec16<T>()><<<N, kCeBlock, 0, s>>>(
            losses, logits, rowmax, sumexp, target_term, targets, v0, dloss, V, ld);
    else
        ce_loss_and_grad_kernel<T, 1><<<N, kCeBlock, 0, s>>>(
            losses, logits, rowmax, sumexp, target_term, targets, v0, dloss, V, ld);
    CUDA_CHECK_LAUNCH("ce_loss_and_grad_kernel");
}

// Shared memory a block stages at most: a row takes the fewest blocks (a cluster, at most the
// portable 8) whose chunks fit. 48 KB (GPT-2's rows in 3 blocks of 33.5 KB, 6 on an SM) ran the
// one pass fastest on an H100 (`bench/kernels_cuda`, GPT-2 B16: 1.27 ms against 1.34 at 64 KB and
// 1.36 at 32 KB; docs/benchmarks.md, "The cross-entropy in one pass").
static constexpr int kCeChunkBytes = 48 << 10;
static constexpr int kCeMaxCluster = 8;

template <typename T>
void ce_train_cuda(float* losses, float* stats, T* logits, const int* targets, float dloss, int N,
                   int V, cudaStream_t s, int ld) {
    if (ld == 0) ld = V;
    TS_CUDA_REQUIRE(N >= 0 && V > 0 && ld >= V, "ce_train_cuda: bad shape N=", N, " V=", V,
                    " ld=", ld);
    if (N == 0) return;
    TS_CUDA_REQUIRE(logits && targets && stats, "ce_train_cuda: null argument");
    constexpr int VEC = vec16<T>();
    const int vecs = ceil_div(ld, VEC);  // 16-byte pieces of a row
    const int cluster = ceil_div(vecs * 16, kCeChunkBytes);
    auto kernel = ce_one_pass_kernel<T, VEC>;
    // clusters: the device launches them and the kernel's code it runs was compiled with them
    // (from sm_90's PTX on; a build that also targets older chips compiles a trap for those)
    int device = 0, clusters = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device));
    cudaFuncAttributes fa{};
    CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
    if (!ce_vectorizable(logits, ld) || cluster > kCeMaxCluster || !clusters ||
        fa.ptxVersion < 90) {
        // the two passes: statistics, then loss and gradient
        ce_row_stats_cuda<T>(stats, stats + N, stats + 2 * N, logits, targets, 0, N, V, s, ld);
        ce_loss_and_grad_cuda<T>(losses, logits, stats, stats + N, stats + 2 * N, targets, 0, dloss,
                                 N, V, s, ld);
        return;
    }
    const int chunk = ceil_div(vecs, cluster) * VEC;  // columns per block
    CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kCeChunkBytes));
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = (unsigned)cluster;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3((unsigned)((long)N * cluster));
    cfg.blockDim = dim3(kCeBlock);
    cfg.dynamicSmemBytes = sizeof(T) * (size_t)chunk;
    cfg.stream = s;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, losses, logits, targets, dloss, V, ld, chunk));
    CUDA_CHECK_LAUNCH("ce_one_pass_kernel");
}

void ce_loss_only_cuda(float* losses, const float* sumexp, const float* target_term,
                       const int* targets, int N, cudaStream_t s) {
    TS_CUDA_REQUIRE(N >= 0, "ce_loss_only_cuda: bad N=", N);
    if (N == 0) return;
    TS_CUDA_REQUIRE(losses && sumexp && target_term && targets, "ce_loss_only_cuda: null argument");
    ce_loss_only_kernel<<<ceil_div(N, 256), 256, 0, s>>>(losses, sumexp, target_term, targets, N);
    CUDA_CHECK_LAUNCH("ce_loss_only_kernel");
}

#define TS_INSTANTIATE_CE(T)                                                                      \
    template void ce_row_stats_cuda<T>(float*, float*, float*, const T*, const int*, long, int,   \
                                       int, cudaStream_t, int);                                   \
    template void ce_loss_and_grad_cuda<T>(float*, T*, const float*, const float*, const float*,  \
                                           const int*, long, float, int, int, cudaStream_t, int); \
    template void ce_train_cuda<T>(float*, float*, T*, const int*, float, int, int, cudaStream_t, \
                                   int);
TS_INSTANTIATE_CE(float)
TS_INSTANTIATE_CE(bf16)

}  // namespace tessera
