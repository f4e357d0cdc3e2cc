// LayerNorm and RMSNorm on the GPU: one warp per row for the forward and for dinp, a
// column-tiled two-pass reduction for dweight/dbias (deterministic); where the columns' sums fit a
// warp's registers, or its share of shared memory, the backward's gradients all in one pass over
// the rows. Rows are read with 16-byte vector loads when C and the pointers allow it (VEC = 4
// floats or 8 bf16), else element by element (any C works).
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"
#include "engine/kernels/cuda/layernorm.cuh"

namespace tessera {

static constexpr float kLnEps = 1e-5f;
static constexpr int kLnWarps = 4;  // rows per block in the warp-per-row kernels

// Where rows of C elements lie: R rows per group, groups `stride` elements apart (plain (N, C):
// R = 1, stride = C; RMSNorm per head: R heads of hd in each qkv row).
struct RowLayout {
    int R;
    long stride;
    __host__ __device__ long offset(long row, int C) const {
        return (row / R) * stride + (row % R) * (long)C;
    }
};

// ---------------------------------------------------------------------------------------------
// kernels

// out, resid_out are (N, C); mean, rstd are (N) or null; a, b are (N, C), b null for a plain
// layernorm of a; weight, bias are (C). One warp per row; lanes own the same VEC-chunks in every
// pass, so a lane re-reads only the residual values it wrote itself.
template <typename T, int VEC>
static __global__ void layernorm_forward_kernel(T* out, T* resid_out, float* mean, float* rstd,
                                                const T* a, const T* b, const T* weight,
                                                const T* bias, int N, int C) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) return;  // whole warp leaves together; no block barriers below
    const long off = (long)row * C;
    const T* x = a + off;
    float sum = 0.0f;
    if (b) {
        for (int i = lane * VEC; i < C; i += 32 * VEC) {
            Vec<T, VEC> va = load_vec<VEC>(a + off + i), vb = load_vec<VEC>(b + off + i), r;
            for (int k = 0; k < VEC; ++k) {
                r.v[k] = from_float<T>(to_float(va.v[k]) + to_float(vb.v[k]));
                sum += to_float(r.v[k]);
            }
            store_vec<VEC>(resid_out + off + i, r);
        }
        x = resid_out + off;
    } else {
        for (int i = lane * VEC; i < C; i += 32 * VEC) {
            Vec<T, VEC> vx = load_vec<VEC>(x + i);
            for (int k = 0; k < VEC; ++k) sum += to_float(vx.v[k]);
        }
    }
    const float m = warp_sum(sum) / C;
    float var = 0.0f;
    for (int i = lane * VEC; i < C; i += 32 * VEC) {
        Vec<T, VEC> vx = load_vec<VEC>(x + i);
        for (int k = 0; k < VEC; ++k) {
            float d = to_float(vx.v[k]) - m;
            var += d * d;
        }
    }
    const float s = 1.0f / sqrtf(warp_sum(var) / C + kLnEps);
    for (int i = lane * VEC; i < C; i += 32 * VEC) {
        Vec<T, VEC> vx = load_vec<VEC>(x + i), vw = load_vec<VEC>(weight + i),
                    vb = load_vec<VEC>(bias + i), o;
        for (int k = 0; k < VEC; ++k)
            o.v[k] = from_float<T>((s * (to_float(vx.v[k]) - m)) * to_float(vw.v[k]) +
                                   to_float(vb.v[k]));
        store_vec<VEC>(out + off + i, o);
    }
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = s;
    }
}

