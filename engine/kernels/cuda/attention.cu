// Fused causal attention (FlashAttention-2 style), forward and backward; see attention.cuh.
//
// Two implementations behind one interface:
//   bf16: attention_mma.cuh, tensor-core kernels (mma.sync, ldmatrix, cp.async) with the score
//         tiles, softmax statistics and accumulators in registers. That is the training path.
//   fp32: this file, written to be easy to check rather than fast: every block works on square
//         TILE x TILE tiles held in shared memory; all matrix products go through block_matmul
//         (scalar fp32 FMAs into an fp32 shared-memory tile) and the softmax bookkeeping is plain
//         code on those shared tiles.
//   forward:  one block per (query tile, head, batch); loop over key tiles 0 .. diagonal with an
//             online softmax (running max m and sum l per row); the output accumulator lives in
//             shared memory (fp32) and is rescaled by exp(m_old - m_new) before each P·V.
//   backward: D = rowsum(dout ∘ out) first (attention_dd_kernel, both types); then one block per
//             (key tile, head, batch) loops over query tiles diagonal .. end, recomputes
//             P = exp(scale·S - lse) and accumulates dV and dK in shared memory; a second kernel,
//             one block per (query tile, head, batch), recomputes P and dP over key tiles
//             0 .. diagonal and accumulates dQ. Two passes instead of dQ atomics: the result is
//             deterministic (bit-identical run to run) at the cost of recomputing S and dP.
//             Causality and T not a multiple of TILE are handled by masking P (k <= q < T) and
//             zero-filling the tile rows past T.
#include <cmath>
#include <memory>
#include <type_traits>

#include "engine/kernels/cuda/attention.cuh"
#include "engine/kernels/cuda/attention_mma.cuh"
#include "engine/kernels/cuda/attention_wgmma.cuh"
#include "engine/kernels/cuda/cuda_handles.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"