// dout, inp are (N, C); mean (null: 0, RMSNorm), rstd are (N); partial is (chunks, 2, C):
// [c, 0, i] = sum of norm * dout, [c, 1, i] = sum of dout over the rows of chunk c. Block of 8
// warps over VEC * 32 columns: each lane sums VEC adjacent columns (16-byte loads when VEC > 1),
// warp w the chunk's rows w, w + 8, ...; the warps' sums are added in warp order (fixed:
// deterministic).
template <typename T, int VEC>
static __global__ void layernorm_dparams_partial_kernel(float* partial, const T* dout, const T* inp,
                                                        const float* mean, const float* rstd, int N,
                                                        int C, int rows_per_chunk, RowLayout L) {
    __shared__ float sw[8][32 * VEC + 1], sb[8][32 * VEC + 1];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int i0 = (blockIdx.x * 32 + lane) * VEC;
    const int r0 = blockIdx.y * rows_per_chunk;
    const int r1 = min(N, r0 + rows_per_chunk);
    float aw[VEC] = {}, ab[VEC] = {};
    if (i0 < C)
        for (int n = r0 + warp; n < r1; n += 8) {
            const Vec<T, VEC> g = load_vec<VEC>(dout + L.offset(n, C) + i0);
            const Vec<T, VEC> x = load_vec<VEC>(inp + L.offset(n, C) + i0);
            const float m = mean ? mean[n] : 0.0f, r = rstd[n];
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const float gf = to_float(g.v[k]);
                aw[k] += (to_float(x.v[k]) - m) * r * gf;
                ab[k] += gf;
            }
        }
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        sw[warp][lane * VEC + k] = aw[k];
        sb[warp][lane * VEC + k] = ab[k];
    }
    __syncthreads();
    for (int c = threadIdx.x; c < 32 * VEC; c += blockDim.x) {
        const int i = blockIdx.x * 32 * VEC + c;
        if (i >= C) continue;
        float w = 0.0f, bsum = 0.0f;
        for (int k = 0; k < 8; ++k) {
            w += sw[k][c];
            bsum += sb[k][c];
        }
        partial[((long)blockIdx.y * 2) * C + i] = w;
        partial[((long)blockIdx.y * 2 + 1) * C + i] = bsum;
    }
}

// out (N, C), rstd (N) or null; inp (N, C); weight (C). One warp per row.
template <typename T, int VEC>
static __global__ void rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const T* weight,
                                              int N, int C, float eps, RowLayout L) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) return;
    const long off = L.offset(row, C);
    float ss = 0.0f;
    for (int i = lane * VEC; i < C; i += 32 * VEC) {
        Vec<T, VEC> vx = load_vec<VEC>(inp + off + i);
        for (int k = 0; k < VEC; ++k) ss += to_float(vx.v[k]) * to_float(vx.v[k]);
    }
    const float r = 1.0f / sqrtf(warp_sum(ss) / C + eps);
    for (int i = lane * VEC; i < C; i += 32 * VEC) {
        Vec<T, VEC> vx = load_vec<VEC>(inp + off + i), vw = load_vec<VEC>(weight + i), o;
        for (int k = 0; k < VEC; ++k)
            o.v[k] = from_float<T>((to_float(vx.v[k]) * r) * to_float(vw.v[k]));
        store_vec<VEC>(out + off + i, o);
    }
    if (lane == 0 && rstd) rstd[row] = r;
}

// A norm's backward per element, for both of its dinp kernels (norm_backward_fused_kernel and
// norm_backward_dinp_kernel): the row's statistics; each element's terms of the row means its
// dinp needs (first pass); its dinp and its terms of the parameters' column sums (second pass).
// Both kernels take these expressions in the same order, so they write the same dinp bits.
struct RmsBackward {  // g = dout·w, x̂ = x·r: mean(g·x̂); the weight's column sums Σ x̂·dout
    static constexpr int kMeans = 1, kSums = 1;
    const float* rstd;
    struct Row {
        float r;
    };
    __device__ Row row(int n) const { return {rstd[n]}; }
    __device__ void means(const Row& s, float dout, float w, float x, float (&m)[kMeans]) const {
        m[0] += dout * w * (x * s.r);
    }
    __device__ float dinp(const Row& s, float dout, float w, float x, const float (&m)[kMeans],
                          float (&sums)[kSums]) const {
        const float xh = x * s.r;
        sums[0] += xh * dout;
        return s.r * (dout * w - xh * m[0]);  // r·(g − x̂·mean(g·x̂))
    }
};
struct LnBackward {  // mean(w·g), mean(w·g·x̂); the weight's Σ x̂·dout and the bias's Σ dout
    static constexpr int kMeans = 2, kSums = 2;
    const float *mean, *rstd;
    struct Row {
        float m, s;
    };
    __device__ Row row(int n) const { return {mean[n], rstd[n]}; }
    __device__ void means(const Row& r, float dout, float w, float x, float (&m)[kMeans]) const {
        const float norm = (x - r.m) * r.s;
        const float dnorm = w * dout;
        m[0] += dnorm;
        m[1] += dnorm * norm;
    }
    __device__ float dinp(const Row& r, float dout, float w, float x, const float (&m)[kMeans],
                          float (&sums)[kSums]) const {
        const float norm = (x - r.m) * r.s;
        sums[0] += norm * dout;
        sums[1] += dout;
        const float dnorm = w * dout;
        return (dnorm - m[0] - norm * m[1]) * r.s;
    }
};

// The norms' backward kernels' one body, over a row's VEC elements at column i: their terms of the
// row's means (the first pass over the row) ...
template <typename Norm, typename T, int VEC>
__device__ __forceinline__ void norm_means_vec(const Norm& norm, const typename Norm::Row& st,
                                               const T* dout, const T* inp, const T* weight,
                                               long off, int i, float (&m)[Norm::kMeans]) {
    Vec<T, VEC> vx = load_vec<VEC>(inp + off + i), vg = load_vec<VEC>(dout + off + i),
                vw = load_vec<VEC>(weight + i);
#pragma unroll
    for (int k = 0; k < VEC; ++k)
        norm.means(st, to_float(vg.v[k]), to_float(vw.v[k]), to_float(vx.v[k]), m);
}
// ... and (the second) their dinp, written (added to dinp's values with accumulate), each
// element's terms of the parameters' column sums added to sums[k].
template <typename Norm, typename T, int VEC>
__device__ __forceinline__ void norm_dinp_vec(const Norm& norm, const typename Norm::Row& st,
                                              const float (&m)[Norm::kMeans], T* dinp,
                                              const T* dout, const T* inp, const T* weight,
                                              long off, int i, bool accumulate,
                                              float (&sums)[VEC][Norm::kSums]) {
    Vec<T, VEC> vx = load_vec<VEC>(inp + off + i), vg = load_vec<VEC>(dout + off + i),
                vw = load_vec<VEC>(weight + i), vd;
    if (accumulate) vd = load_vec<VEC>(dinp + off + i);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        const float g =
            norm.dinp(st, to_float(vg.v[k]), to_float(vw.v[k]), to_float(vx.v[k]), m, sums[k]);
        vd.v[k] = from_float<T>(accumulate ? to_float(vd.v[k]) + g : g);
    }
    store_vec<VEC>(dinp + off + i, vd);
}

// dinp (N, C) += a norm's input gradient, or (accumulate false) = it (dinp may then be dout: a
// lane reads its elements before writing them); the parameters' gradients are
// layernorm_dparams'. One warp per row.
template <typename Norm, typename T, int VEC>
static __global__ void norm_backward_dinp_kernel(Norm norm, T* dinp, const T* dout, const T* inp,
                                                 const T* weight, int N, int C, RowLayout L,
                                                 bool accumulate) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) return;
    const long off = L.offset(row, C);
    const typename Norm::Row st = norm.row(row);
    float m[Norm::kMeans] = {};
    for (int i = lane * VEC; i < C; i += 32 * VEC)
        norm_means_vec<Norm, T, VEC>(norm, st, dout, inp, weight, off, i, m);
#pragma unroll
    for (int q = 0; q < Norm::kMeans; ++q) m[q] = warp_sum(m[q]) / C;
    float unused[VEC][Norm::kSums] = {};  // the column sums: not this kernel's
    for (int i = lane * VEC; i < C; i += 32 * VEC)
        norm_dinp_vec<Norm, T, VEC>(norm, st, m, dinp, dout, inp, weight, off, i, accumulate,
                                    unused);
}