namespace tessera {

// ---------------------------------------------------------------------------------------------
// tiles and shared-memory layouts

constexpr int ATT_THREADS = 256;  // 8 warps per block
constexpr int ATT_WARPS = ATT_THREADS / 32;
constexpr size_t ATT_MAX_SMEM = 227 * 1024;  // sm_90 opt-in limit per block

// Query/key tile edge of the fp32 kernels (4-byte tiles: 32 keeps the backward in shared memory).
constexpr int FP32_TILE = 32;

__host__ __device__ constexpr size_t align128(size_t bytes) {
    return (bytes + 127) / 128 * 128;
}

// Leading dimensions (elements). Padding keeps rows 16-byte aligned (vector loads) and spreads
// them over the shared-memory banks.
template <int HS, int TILE>
struct AttLd {
    static constexpr int t = HS + 8;    // q, k, v, dout tiles (TILE x HS, type T)
    static constexpr int s = TILE + 4;  // scores / probabilities (TILE x TILE, fp32)
    static constexpr int p = TILE + 8;  // P or dS as a matmul operand (TILE x TILE, type T)
    static constexpr int a = HS + 4;    // fp32 accumulators (TILE x HS)
};

// Forward, byte offsets: q, k, v tiles; scores s; probabilities p; output accumulator o; running
// max m and sum l per row.
template <typename T, int HS, int TILE>
struct FwdSmem {
    using Ld = AttLd<HS, TILE>;
    static constexpr size_t q = 0;
    static constexpr size_t k = q + align128(sizeof(T) * TILE * Ld::t);
    static constexpr size_t v = k + align128(sizeof(T) * TILE * Ld::t);
    static constexpr size_t s = v + align128(sizeof(T) * TILE * Ld::t);
    static constexpr size_t p = s + align128(sizeof(float) * TILE * Ld::s);
    static constexpr size_t o = p + align128(sizeof(T) * TILE * Ld::p);
    static constexpr size_t m = o + align128(sizeof(float) * TILE * Ld::a);
    static constexpr size_t l = m + align128(sizeof(float) * TILE);
    static constexpr size_t bytes = l + align128(sizeof(float) * TILE);
    static_assert(bytes <= ATT_MAX_SMEM, "attention forward: tile too large for shared memory");
};

// Backward dK/dV pass, byte offsets: k, v tiles (fixed per block); q, dout tiles (per query
// tile); s holds scores then dP; pf the fp32 probabilities; pt P then dS as a matmul operand;
// dk, dv accumulators; lse and dd per query row.
template <typename T, int HS, int TILE>
struct BwdSmem {
    using Ld = AttLd<HS, TILE>;
    static constexpr size_t k = 0;
    static constexpr size_t v = k + align128(sizeof(T) * TILE * Ld::t);
    static constexpr size_t q = v + align128(sizeof(T) * TILE * Ld::t);
    static constexpr size_t dout = q + align128(sizeof(T) * TILE * Ld::t);
    static constexpr size_t s = dout + align128(sizeof(T) * TILE * Ld::t);
    static constexpr size_t pf = s + align128(sizeof(float) * TILE * Ld::s);
    static constexpr size_t pt = pf + align128(sizeof(float) * TILE * Ld::s);
    static constexpr size_t dk = pt + align128(sizeof(T) * TILE * Ld::p);
    static constexpr size_t dv = dk + align128(sizeof(float) * TILE * Ld::a);
    static constexpr size_t lse = dv + align128(sizeof(float) * TILE * Ld::a);
    static constexpr size_t dd = lse + align128(sizeof(float) * TILE);
    static constexpr size_t bytes = dd + align128(sizeof(float) * TILE);
    static_assert(bytes <= ATT_MAX_SMEM, "attention backward: tile too large for shared memory");
};

// Backward dQ pass, byte offsets: q, dout tiles (fixed per block); k, v tiles (per key tile);
// s scores then P (fp32); dp (fp32); ds as a matmul operand; dq accumulator; lse and dd per row.
template <typename T, int HS, int TILE>
struct DqSmem {
    using Ld = AttLd<HS, TILE>;
    static constexpr size_t q = 0;
    static constexpr size_t dout = q + align128(sizeof(T) * TILE * Ld::t);
    static constexpr size_t k = dout + align128(sizeof(T) * TILE * Ld::t);
    static constexpr size_t v = k + align128(sizeof(T) * TILE * Ld::t);
    static constexpr size_t s = v + align128(sizeof(T) * TILE * Ld::t);
    static constexpr size_t dp = s + align128(sizeof(float) * TILE * Ld::s);
    static constexpr size_t ds = dp + align128(sizeof(float) * TILE * Ld::s);
    static constexpr size_t dq = ds + align128(sizeof(T) * TILE * Ld::p);
    static constexpr size_t lse = dq + align128(sizeof(float) * TILE * Ld::a);
    static constexpr size_t dd = lse + align128(sizeof(float) * TILE);
    static constexpr size_t bytes = dd + align128(sizeof(float) * TILE);
    static_assert(bytes <= ATT_MAX_SMEM, "attention backward dq: tile too large for shared memory");
};

// ---------------------------------------------------------------------------------------------
// block-wide device helpers (called by all ATT_THREADS threads; callers synchronise around them)

// dst (TILE x HS, leading dim ld) = rows row0 .. row0+TILE of src (row stride src_ld elements),
// zero past row T_. 16-byte accesses: src, src_ld*sizeof(T) and HS*sizeof(T) are 16-byte aligned.
template <typename T, int HS, int TILE>
static __device__ void load_tile(T* dst, int ld, const T* src, long src_ld, int row0, int T_) {
    constexpr int VEC = (int)(16 / sizeof(T));  // elements per 16-byte access
    constexpr int CHUNKS = HS / VEC;            // 16-byte chunks per row
    for (int i = threadIdx.x; i < TILE * CHUNKS; i += ATT_THREADS) {
        const int r = i / CHUNKS, c = (i % CHUNKS) * VEC;
        int4 x = make_int4(0, 0, 0, 0);
        if (row0 + r < T_) x = *reinterpret_cast<const int4*>(src + (long)(row0 + r) * src_ld + c);
        *reinterpret_cast<int4*>(dst + r * ld + c) = x;
    }
}

// c (M x N, fp32, leading dim ldc) = [c +] a (M x K) · b (K x N), all fp32. a is row-major
// (a[m*lda + k]) or, with A_COL, column-major (a[k*lda + m], i.e. the transpose of a stored
// row-major tile); likewise b (b[k*ldb + n], or b[n*ldb + k] with B_COL). Each element of c
// belongs to one thread.
template <typename T, int M, int N, int K, bool A_COL, bool B_COL, bool ACCUM>
static __device__ void block_matmul(float* c, int ldc, const T* a, int lda, const T* b, int ldb) {
    static_assert(std::is_same_v<T, float>, "block_matmul: fp32 only (bf16 is attention_mma.cuh)");
    for (int i = threadIdx.x; i < M * N; i += ATT_THREADS) {
        const int m = i / N, n = i % N;
        float sum = ACCUM ? c[m * ldc + n] : 0.0f;
        for (int k = 0; k < K; ++k) {
            const float av = A_COL ? a[k * lda + m] : a[m * lda + k];
            const float bv = B_COL ? b[n * ldb + k] : b[k * ldb + n];
            sum = fmaf(av, bv, sum);
        }
        c[m * ldc + n] = sum;
    }
}

// ---------------------------------------------------------------------------------------------
// kernels

// out (B, T_, C), lse (B, NH, T_), qkv (B, T_, C + 2·KV·HS); grid (query tiles, NH, B),
// ATT_THREADS.
template <typename T, int HS, int TILE>
static __global__ void __launch_bounds__(ATT_THREADS)
    attention_forward_kernel(T* out, float* lse, const T* qkv, int T_, int C, int NH, int KV,
                             float scale) {
    using L = FwdSmem<T, HS, TILE>;
    using Ld = AttLd<HS, TILE>;
    extern __shared__ __align__(128) unsigned char smem[];
    T* qs = reinterpret_cast<T*>(smem + L::q);
    T* ks = reinterpret_cast<T*>(smem + L::k);
    T* vs = reinterpret_cast<T*>(smem + L::v);
    float* ss = reinterpret_cast<float*>(smem + L::s);
    T* ps = reinterpret_cast<T*>(smem + L::p);
    float* os = reinterpret_cast<float*>(smem + L::o);
    float* ms = reinterpret_cast<float*>(smem + L::m);
    float* ls = reinterpret_cast<float*>(smem + L::l);

    const int n_tiles = (T_ + TILE - 1) / TILE;
    const int qt = n_tiles - 1 - (int)blockIdx.x;  // the longest (last) query tiles start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int q0 = qt * TILE;
    const long C3 = C + 2L * KV * HS;  // the row stride
    const T* q_bh = qkv + (long)b * T_ * C3 + h * HS;
    const T* k_bh = qkv + (long)b * T_ * C3 + C + (h / (NH / KV)) * HS;  // head h's kv head
    const T* v_bh = k_bh + (long)KV * HS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    load_tile<T, HS, TILE>(qs, Ld::t, q_bh, C3, q0, T_);
    for (int i = threadIdx.x; i < TILE * Ld::a; i += ATT_THREADS) os[i] = 0.0f;
    for (int i = threadIdx.x; i < TILE; i += ATT_THREADS) {
        ms[i] = -INFINITY;
        ls[i] = 0.0f;
    }

    for (int kt = 0; kt <= qt; ++kt) {
        const int k0 = kt * TILE;
        __syncthreads();  // the previous P·V is done with ks, vs, ps
        load_tile<T, HS, TILE>(ks, Ld::t, k_bh, C3, k0, T_);
        load_tile<T, HS, TILE>(vs, Ld::t, v_bh, C3, k0, T_);
        __syncthreads();
        // S (TILE x TILE) = Q · K^T
        block_matmul<T, TILE, TILE, HS, false, true, false>(ss, Ld::s, qs, Ld::t, ks, Ld::t);
        __syncthreads();
        // online softmax, one warp per row. Key 0 is in tile 0 and key q0+r's column r is in the
        // diagonal tile, so every row has an unmasked score in every tile: m_new is finite.
        for (int r = warp; r < TILE; r += ATT_WARPS) {
            const int q = q0 + r;
            float x[TILE / 32];
            float m_tile = -INFINITY;
#pragma unroll
            for (int u = 0; u < TILE / 32; ++u) {
                const int c = lane + 32 * u, k = k0 + c;
                x[u] = (k <= q && k < T_) ? ss[r * Ld::s + c] * scale : -INFINITY;
                m_tile = fmaxf(m_tile, x[u]);
            }
            m_tile = warp_max(m_tile);
            const float m_old = ms[r], l_old = ls[r];
            const float m_new = fmaxf(m_old, m_tile);
            float l_tile = 0.0f;
#pragma unroll
            for (int u = 0; u < TILE / 32; ++u) {
                const float p = expf(x[u] - m_new);  // 0 for masked (-inf) scores
                ps[r * Ld::p + lane + 32 * u] = from_float<T>(p);
                l_tile += p;
            }
            l_tile = warp_sum(l_tile);
            const float alpha = expf(m_old - m_new);  // 0 on the first tile (m_old = -inf)
            for (int d = lane; d < HS; d += 32) os[r * Ld::a + d] *= alpha;
            __syncwarp();  // every lane has read ms[r], ls[r]
            if (lane == 0) {
                ms[r] = m_new;
                ls[r] = l_old * alpha + l_tile;
            }
        }
        __syncthreads();
        // O (TILE x HS) += P · V
        block_matmul<T, TILE, HS, TILE, false, false, true>(os, Ld::a, ps, Ld::p, vs, Ld::t);
    }
    __syncthreads();
    for (int r = warp; r < TILE; r += ATT_WARPS) {
        const int q = q0 + r;
        if (q >= T_) break;  // rows only grow with r
        const float inv = 1.0f / ls[r];
        T* o = out + ((long)b * T_ + q) * C + h * HS;
        for (int d = lane; d < HS; d += 32) o[d] = from_float<T>(os[r * Ld::a + d] * inv);
        if (lane == 0) lse[((long)b * NH + h) * T_ + q] = ms[r] + logf(ls[r]);
    }
}

// dd (B, NH, T_) = per-head rowsum of dout ∘ out, both (B, T_, C); one warp per (b, t, h).
template <typename T>
static __global__ void attention_dd_kernel(float* dd, const T* dout, const T* out, int B, int T_,
                                           int C, int NH) {
    const long row = ((long)blockIdx.x * blockDim.x + threadIdx.x) / 32;  // (b*T_ + t)*NH + h
    const int lane = threadIdx.x % 32;
    if (row >= (long)B * T_ * NH) return;  // whole warps
    const int hs = C / NH;
    const int h = (int)(row % NH);
    const long bt = row / NH;
    const int b = (int)(bt / T_), t = (int)(bt % T_);
    const T* g = dout + bt * C + h * hs;
    const T* o = out + bt * C + h * hs;
    float sum = 0.0f;
    for (int d = lane; d < hs; d += 32) sum += to_float(g[d]) * to_float(o[d]);
    sum = warp_sum(sum);
    if (lane == 0) dd[((long)b * NH + h) * T_ + t] = sum;
}

// dqkv (B, T_, C + 2·KV·HS): dk, dv parts written; dout (B, T_, C); qkv as dqkv; lse, dd
// (B, NH, T_); grid (key tiles, KV, B), ATT_THREADS: a block sums over the query heads of its
// kv head (NH / KV of them) and every query tile from the diagonal on.
template <typename T, int HS, int TILE>
static __global__ void __launch_bounds__(ATT_THREADS)
    attention_backward_dkv_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                  const float* dd, int T_, int C, int NH, int KV, float scale) {
    using L = BwdSmem<T, HS, TILE>;
    using Ld = AttLd<HS, TILE>;
    extern __shared__ __align__(128) unsigned char smem[];
    T* ks = reinterpret_cast<T*>(smem + L::k);
    T* vs = reinterpret_cast<T*>(smem + L::v);
    T* qs = reinterpret_cast<T*>(smem + L::q);
    T* dos = reinterpret_cast<T*>(smem + L::dout);
    float* ss = reinterpret_cast<float*>(smem + L::s);
    float* pf = reinterpret_cast<float*>(smem + L::pf);
    T* pt = reinterpret_cast<T*>(smem + L::pt);
    float* dks = reinterpret_cast<float*>(smem + L::dk);
    float* dvs = reinterpret_cast<float*>(smem + L::dv);
    float* lse_s = reinterpret_cast<float*>(smem + L::lse);
    float* dd_s = reinterpret_cast<float*>(smem + L::dd);

    const int n_tiles = (T_ + TILE - 1) / TILE;
    const int kt = blockIdx.x;  // tile 0 sees the most query tiles and starts first
    const int hk = blockIdx.y, b = blockIdx.z, G = NH / KV;
    const int k0 = kt * TILE;
    const long C3 = C + 2L * KV * HS;  // the row stride
    const T* k_bh = qkv + (long)b * T_ * C3 + C + hk * HS;

    load_tile<T, HS, TILE>(ks, Ld::t, k_bh, C3, k0, T_);
    load_tile<T, HS, TILE>(vs, Ld::t, k_bh + (long)KV * HS, C3, k0, T_);
    for (int i = threadIdx.x; i < TILE * Ld::a; i += ATT_THREADS) dks[i] = dvs[i] = 0.0f;

    for (int it = 0; it < G * (n_tiles - kt); ++it) {  // (query head of the group, query tile)
        const int h = hk * G + it / (n_tiles - kt), qt = kt + it % (n_tiles - kt);
        const T* q_bh = qkv + (long)b * T_ * C3 + h * HS;
        const T* dout_bh = dout + (long)b * T_ * C + h * HS;
        const float* lse_bh = lse + ((long)b * NH + h) * T_;
        const float* dd_bh = dd + ((long)b * NH + h) * T_;
        const int q0 = qt * TILE;
        __syncthreads();  // the previous tile is done with qs, dos, pt, lse_s, dd_s
        load_tile<T, HS, TILE>(qs, Ld::t, q_bh, C3, q0, T_);
        load_tile<T, HS, TILE>(dos, Ld::t, dout_bh, C, q0, T_);
        for (int i = threadIdx.x; i < TILE; i += ATT_THREADS) {
            const bool in = q0 + i < T_;
            lse_s[i] = in ? lse_bh[q0 + i] : 0.0f;
            dd_s[i] = in ? dd_bh[q0 + i] : 0.0f;
        }
        __syncthreads();
        // S (TILE x TILE) = Q · K^T
        block_matmul<T, TILE, TILE, HS, false, true, false>(ss, Ld::s, qs, Ld::t, ks, Ld::t);
        __syncthreads();
        // P = exp(scale·S - lse) where key <= query < T_, else 0
        for (int i = threadIdx.x; i < TILE * TILE; i += ATT_THREADS) {
            const int r = i / TILE, c = i % TILE;
            const int q = q0 + r, k = k0 + c;
            const float p = (k <= q && q < T_) ? expf(ss[r * Ld::s + c] * scale - lse_s[r]) : 0.0f;
            pf[r * Ld::s + c] = p;
            pt[r * Ld::p + c] = from_float<T>(p);
        }
        __syncthreads();
        // dV (TILE keys x HS) += P^T · dO ; dP (TILE x TILE) = dO · V^T (into ss)
        block_matmul<T, TILE, HS, TILE, true, false, true>(dvs, Ld::a, pt, Ld::p, dos, Ld::t);
        block_matmul<T, TILE, TILE, HS, false, true, false>(ss, Ld::s, dos, Ld::t, vs, Ld::t);
        __syncthreads();
        // dS = scale · P ∘ (dP - D) (into pt; P's fp32 copy is in pf)
        for (int i = threadIdx.x; i < TILE * TILE; i += ATT_THREADS) {
            const int r = i / TILE, c = i % TILE;
            const float ds = scale * pf[r * Ld::s + c] * (ss[r * Ld::s + c] - dd_s[r]);
            pt[r * Ld::p + c] = from_float<T>(ds);
        }
        __syncthreads();
        // dK (TILE keys x HS) += dS^T · Q
        block_matmul<T, TILE, HS, TILE, true, false, true>(dks, Ld::a, pt, Ld::p, qs, Ld::t);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < TILE * HS; i += ATT_THREADS) {
        const int r = i / HS, d = i % HS;
        const int k = k0 + r;
        if (k >= T_) continue;
        T* dk = dqkv + ((long)b * T_ + k) * C3 + C + hk * HS;  // dv at +KV·HS
        dk[d] = from_float<T>(dks[r * Ld::a + d]);
        dk[(long)KV * HS + d] = from_float<T>(dvs[r * Ld::a + d]);
    }
}