// A norm's dinp and its parameters' gradients in one pass over the rows: block b takes rows
// [b·rows, (b+1)·rows), warp w of it the rows w, w + WARPS, ...; per row a first pass for the
// means, a second that writes dinp (added to it with accumulate) and adds the element's terms to
// the sums of the lane's columns (lanes own the same NCH·VEC columns in every row). The warps'
// sums are added in warp order into partial (blocks, kSums, C): deterministic. dinp may be dout
// with accumulate false (a lane reads its elements before writing them).
template <typename Norm, typename T, int VEC, int NCH, int WARPS>
static __global__ void __launch_bounds__(32 * WARPS)
    norm_backward_fused_kernel(Norm norm, T* dinp, float* partial, const T* dout, const T* inp,
                               const T* weight, int N, int C, int rows_per_chunk, RowLayout L,
                               bool accumulate) {
    constexpr int S = Norm::kSums;
    __shared__ float sh[WARPS][32 * VEC + 1];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int r0 = blockIdx.x * rows_per_chunk;
    const int r1 = min(N, r0 + rows_per_chunk);
    float sums[NCH][VEC][S] = {};
    for (int row = r0 + warp; row < r1; row += WARPS) {
        const long off = L.offset(row, C);
        const typename Norm::Row st = norm.row(row);
        float m[Norm::kMeans] = {};
#pragma unroll
        for (int j = 0; j < NCH; ++j) {
            const int i = (j * 32 + lane) * VEC;
            if (i < C) norm_means_vec<Norm, T, VEC>(norm, st, dout, inp, weight, off, i, m);
        }
#pragma unroll
        for (int q = 0; q < Norm::kMeans; ++q) m[q] = warp_sum(m[q]) / C;
#pragma unroll
        for (int j = 0; j < NCH; ++j) {
            const int i = (j * 32 + lane) * VEC;
            if (i < C)
                norm_dinp_vec<Norm, T, VEC>(norm, st, m, dinp, dout, inp, weight, off, i,
                                            accumulate, sums[j]);
        }
    }
#pragma unroll
    for (int q = 0; q < S; ++q)
#pragma unroll
        for (int j = 0; j < NCH; ++j) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) sh[warp][lane * VEC + k] = sums[j][k][q];
            __syncthreads();
            for (int c = threadIdx.x; c < 32 * VEC; c += blockDim.x) {
                const int i = j * 32 * VEC + c;
                if (i >= C) continue;
                float w = 0.0f;
                for (int k = 0; k < WARPS; ++k) w += sh[k][c];
                partial[((long)blockIdx.x * S + q) * C + i] = w;
            }
            __syncthreads();
        }
}

// The same one pass for rows too wide for a lane's sums in registers: each warp adds its terms of
// the column sums into its own row of shared memory (WARPS × kSums × C floats, 16-byte accesses:
// lane l owns columns l·VEC + 32·VEC·j), in the same row order as norm_backward_fused_kernel
// keeps them; then the warps' rows in warp order into partial (blocks, kSums, C).
template <typename Norm, typename T, int VEC, int WARPS>
static __global__ void __launch_bounds__(32 * WARPS)
    norm_backward_wide_kernel(Norm norm, T* dinp, float* partial, const T* dout, const T* inp,
                              const T* weight, int N, int C, int rows_per_chunk, RowLayout L,
                              bool accumulate) {
    static_assert(VEC % 4 == 0, "the shared sums move as float4");
    constexpr int S = Norm::kSums;
    extern __shared__ float4 wide_sums[];
    float* sh = reinterpret_cast<float*>(wide_sums);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float* mine = sh + (long)warp * S * C;
    for (int i = lane * 4; i < S * C; i += 32 * 4)
        *reinterpret_cast<float4*>(mine + i) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    __syncwarp();
    const int r0 = blockIdx.x * rows_per_chunk;
    const int r1 = min(N, r0 + rows_per_chunk);
    for (int row = r0 + warp; row < r1; row += WARPS) {
        const long off = L.offset(row, C);
        const typename Norm::Row st = norm.row(row);
        float m[Norm::kMeans] = {};
#pragma unroll 4
        for (int i = lane * VEC; i < C; i += 32 * VEC)
            norm_means_vec<Norm, T, VEC>(norm, st, dout, inp, weight, off, i, m);
#pragma unroll
        for (int q = 0; q < Norm::kMeans; ++q) m[q] = warp_sum(m[q]) / C;
#pragma unroll 2
        for (int i = lane * VEC; i < C; i += 32 * VEC) {
            float terms[VEC][S] = {};
            norm_dinp_vec<Norm, T, VEC>(norm, st, m, dinp, dout, inp, weight, off, i, accumulate,
                                        terms);
#pragma unroll
            for (int q = 0; q < S; ++q)
#pragma unroll
                for (int k = 0; k < VEC; k += 4) {
                    float4* a = reinterpret_cast<float4*>(mine + q * C + i + k);
                    float4 v = *a;
                    v.x += terms[k][q];
                    v.y += terms[k + 1][q];
                    v.z += terms[k + 2][q];
                    v.w += terms[k + 3][q];
                    *a = v;
                }
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < S * C; c += blockDim.x) {
        float w = 0.0f;
        for (int k = 0; k < WARPS; ++k) w += sh[(long)k * S * C + c];
        partial[(long)blockIdx.x * S * C + c] = w;
    }
}

// ---------------------------------------------------------------------------------------------
// launchers

template <typename T>
static void layernorm_forward_launch(T* out, T* resid_out, float* mean, float* rstd, const T* a,
                                     const T* b, const T* weight, const T* bias, int N, int C,
                                     cudaStream_t s) {
    TS_CUDA_REQUIRE(N >= 0 && C > 0, "layernorm_forward_cuda: bad shape N=", N, " C=", C);
    TS_CUDA_REQUIRE(out && a && weight && bias, "layernorm_forward_cuda: null out/inp/weight/bias");
    if (N == 0) return;
    constexpr int V = vec16<T>();
    const bool vec = C % V == 0 && aligned16(out) && aligned16(resid_out) && aligned16(a) &&
                     aligned16(b) && aligned16(weight) && aligned16(bias);
    const int grid = ceil_div(N, kLnWarps);
    if (vec)
        layernorm_forward_kernel<T, V>
            <<<grid, 32 * kLnWarps, 0, s>>>(out, resid_out, mean, rstd, a, b, weight, bias, N, C);
    else
        layernorm_forward_kernel<T, 1>
            <<<grid, 32 * kLnWarps, 0, s>>>(out, resid_out, mean, rstd, a, b, weight, bias, N, C);
    CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
}

template <typename T>
void layernorm_forward_cuda(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                            const T* bias, int N, int C, cudaStream_t s) {
    layernorm_forward_launch<T>(out, nullptr, mean, rstd, inp, nullptr, weight, bias, N, C, s);
}

template <typename T>
void fused_residual_layernorm_forward_cuda(T* residual_out, T* ln_out, float* mean, float* rstd,
                                           const T* a, const T* b, const T* weight, const T* bias,
                                           int N, int C, cudaStream_t s) {
    TS_CUDA_REQUIRE(residual_out && b,
                    "fused_residual_layernorm_forward_cuda: null residual_out/b");
    layernorm_forward_launch<T>(ln_out, residual_out, mean, rstd, a, b, weight, bias, N, C, s);
}

template <typename T>
static void layernorm_dparams(float* dweight, float* dbias, const T* dout, const T* inp,
                              const float* mean, const float* rstd, int N, int C, cudaStream_t s,
                              RowLayout L);

// The one-pass launchers' chunks of rows (a multiple of `warps`, at least `min_rows`, about 256
// chunks whatever N is, so the chunks' column sum stays short) and the scratch of their partial
// column sums (chunks, kSums, C); their sums then go into dweight and dbias (sum_into).
template <typename Norm>
struct NormChunks {
    int rows, count;
    float* partial;
    NormChunks(int N, int C, int warps, int min_rows)
        : rows(std::max(min_rows, ceil_div(ceil_div(N, 256), warps) * warps)),
          count(ceil_div(N, rows)),
          partial(static_cast<float*>(cuda_scratch(
              ScratchSlot::layernorm_dparams, sizeof(float) * Norm::kSums * (size_t)count * C))) {}
    void sum_into(float* dweight, float* dbias, int C, cudaStream_t s) const {
        // the weight's sums from rows [c, 0, :], LayerNorm's bias's from rows [c, 1, :]
        chunk_column_sum(dweight, Norm::kSums > 1 ? dbias : nullptr, partial, count, C,
                         (long)Norm::kSums * C, s);
        CUDA_CHECK_LAUNCH("chunk_column_sum_kernel");
    }
};

// A norm's backward in one pass (norm_backward_fused_kernel) when dinp and its parameters'
// gradients are all wanted, the rows take 16-byte loads and a lane's columns fit in registers
// (C ≤ 128·VEC: 1024 in bf16, 512 in fp32), or, wider, its share of shared memory
// (norm_backward_wide_kernel); false: the caller runs the two passes. Blocks of 16 warps over ≥ 64
// rows (NormChunks). Why these bounds: `bench/kernels_cuda --rmsnorm` on the H200,
// docs/benchmarks.md ("RMSNorm's backward in one pass"): 1.3-1.5× the two passes up to 1024
// columns, 0.97× at Llama-3.2-1B's 2048 (8 column groups per lane in registers: the shared-memory
// kernel now takes those rows), and 8 or 32 warps, or other rows per block, slower. LayerNorm
// (GPT-2 124M and medium on an H100) trains 0.3-0.6% faster with it ("Where GPT-2 124M's step
// goes"). Three column groups per lane (bf16 rows of 513-768, GPT-2 124M's and SmolLM's) have their
// own kernel: GPT-2 124M's LayerNorm backward 0.061-0.063 ms against 0.066-0.067 rounded up to four
// (H100, 2026-12-06; on that card 8 warps ran it in 0.057 and did not move GPT-2's tokens/s beyond
// noise, and were not timed at the Llama widths). dbias: LayerNorm's, null for RMSNorm.
template <typename Norm, typename T>
static bool norm_backward_fused(const Norm& norm, T* dinp, float* dweight, float* dbias,
                                const T* dout, const T* inp, const T* weight, int N, int C,
                                RowLayout L, bool accumulate, cudaStream_t s) {
    constexpr int V = vec16<T>();
    constexpr int kWarps = 16;
    if (!dinp || !dweight || !weight || (Norm::kSums > 1 && !dbias)) return false;
    if (!(C % V == 0 && L.stride % V == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) &&
          aligned16(weight)))
        return false;
    const int nch = ceil_div(C, 32 * V);
    if (nch > 4) {
        // Wider rows: the shared-memory kernel, 8 warps a block, where two blocks' sums fit a SM
        // (LayerNorm to 1808 columns, RMSNorm to 3616); `bench/kernels_cuda --norms` on an H100
        // (2026-12-07): 1.31× the two passes at gpt2-large's and gpt2-xl's rows, 1.63× at
        // Llama-3.2-1B's (docs/benchmarks.md, "The norms' one pass at wide rows").
        constexpr int kWideWarps = 8;
        constexpr size_t kMaxShared = 113 * 1024;
        const size_t smem = sizeof(float) * kWideWarps * Norm::kSums * (size_t)C;
        if (smem > kMaxShared) return false;
        const NormChunks<Norm> ch(N, C, kWideWarps, kWideWarps);
        auto kernel = norm_backward_wide_kernel<Norm, T, V, kWideWarps>;
        CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        kernel<<<ch.count, 32 * kWideWarps, smem, s>>>(norm, dinp, ch.partial, dout, inp, weight, N,
                                                       C, ch.rows, L, accumulate);
        CUDA_CHECK_LAUNCH("norm_backward_wide_kernel");
        ch.sum_into(dweight, dbias, C, s);
        return true;
    }
    const NormChunks<Norm> ch(N, C, kWarps, 64);
    auto launch = [&](auto kernel) {
        kernel<<<ch.count, 32 * kWarps, 0, s>>>(norm, dinp, ch.partial, dout, inp, weight, N, C,
                                                ch.rows, L, accumulate);
    };
    if (nch == 1)
        launch(norm_backward_fused_kernel<Norm, T, V, 1, kWarps>);
    else if (nch == 2)
        launch(norm_backward_fused_kernel<Norm, T, V, 2, kWarps>);
    else if (nch == 3)  // not rounded up to 4: 115 registers, not 123, and one sum pass fewer
        launch(norm_backward_fused_kernel<Norm, T, V, 3, kWarps>);
    else
        launch(norm_backward_fused_kernel<Norm, T, V, 4, kWarps>);
    CUDA_CHECK_LAUNCH("norm_backward_fused_kernel");
    ch.sum_into(dweight, dbias, C, s);
    return true;
}