// dqkv (B, T_, C + 2·KV·HS): q part written; dout (B, T_, C); qkv as dqkv; lse, dd (B, NH, T_);
// grid (query tiles, NH, B), ATT_THREADS.
template <typename T, int HS, int TILE>
static __global__ void __launch_bounds__(ATT_THREADS)
    attention_backward_dq_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                 const float* dd, int T_, int C, int NH, int KV, float scale) {
    using L = DqSmem<T, HS, TILE>;
    using Ld = AttLd<HS, TILE>;
    extern __shared__ __align__(128) unsigned char smem[];
    T* qs = reinterpret_cast<T*>(smem + L::q);
    T* dos = reinterpret_cast<T*>(smem + L::dout);
    T* ks = reinterpret_cast<T*>(smem + L::k);
    T* vs = reinterpret_cast<T*>(smem + L::v);
    float* ss = reinterpret_cast<float*>(smem + L::s);
    float* dps = reinterpret_cast<float*>(smem + L::dp);
    T* dss = reinterpret_cast<T*>(smem + L::ds);
    float* dqs = reinterpret_cast<float*>(smem + L::dq);
    float* lse_s = reinterpret_cast<float*>(smem + L::lse);
    float* dd_s = reinterpret_cast<float*>(smem + L::dd);

    const int n_tiles = (T_ + TILE - 1) / TILE;
    const int qt = n_tiles - 1 - (int)blockIdx.x;  // the longest (last) query tiles start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int q0 = qt * TILE;
    const long C3 = C + 2L * KV * HS;  // the row stride
    const T* q_bh = qkv + (long)b * T_ * C3 + h * HS;
    const T* k_bh = qkv + (long)b * T_ * C3 + C + (h / (NH / KV)) * HS;
    const float* lse_bh = lse + ((long)b * NH + h) * T_;
    const float* dd_bh = dd + ((long)b * NH + h) * T_;

    load_tile<T, HS, TILE>(qs, Ld::t, q_bh, C3, q0, T_);
    load_tile<T, HS, TILE>(dos, Ld::t, dout + (long)b * T_ * C + h * HS, C, q0, T_);
    for (int i = threadIdx.x; i < TILE; i += ATT_THREADS) {
        const bool in = q0 + i < T_;
        lse_s[i] = in ? lse_bh[q0 + i] : 0.0f;
        dd_s[i] = in ? dd_bh[q0 + i] : 0.0f;
    }
    for (int i = threadIdx.x; i < TILE * Ld::a; i += ATT_THREADS) dqs[i] = 0.0f;

    for (int kt = 0; kt <= qt; ++kt) {
        const int k0 = kt * TILE;
        __syncthreads();  // the previous dS · K is done with ks, dss
        load_tile<T, HS, TILE>(ks, Ld::t, k_bh, C3, k0, T_);
        load_tile<T, HS, TILE>(vs, Ld::t, k_bh + (long)KV * HS, C3, k0, T_);
        __syncthreads();
        // S (TILE x TILE) = Q · K^T ; dP (TILE x TILE) = dO · V^T
        block_matmul<T, TILE, TILE, HS, false, true, false>(ss, Ld::s, qs, Ld::t, ks, Ld::t);
        block_matmul<T, TILE, TILE, HS, false, true, false>(dps, Ld::s, dos, Ld::t, vs, Ld::t);
        __syncthreads();
        // dS = scale · P ∘ (dP - D), P = exp(scale·S - lse) where key <= query < T_, else 0
        for (int i = threadIdx.x; i < TILE * TILE; i += ATT_THREADS) {
            const int r = i / TILE, c = i % TILE;
            const int q = q0 + r, k = k0 + c;
            const float p = (k <= q && q < T_) ? expf(ss[r * Ld::s + c] * scale - lse_s[r]) : 0.0f;
            dss[r * Ld::p + c] = from_float<T>(scale * p * (dps[r * Ld::s + c] - dd_s[r]));
        }
        __syncthreads();
        // dQ (TILE queries x HS) += dS · K
        block_matmul<T, TILE, HS, TILE, false, false, true>(dqs, Ld::a, dss, Ld::p, ks, Ld::t);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < TILE * HS; i += ATT_THREADS) {
        const int r = i / HS, d = i % HS;
        const int q = q0 + r;
        if (q < T_) dqkv[((long)b * T_ + q) * C3 + h * HS + d] = from_float<T>(dqs[r * Ld::a + d]);
    }
}