// A norm's backward: one pass where norm_backward_fused takes it, else the parameters' gradients
// first (with accumulate false, dinp may be dout and is written last), then dinp. mean: LayerNorm's
// (null for RMSNorm), as norm holds it.
template <typename Norm, typename T>
static void norm_backward(const Norm& norm, T* dinp, float* dweight, float* dbias, const T* dout,
                          const T* inp, const T* weight, const float* mean, const float* rstd,
                          int N, int C, RowLayout L, bool accumulate, cudaStream_t s,
                          const char* what) {
    if (norm_backward_fused(norm, dinp, dweight, dbias, dout, inp, weight, N, C, L, accumulate, s))
        return;
    layernorm_dparams<T>(dweight, dbias, dout, inp, mean, rstd, N, C, s, L);
    if (!dinp) return;
    TS_CUDA_REQUIRE(weight, what, ": dinp needs weight");
    constexpr int V = vec16<T>();
    const int grid = ceil_div(N, kLnWarps);
    if (C % V == 0 && L.stride % V == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) &&
        aligned16(weight))
        norm_backward_dinp_kernel<Norm, T, V>
            <<<grid, 32 * kLnWarps, 0, s>>>(norm, dinp, dout, inp, weight, N, C, L, accumulate);
    else
        norm_backward_dinp_kernel<Norm, T, 1>
            <<<grid, 32 * kLnWarps, 0, s>>>(norm, dinp, dout, inp, weight, N, C, L, accumulate);
    CUDA_CHECK_LAUNCH("norm_backward_dinp_kernel");
}