// ---------------------------------------------------------------------------------------------
// launchers

static void attention_check_shapes(const char* op, int B, int T_, int C, int NH, int KV) {
    TS_CHECK(B > 0 && T_ > 0 && C > 0 && NH > 0, op, ": expected positive B, T, C, NH, found B=", B,
             " T=", T_, " C=", C, " NH=", NH);
    TS_CHECK(C % NH == 0, op, ": C=", C, " is not a multiple of NH=", NH);
    TS_CHECK(KV > 0 && NH % KV == 0, op, ": NH=", NH, " query heads do not divide into KV=", KV,
             " key/value heads");
    const int hs = C / NH;
    TS_CHECK(hs == 32 || hs == 64 || hs == 128, op, ": head size C/NH=", hs,
             " is not supported (expected 32, 64 or 128)");
    TS_CHECK(NH <= 65535 && B <= 65535, op, ": NH=", NH, " and B=", B,
             " must be at most 65535 (grid limits)");
}

template <typename T, int HS>
static void attention_forward_launch(T* out, float* lse, const T* qkv, int B, int T_, int C, int NH,
                                     int KV, cudaStream_t s) {
    constexpr int TILE = FP32_TILE;
    constexpr size_t smem = FwdSmem<T, HS, TILE>::bytes;
    auto kernel = attention_forward_kernel<T, HS, TILE>;
    CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const dim3 grid(ceil_div(T_, TILE), NH, B);
    const float scale = 1.0f / sqrtf((float)HS);
    kernel<<<grid, ATT_THREADS, smem, s>>>(out, lse, qkv, T_, C, NH, KV, scale);
    CUDA_CHECK_LAUNCH("attention_forward_kernel");
}

template <typename T>
void attention_forward_cuda(T* out, float* lse, const T* qkv, int B, int T_, int C, int NH, int KV,
                            cudaStream_t s) {
    attention_check_shapes("attention_forward_cuda", B, T_, C, NH, KV);
    TS_CHECK(out && lse && qkv, "attention_forward_cuda: null pointer (out, lse or qkv)");
    TS_CHECK(aligned16(qkv), "attention_forward_cuda: qkv must be 16-byte aligned");
    if constexpr (std::is_same_v<T, bf16>) {
        switch (C / NH) {
            case 32:
                att_mma::forward<32>(out, lse, qkv, B, T_, C, NH, KV, s);
                break;
            case 64:
                if (att_wgmma::available())
                    att_wgmma::forward(out, lse, qkv, B, T_, C, NH, KV, s);
                else
                    att_mma::forward<64>(out, lse, qkv, B, T_, C, NH, KV, s);
                break;
            default:
                att_mma::forward<128>(out, lse, qkv, B, T_, C, NH, KV, s);
                break;
        }
    } else {
        switch (C / NH) {
            case 32:
                attention_forward_launch<T, 32>(out, lse, qkv, B, T_, C, NH, KV, s);
                break;
            case 64:
                attention_forward_launch<T, 64>(out, lse, qkv, B, T_, C, NH, KV, s);
                break;
            default:
                attention_forward_launch<T, 128>(out, lse, qkv, B, T_, C, NH, KV, s);
                break;
        }
    }
}