template <typename T>
void layernorm_backward_cuda(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                             const T* weight, const float* mean, const float* rstd, int N, int C,
                             cudaStream_t s) {
    TS_CUDA_REQUIRE(N >= 0 && C > 0, "layernorm_backward_cuda: bad shape N=", N, " C=", C);
    TS_CUDA_REQUIRE(dout && inp && mean && rstd,
                    "layernorm_backward_cuda: null dout/inp/mean/rstd");
    if (N == 0) return;
    norm_backward(LnBackward{mean, rstd}, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
                  RowLayout{1, C}, true, s, "layernorm_backward_cuda");
}

// dweight (C) += Σ_n norm · dout, dbias (C) += Σ_n dout (either may be null), norm = (inp − mean)
// · rstd (mean null: RMSNorm's inp · rstd); per-chunk partial sums, then the chunks in order.
template <typename T>
static void layernorm_dparams(float* dweight, float* dbias, const T* dout, const T* inp,
                              const float* mean, const float* rstd, int N, int C, cudaStream_t s,
                              RowLayout L) {
    if (dweight || dbias) {
        const int rows_per_chunk = std::max(256, ceil_div(N, 65535));
        const int chunks = ceil_div(N, rows_per_chunk);
        float* partial = static_cast<float*>(
            cuda_scratch(ScratchSlot::layernorm_dparams, sizeof(float) * 2 * (size_t)chunks * C));
        constexpr int V = vec16<T>();
        if (C % V == 0 && L.stride % V == 0 && aligned16(dout) && aligned16(inp)) {
            dim3 grid(ceil_div(C, 32 * V), chunks);
            layernorm_dparams_partial_kernel<T, V>
                <<<grid, 256, 0, s>>>(partial, dout, inp, mean, rstd, N, C, rows_per_chunk, L);
        } else {
            dim3 grid(ceil_div(C, 32), chunks);
            layernorm_dparams_partial_kernel<T, 1>
                <<<grid, 256, 0, s>>>(partial, dout, inp, mean, rstd, N, C, rows_per_chunk, L);
        }
        CUDA_CHECK_LAUNCH("layernorm_dparams_partial_kernel");
        // dweight from rows [c, 0, :], dbias from rows [c, 1, :] (either may be null)
        chunk_column_sum(dweight, dbias, partial, chunks, C, 2L * C, s);
        CUDA_CHECK_LAUNCH("chunk_column_sum_kernel");
    }
}

template <typename T>
static void rmsnorm_forward_rows(T* out, float* rstd, const T* inp, const T* weight, int N, int C,
                                 float eps, RowLayout L, cudaStream_t s) {
    TS_CUDA_REQUIRE(N >= 0 && C > 0, "rmsnorm_forward_cuda: bad shape N=", N, " C=", C);
    TS_CUDA_REQUIRE(out && inp && weight, "rmsnorm_forward_cuda: null out/inp/weight");
    if (N == 0) return;
    constexpr int V = vec16<T>();
    const int grid = ceil_div(N, kLnWarps);
    if (C % V == 0 && L.stride % V == 0 && aligned16(out) && aligned16(inp) && aligned16(weight))
        rmsnorm_forward_kernel<T, V>
            <<<grid, 32 * kLnWarps, 0, s>>>(out, rstd, inp, weight, N, C, eps, L);
    else
        rmsnorm_forward_kernel<T, 1>
            <<<grid, 32 * kLnWarps, 0, s>>>(out, rstd, inp, weight, N, C, eps, L);
    CUDA_CHECK_LAUNCH("rmsnorm_forward_kernel");
}