template <typename T, int HS>
static void attention_backward_launch(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                      const float* dd, int B, int T_, int C, int NH, int KV,
                                      cudaStream_t s) {
    constexpr int TILE = FP32_TILE;
    const dim3 grid(ceil_div(T_, TILE), NH, B), grid_kv(ceil_div(T_, TILE), KV, B);
    const float scale = 1.0f / sqrtf((float)HS);

    constexpr size_t smem_dkv = BwdSmem<T, HS, TILE>::bytes;
    auto dkv = attention_backward_dkv_kernel<T, HS, TILE>;
    CUDA_CHECK(
        cudaFuncSetAttribute(dkv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_dkv));
    dkv<<<grid_kv, ATT_THREADS, smem_dkv, s>>>(dqkv, dout, qkv, lse, dd, T_, C, NH, KV, scale);
    CUDA_CHECK_LAUNCH("attention_backward_dkv_kernel");

    constexpr size_t smem_dq = DqSmem<T, HS, TILE>::bytes;
    auto dq = attention_backward_dq_kernel<T, HS, TILE>;
    CUDA_CHECK(cudaFuncSetAttribute(dq, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_dq));
    dq<<<grid, ATT_THREADS, smem_dq, s>>>(dqkv, dout, qkv, lse, dd, T_, C, NH, KV, scale);
    CUDA_CHECK_LAUNCH("attention_backward_dq_kernel");
}