template <typename T>
static void rmsnorm_backward_rows(T* dinp, float* dweight, const T* dout, const T* inp,
                                  const T* weight, const float* rstd, int N, int C, RowLayout L,
                                  bool accumulate, cudaStream_t s) {
    TS_CUDA_REQUIRE(N >= 0 && C > 0, "rmsnorm_backward_cuda: bad shape N=", N, " C=", C);
    TS_CUDA_REQUIRE(dout && inp && rstd, "rmsnorm_backward_cuda: null dout/inp/rstd");
    if (N == 0) return;
    norm_backward(RmsBackward{rstd}, dinp, dweight, nullptr, dout, inp, weight, nullptr, rstd, N, C,
                  L, accumulate, s, "rmsnorm_backward_cuda");
}

template <typename T>
void rmsnorm_forward_cuda(T* out, float* rstd, const T* inp, const T* weight, int N, int C,
                          float eps, cudaStream_t s) {
    rmsnorm_forward_rows<T>(out, rstd, inp, weight, N, C, eps, RowLayout{1, C}, s);
}

template <typename T>
void rmsnorm_backward_cuda(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                           const float* rstd, int N, int C, cudaStream_t s) {
    rmsnorm_backward_rows<T>(dinp, dweight, dout, inp, weight, rstd, N, C, RowLayout{1, C}, true,
                             s);
}

template <typename T>
void rmsnorm_heads_forward_cuda(T* out, float* rstd, const T* inp, const T* weight, int N,
                                int heads, int hd, long stride, float eps, cudaStream_t s) {
    TS_CUDA_REQUIRE(heads > 0 && stride >= (long)heads * hd,
                    "rmsnorm_heads_forward_cuda: heads=", heads, " of ", hd, " do not fit rows of ",
                    stride);
    rmsnorm_forward_rows<T>(out, rstd, inp, weight, N * heads, hd, eps, RowLayout{heads, stride},
                            s);
}

template <typename T>
void rmsnorm_heads_backward_cuda(T* dinp, float* dweight, const T* dout, const T* inp,
                                 const T* weight, const float* rstd, int N, int heads, int hd,
                                 long stride, cudaStream_t s) {
    TS_CUDA_REQUIRE(heads > 0 && stride >= (long)heads * hd,
                    "rmsnorm_heads_backward_cuda: heads=", heads, " of ", hd,
                    " do not fit rows of ", stride);
    rmsnorm_backward_rows<T>(dinp, dweight, dout, inp, weight, rstd, N * heads, hd,
                             RowLayout{heads, stride}, false, s);
}

#define TS_INSTANTIATE_LN(T)                                                                       \
    template void layernorm_forward_cuda<T>(T*, float*, float*, const T*, const T*, const T*, int, \
                                            int, cudaStream_t);                                    \
    template void fused_residual_layernorm_forward_cuda<T>(                                        \
        T*, T*, float*, float*, const T*, const T*, const T*, const T*, int, int, cudaStream_t);   \
    template void layernorm_backward_cuda<T>(T*, float*, float*, const T*, const T*, const T*,     \
                                             const float*, const float*, int, int, cudaStream_t);  \
    template void rmsnorm_forward_cuda<T>(T*, float*, const T*, const T*, int, int, float,         \
                                          cudaStream_t);                                           \
    template void rmsnorm_backward_cuda<T>(T*, float*, const T*, const T*, const T*, const float*, \
                                           int, int, cudaStream_t);                                \
    template void rmsnorm_heads_forward_cuda<T>(T*, float*, const T*, const T*, int, int, int,     \
                                                long, float, cudaStream_t);                        \
    template void rmsnorm_heads_backward_cuda<T>(T*, float*, const T*, const T*, const T*,         \
                                                 const float*, int, int, int, long, cudaStream_t);
TS_INSTANTIATE_LN(float)
TS_INSTANTIATE_LN(bf16)

}  // namespace tessera