template <typename T>
void attention_backward_cuda(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse,
                             int B, int T_, int C, int NH, int KV, cudaStream_t s) {
    attention_check_shapes("attention_backward_cuda", B, T_, C, NH, KV);
    TS_CHECK(dqkv && dout && qkv && out && lse,
             "attention_backward_cuda: null pointer (dqkv, dout, qkv, out or lse)");
    TS_CHECK(aligned16(qkv) && aligned16(dout),
             "attention_backward_cuda: qkv and dout must be 16-byte aligned");
    const long n_dd = (long)B * NH * T_;
    StreamBuffer<float> scratch = cuda_malloc_async<float>(n_dd, s);
    float* dd = scratch.get();  // (B, NH, T_)

    if constexpr (std::is_same_v<T, bf16>) {
        switch (C / NH) {
            case 32:
                att_mma::backward<32>(dqkv, dout, qkv, out, lse, dd, B, T_, C, NH, KV, s);
                break;
            case 64:
                if (att_wgmma::available())
                    att_wgmma::backward(dqkv, dout, qkv, out, lse, dd, B, T_, C, NH, KV, s);
                else
                    att_mma::backward<64>(dqkv, dout, qkv, out, lse, dd, B, T_, C, NH, KV, s);
                break;
            default:
                att_mma::backward<128>(dqkv, dout, qkv, out, lse, dd, B, T_, C, NH, KV, s);
                break;
        }
    } else {
        const int dd_block = 256;  // 8 rows per block
        attention_dd_kernel<T>
            <<<ceil_div(n_dd * 32, dd_block), dd_block, 0, s>>>(dd, dout, out, B, T_, C, NH);
        CUDA_CHECK_LAUNCH("attention_dd_kernel");
        switch (C / NH) {
            case 32:
                attention_backward_launch<T, 32>(dqkv, dout, qkv, lse, dd, B, T_, C, NH, KV, s);
                break;
            case 64:
                attention_backward_launch<T, 64>(dqkv, dout, qkv, lse, dd, B, T_, C, NH, KV, s);
                break;
            default:
                attention_backward_launch<T, 128>(dqkv, dout, qkv, lse, dd, B, T_, C, NH, KV, s);
                break;
        }
    }
}

template void attention_forward_cuda<float>(float*, float*, const float*, int, int, int, int, int,
                                            cudaStream_t);
template void attention_forward_cuda<bf16>(bf16*, float*, const bf16*, int, int, int, int, int,
                                           cudaStream_t);
template void attention_backward_cuda<float>(float*, const float*, const float*, const float*,
                                             const float*, int, int, int, int, int, cudaStream_t);
template void attention_backward_cuda<bf16>(bf16*, const bf16*, const bf16*, const bf16*,
                                            const float*, int, int, int, int, int, cudaStream_t);

// ---------------------------------------------------------------------------------------------
// cached decoding

// out (B·n, NH·hd); q (B·n rows, stride q_stride); kc, vc (B, Tmax, KV·hd); grid B·n·NH warps.
template <typename T>
static __global__ void attention_decode_kernel(T* out, const T* q, long q_stride, const T* kc,
                                               const T* vc, int n, int pos0, int NH, int KV, int hd,
                                               int Tmax, float scale, long warps) {
    const long w = ((long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (w >= warps) return;  // whole warps
    const int lane = threadIdx.x % 32;
    const long r = w / NH;
    const int h = (int)(w % NH), b = (int)(r / n), t = pos0 + (int)(r % n), kh = h / (NH / KV);
    const T* qh = q + r * q_stride + (long)h * hd;
    float qv[4], acc[4] = {0, 0, 0, 0};
    for (int u = 0; u < 4; ++u) qv[u] = lane + 32 * u < hd ? to_float(qh[lane + 32 * u]) : 0.0f;
    float m = -INFINITY, l = 0.0f;
    const long kvw = (long)KV * hd;
    for (int j = 0; j <= t; ++j) {
        const T* k = kc + ((long)b * Tmax + j) * kvw + (long)kh * hd;
        const T* v = vc + ((long)b * Tmax + j) * kvw + (long)kh * hd;
        float dot = 0.0f;
        for (int u = 0; u < 4; ++u)
            if (lane + 32 * u < hd) dot += qv[u] * to_float(k[lane + 32 * u]);
        const float s = warp_sum(dot) * scale;
        const float m_new = fmaxf(m, s), alpha = expf(m - m_new), p = expf(s - m_new);
        l = l * alpha + p;
        for (int u = 0; u < 4; ++u)
            if (lane + 32 * u < hd) acc[u] = acc[u] * alpha + p * to_float(v[lane + 32 * u]);
        m = m_new;
    }
    T* o = out + r * NH * hd + (long)h * hd;
    for (int u = 0; u < 4; ++u)
        if (lane + 32 * u < hd) o[lane + 32 * u] = from_float<T>(acc[u] / l);
}

template <typename T>
void attention_decode_cuda(T* out, const T* q, long q_stride, const T* kc, const T* vc, int B,
                           int n, int pos0, int NH, int KV, int hd, int Tmax, cudaStream_t s) {
    TS_CHECK(B > 0 && n > 0 && NH > 0 && KV > 0 && NH % KV == 0 && hd > 0 && hd <= 128 &&
                 pos0 + n <= Tmax,
             "attention_decode_cuda: bad shape B=", B, " n=", n, " pos0=", pos0, " NH=", NH,
             " KV=", KV, " hd=", hd, " Tmax=", Tmax);
    const long warps = (long)B * n * NH;
    attention_decode_kernel<T><<<ceil_div(warps * 32, 128), 128, 0, s>>>(
        out, q, q_stride, kc, vc, n, pos0, NH, KV, hd, Tmax, 1.0f / sqrtf((float)hd), warps);
    CUDA_CHECK_LAUNCH("attention_decode_kernel");
}

template void attention_decode_cuda<float>(float*, const float*, long, const float*, const float*,
                                           int, int, int, int, int, int, int, cudaStream_t);
template void attention_decode_cuda<bf16>(bf16*, const bf16*, long, const bf16*, const bf16*, int,
                                          int, int, int, int, int, int, cudaStream_t);

}  // namespace tessera
