// The bf16 path of the fused causal attention (attention.cu): FlashAttention-2 style kernels on
// raw tensor-core instructions (mma.sync m16n8k16 bf16 with fp32 accumulation, ldmatrix, cp.async).
// Include from attention.cu only (static device code; sm_80+).
//
// Layouts follow attention.cuh: qkv (B, T, C + 2·KV·HS) [q | k | v], head h at columns h*HS .. of
// its part; query head h reads kv head h / (NH / KV).
// Every kernel runs 4 warps (128 threads); a warp owns 16*MT rows of its block's 64*MT-row tile
// (queries, or keys in the dK/dV pass) and keeps its score tiles, probabilities and accumulators
// in registers; its MT row tiles share every fragment loaded from shared memory. The m16n8k16
// accumulator of two adjacent 8-column tiles has exactly the register layout of a 16x16 A
// operand, so probabilities feed the next product without a trip through shared memory
// (regs_to_a). Shared-memory tiles are row-major with HS + 8 elements per row: a row pitch that is
// an odd multiple of 16 bytes keeps ldmatrix free of bank conflicts. Tiles whose keys all lie
// past a warp's rows are skipped; only tiles crossing the diagonal (or T) are masked.
//   forward: one block per query tile; key tiles double-buffered with cp.async; an online
//            softmax (running max and partial sums per row in registers).
//   backward dD: D = rowsum(dout ∘ out) per (b, h, t), vectorised.
//   backward dK/dV: one block per (key tile, kv head); for each query head of the kv head's
//            group it walks the query tiles from the diagonal down,
//            computes S^T = K·Q^T directly (a warp owns keys), P^T, dV += P^T·dO,
//            dP^T = V·dO^T, dS^T, dK += dS^T·Q. No cross-warp traffic.
//   backward dQ: one block per query tile over key tiles 0 .. diagonal: S, dP, dS, dQ += dS·K.
//            Recomputing S and dP here instead of accumulating dQ with atomics keeps the result
//            bit-identical run to run.
// Tile sizes per head size: Tiles, at the end, with the measurements behind them.
#pragma once
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"

namespace tessera {
namespace att_mma {

constexpr int THREADS = 128;  // 4 warps, 16 rows each
constexpr int ROWS = 64;      // rows of the tile a block owns (queries, or keys in dK/dV)
constexpr float LOG2E = 1.4426950408889634f;

// ---------------------------------------------------------------------------------------------
// PTX wrappers

// (smem_addr, cp_async16, cp_async_commit, cp_async_wait: device_helpers.cuh)
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

// c (16x8 fp32) += a (16x16 bf16, row) · b (16x8 bf16, col)
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float fast_exp2(float x) {  // exp2(-inf) = 0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // lo in the low half (lower column)
    return *reinterpret_cast<uint32_t*>(&v);
}

// ---------------------------------------------------------------------------------------------
// warp-level tile products. Fragment layouts (PTX ISA, m16n8k16): lane = 4g + t; an accumulator
// c[4] holds (row g, cols 2t, 2t+1) and (row g+8, cols 2t, 2t+1) of its 16x8 tile.

// a[KS][4]: A operand (16 x 16*KS) from a row-major shared tile (row pitch ld elements), rows
// 0..15 at base.
template <int KS>
__device__ __forceinline__ void load_a(uint32_t (&a)[KS][4], const bf16* base, int ld) {
    const int lane = threadIdx.x % 32;
    const bf16* p = base + (lane % 8 + ((lane / 8) % 2) * 8) * ld + (lane / 16) * 8;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) ldmatrix_x4(a[ks], p + ks * 16);
}

// c[MT][NT][4] (MT row tiles of 16 x 8*NT) += a[MT] (16 x 16*KS each) · b^T, b row-major
// (8*NT rows x 16*KS cols, pitch ld): b's rows are the output columns (S = Q·K^T with b = K).
// Each b fragment loaded from shared memory serves all MT row tiles.
template <int MT, int NT, int KS>
__device__ __forceinline__ void mma_abt(float (&c)[MT][NT][4], const uint32_t (&a)[MT][KS][4],
                                        const bf16* b, int ld) {
    static_assert(NT % 2 == 0, "mma_abt: column tiles come in pairs");
    const int lane = threadIdx.x % 32;
    const bf16* p = b + (lane % 8 + (lane / 16) * 8) * ld + ((lane / 8) % 2) * 8;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
            uint32_t r[4];
            ldmatrix_x4(r, p + np * 16 * ld + ks * 16);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma_bf16(c[mt][2 * np], a[mt][ks], r[0], r[1]);
                mma_bf16(c[mt][2 * np + 1], a[mt][ks], r[2], r[3]);
            }
        }
}

// c[MT][NT][4] += a[MT] (16 x 16*KS each) · b, b row-major (16*KS rows x 8*NT cols, pitch ld)
// (O = P·V with b = V).
template <int MT, int NT, int KS>
__device__ __forceinline__ void mma_ab(float (&c)[MT][NT][4], const uint32_t (&a)[MT][KS][4],
                                       const bf16* b, int ld) {
    static_assert(NT % 2 == 0, "mma_ab: column tiles come in pairs");
    const int lane = threadIdx.x % 32;
    const bf16* p = b + (lane % 8 + ((lane / 8) % 2) * 8) * ld + (lane / 16) * 8;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
            uint32_t r[4];
            ldmatrix_x4_trans(r, p + ks * 16 * ld + np * 16);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma_bf16(c[mt][2 * np], a[mt][ks], r[0], r[1]);
                mma_bf16(c[mt][2 * np + 1], a[mt][ks], r[2], r[3]);
            }
        }
}

// The accumulators c (MT tiles of 16 x 8*NT) as A operands (16 x 8*NT each) in bf16.
template <int MT, int NT>
__device__ __forceinline__ void regs_to_a(uint32_t (&a)[MT][NT / 2][4],
                                          const float (&c)[MT][NT][4]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int k = 0; k < NT / 2; ++k) {
            a[mt][k][0] = pack_bf16(c[mt][2 * k][0], c[mt][2 * k][1]);
            a[mt][k][1] = pack_bf16(c[mt][2 * k][2], c[mt][2 * k][3]);
            a[mt][k][2] = pack_bf16(c[mt][2 * k + 1][0], c[mt][2 * k + 1][1]);
            a[mt][k][3] = pack_bf16(c[mt][2 * k + 1][2], c[mt][2 * k + 1][3]);
        }
}

// a[MT][KS][4]: the A operands of MT row tiles (16 x 16*KS each) of a row-major shared tile
// (pitch ld), consecutive 16-row tiles from base.
template <int MT, int KS>
__device__ __forceinline__ void load_a(uint32_t (&a)[MT][KS][4], const bf16* base, int ld) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) load_a<KS>(a[mt], base + mt * 16 * ld, ld);
}

template <int MT, int NT>
__device__ __forceinline__ void zero(float (&c)[MT][NT][4]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < NT; ++j) c[mt][j][0] = c[mt][j][1] = c[mt][j][2] = c[mt][j][3] = 0.0f;
}

// ---------------------------------------------------------------------------------------------
// block-level loads (all THREADS threads)

// dst (R x HS, pitch HS + 8) = rows row0 .. row0+R of src (row stride src_ld elements),
// zero-filled past row T_, asynchronously (the caller commits and waits).
template <int HS, int R>
__device__ __forceinline__ void load_tile_async(bf16* dst, const bf16* src, long src_ld, int row0,
                                                int T_) {
    constexpr int CHUNKS = HS / 8;  // 16-byte chunks per row
    for (int i = threadIdx.x; i < R * CHUNKS; i += THREADS) {
        const int r = i / CHUNKS, c = (i % CHUNKS) * 8;
        const bool valid = row0 + r < T_;
        cp_async16(dst + r * (HS + 8) + c, src + (long)(valid ? row0 + r : 0) * src_ld + c, valid);
    }
}

// dst[0 .. R) = src[row0 ..) (fp32), zero past T_, asynchronously; threads first .. first+R.
template <int R>
__device__ __forceinline__ void load_rows_async(float* dst, const float* src, int row0, int T_,
                                                int first) {
    const int i = (int)threadIdx.x - first;
    if (i >= 0 && i < R) {
        const bool valid = row0 + i < T_;
        cp_async4(dst + i, src + (valid ? row0 + i : 0), valid);
    }
}

// ---------------------------------------------------------------------------------------------
// work order

// The block's tile rank (0 = the most work: the last query tile, or the first key tile), head
// and batch. heavy_first grids are (NH*B, tiles): every head's heaviest tile is launched before
// any lighter one, so long causal tiles do not trail in the last wave. Otherwise (tiles, NH, B),
// and a head's tiles run together (K/V shared in L2).
struct BlockWork {
    int rank, h, b;
};
__device__ __forceinline__ BlockWork block_work(int NH, bool heavy_first) {
    if (heavy_first) return {(int)blockIdx.y, (int)blockIdx.x % NH, (int)blockIdx.x / NH};
    return {(int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z};
}

inline dim3 work_grid(int tiles, int NH, int B, bool heavy_first) {
    return heavy_first ? dim3(NH * B, tiles) : dim3(tiles, NH, B);
}

// A query tile's block (the forward, the dQ pass): its head h, batch b and first row q0 (rank 0:
// the last tile of TILE_ROWS queries, which has the most keys), the row stride C3 of qkv
// (B, T_, C + 2·KV·HS), and where the block's head's Q and its kv head's K and V start.
struct QueryTile {
    int h, b, q0;
    long C3;
    const bf16 *q, *k, *v;
};
template <int HS, int TILE_ROWS>
__device__ __forceinline__ QueryTile query_tile(const bf16* qkv, int T_, int C, int NH, int KV,
                                                bool heavy_first) {
    const int n_q = (T_ + TILE_ROWS - 1) / TILE_ROWS;
    const BlockWork w = block_work(NH, heavy_first);
    QueryTile t;
    t.h = w.h, t.b = w.b;
    t.q0 = (n_q - 1 - w.rank) * TILE_ROWS;
    t.C3 = C + 2L * KV * HS;
    t.q = qkv + (long)t.b * T_ * t.C3 + t.h * HS;
    t.k = qkv + (long)t.b * T_ * t.C3 + C + (t.h / (NH / KV)) * HS;
    t.v = t.k + (long)KV * HS;
    return t;
}

// ---------------------------------------------------------------------------------------------
// forward

// Shared memory of the forward: the q tile (64*MT rows), then k and v tiles (BN rows) x 2 stages.
template <int HS, int MT, int BN>
constexpr size_t forward_smem() {
    return sizeof(bf16) * (HS + 8) * (64 * MT + 4 * BN);
}

// out (B, T_, C), lse (B, NH, T_), qkv (B, T_, C + 2·KV·HS); grid work_grid(query tiles of 64*MT),
// THREADS.
// A warp owns 16*MT query rows (MT row tiles share every K and V fragment); BN keys per step.
template <int HS, int MT, int BN>
static __global__ void __launch_bounds__(THREADS)
    forward_kernel(bf16* out, float* lse, const bf16* qkv, int T_, int C, int NH, int KV,
                   float scale, bool heavy_first) {
    constexpr int LD = HS + 8, RQ = 64 * MT, KT = BN * LD;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16* qs = reinterpret_cast<bf16*>(smem);
    bf16* ks = qs + RQ * LD;  // stage s at ks + s*KT
    bf16* vs = ks + 2 * KT;

    const QueryTile tile = query_tile<HS, RQ>(qkv, T_, C, NH, KV, heavy_first);
    const int h = tile.h, b = tile.b, q0 = tile.q0;
    const long C3 = tile.C3;
    const bf16 *q_g = tile.q, *k_g = tile.k, *v_g = tile.v;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const float scale_log2 = scale * LOG2E;
    // key tiles 0 .. the one holding key min(q0 + RQ, T_) - 1
    const int n_k = (min(q0 + RQ, T_) - 1) / BN + 1;
    const int wrow = q0 + warp * 16 * MT;  // this warp's first row; a thread's rows are
                                           // wrow + 16*mt + g + 8*r

    load_tile_async<HS, RQ>(qs, q_g, C3, q0, T_);
    load_tile_async<HS, BN>(ks, k_g, C3, 0, T_);
    load_tile_async<HS, BN>(vs, v_g, C3, 0, T_);
    cp_async_commit();

    float o[MT][HS / 8][4];
    zero(o);
    float m[MT][2], l[MT][2];  // running max of raw scores; this thread's part of the running sum
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
    uint32_t qf[MT][HS / 16][4];

    for (int kt = 0; kt < n_k; ++kt) {
        if (kt + 1 < n_k) {  // prefetch the next K, V tile into the other stage
            const int st = (kt + 1) & 1;
            load_tile_async<HS, BN>(ks + st * KT, k_g, C3, (kt + 1) * BN, T_);
            load_tile_async<HS, BN>(vs + st * KT, v_g, C3, (kt + 1) * BN, T_);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (kt == 0) load_a(qf, qs + (wrow - q0) * LD, LD);
        const int k0 = kt * BN;
        // Tiles wholly above this warp's rows are skipped. Otherwise every row of the warp sees
        // key k0 (k0 and wrow are multiples of 16*MT), and every row sees key 0 in tile 0: the
        // running max is finite from the first tile on.
        if (k0 < wrow + 16 * MT) {
            const bf16* kc = ks + (kt & 1) * KT;
            const bf16* vc = vs + (kt & 1) * KT;
            float s[MT][BN / 8][4];  // S = Q·K^T
            zero(s);
            mma_abt(s, qf, kc, LD);
            if (k0 + BN > wrow) {  // keys past this warp's first row: mask key > row (and >= T_)
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int key = k0 + 8 * j + 2 * t + (e & 1);
                            if (key > wrow + 16 * mt + g + (e / 2) * 8) s[mt][j][e] = -INFINITY;
                        }
            }
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {  // online softmax
                float mx[2] = {m[mt][0], m[mt][1]};
#pragma unroll
                for (int j = 0; j < BN / 8; ++j) {
                    mx[0] = fmaxf(mx[0], fmaxf(s[mt][j][0], s[mt][j][1]));
                    mx[1] = fmaxf(mx[1], fmaxf(s[mt][j][2], s[mt][j][3]));
                }
                float alpha[2], mref[2];
#pragma unroll
                for (int r = 0; r < 2; ++r) {  // the 4 threads of a quad share a row
                    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                    alpha[r] = fast_exp2((m[mt][r] - mx[r]) * scale_log2);  // 0 on the first tile
                    m[mt][r] = mx[r];
                    mref[r] = mx[r] * scale_log2;
                    l[mt][r] *= alpha[r];
                }
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        s[mt][j][e] = fast_exp2(fmaf(s[mt][j][e], scale_log2, -mref[e / 2]));
                        l[mt][e / 2] += s[mt][j][e];
                    }
#pragma unroll
                for (int j = 0; j < HS / 8; ++j) {
                    o[mt][j][0] *= alpha[0];
                    o[mt][j][1] *= alpha[0];
                    o[mt][j][2] *= alpha[1];
                    o[mt][j][3] *= alpha[1];
                }
            }
            uint32_t pf[MT][BN / 16][4];
            regs_to_a(pf, s);
            mma_ab(o, pf, vc, LD);  // O += P·V
        }
        __syncthreads();  // every warp is done with this stage before it is refilled
    }

#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float sum = l[mt][r];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            const int q = wrow + 16 * mt + g + 8 * r;
            if (q >= T_) continue;
            const float inv = 1.0f / sum;
            bf16* o_g = out + ((long)b * T_ + q) * C + h * HS + 2 * t;
#pragma unroll
            for (int j = 0; j < HS / 8; ++j)
                *reinterpret_cast<uint32_t*>(o_g + 8 * j) =
                    pack_bf16(o[mt][j][2 * r] * inv, o[mt][j][2 * r + 1] * inv);
            if (t == 0) lse[((long)b * NH + h) * T_ + q] = m[mt][r] * scale + logf(sum);
        }
}

// ---------------------------------------------------------------------------------------------
// backward dK, dV

// Shared memory: k and v tiles (64*MT rows); q and dout tiles (BQ rows) x 2 stages; lse and dd
// (BQ floats) x 2 stages.
template <int HS, int MT, int BQ>
constexpr size_t backward_dkv_smem() {
    return sizeof(bf16) * (HS + 8) * (2 * 64 * MT + 4 * BQ) + sizeof(float) * 4 * BQ;
}

// dqkv (B, T_, C + 2·KV·HS): k and v parts written; dout (B, T_, C); qkv as dqkv; lse, dd
// (B, NH, T_); grid work_grid(key tiles of 64*MT, KV heads), THREADS. A warp owns 16*MT keys; BQ
// queries per step (BQ divides 64); the steps run over the group's query heads, then its tiles.
template <int HS, int MT, int BQ>
static __global__ void __launch_bounds__(THREADS)
    backward_dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                        const float* dd, int T_, int C, int NH, int KV, float scale,
                        bool heavy_first) {
    static_assert(64 % BQ == 0 && BQ % 16 == 0, "backward_dkv_kernel: BQ must divide 64");
    constexpr int LD = HS + 8, RK = 64 * MT, QT = BQ * LD;
    // K and V fragments stay in registers when they fit; otherwise they are reloaded per step
    constexpr bool KV_REGS = HS * MT <= 64;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16* ks = reinterpret_cast<bf16*>(smem);
    bf16* vs = ks + RK * LD;
    bf16* qs = vs + RK * LD;  // stage s at qs + s*QT
    bf16* dos = qs + 2 * QT;
    float* lse_s = reinterpret_cast<float*>(dos + 2 * QT);  // stage s at lse_s + s*BQ
    float* dd_s = lse_s + 2 * BQ;

    const BlockWork w = block_work(KV, heavy_first);
    const int hk = w.h, b = w.b, G = NH / KV;  // the kv head and its query heads' count
    const int k0 = w.rank * RK;                // key tile 0 sees the most query tiles
    const long C3 = C + 2L * KV * HS;          // the row stride
    const bf16* k_g = qkv + (long)b * T_ * C3 + C + hk * HS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const float scale_log2 = scale * LOG2E;
    const int qb0 = k0 / BQ, n_qb = (T_ + BQ - 1) / BQ;  // query tiles qb0 .. n_qb - 1
    const int nq = n_qb - qb0, n_steps = G * nq;  // step i: query head hk*G + i / nq, tile i % nq
    const int wkey = k0 + warp * 16 * MT;         // this warp's first key; a thread's keys are
                                                  // wkey + 16*mt + g + 8*r

    auto load_q_stage = [&](int i) {
        const int st = i & 1, h = hk * G + i / nq, qb = qb0 + i % nq;
        load_tile_async<HS, BQ>(qs + st * QT, qkv + (long)b * T_ * C3 + h * HS, C3, qb * BQ, T_);
        load_tile_async<HS, BQ>(dos + st * QT, dout + (long)b * T_ * C + h * HS, C, qb * BQ, T_);
        load_rows_async<BQ>(lse_s + st * BQ, lse + ((long)b * NH + h) * T_, qb * BQ, T_, 0);
        load_rows_async<BQ>(dd_s + st * BQ, dd + ((long)b * NH + h) * T_, qb * BQ, T_, 64);
    };
    load_tile_async<HS, RK>(ks, k_g, C3, k0, T_);
    load_tile_async<HS, RK>(vs, k_g + (long)KV * HS, C3, k0, T_);
    load_q_stage(0);
    cp_async_commit();

    float dk[MT][HS / 8][4], dv[MT][HS / 8][4];
    zero(dk);
    zero(dv);
    uint32_t kf[MT][HS / 16][4], vf[MT][HS / 16][4];

    for (int i = 0; i < n_steps; ++i) {
        const int qb = qb0 + i % nq;
        if (i + 1 < n_steps) {
            load_q_stage(i + 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (KV_REGS && i == 0) {
            load_a(kf, ks + (wkey - k0) * LD, LD);
            load_a(vf, vs + (wkey - k0) * LD, LD);
        }
        const int q0 = qb * BQ;
        if (wkey < q0 + BQ) {  // else every key of this warp is past every query: P = 0
            const int st = i & 1;
            const bf16* qc = qs + st * QT;
            const bf16* doc = dos + st * QT;
            const float* lse_c = lse_s + st * BQ;
            const float* dd_c = dd_s + st * BQ;
            if (!KV_REGS) load_a(kf, ks + (wkey - k0) * LD, LD);
            float s[MT][BQ / 8][4];  // S^T = K·Q^T, 16*MT keys x BQ queries per warp; then P^T
            zero(s);
            mma_abt(s, kf, qc, LD);
            const bool mask = q0 < wkey + 16 * MT || q0 + BQ > T_;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int j = 0; j < BQ / 8; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int qi = 8 * j + 2 * t + (e & 1);
                        float p = fast_exp2(fmaf(s[mt][j][e], scale_log2, -lse_c[qi] * LOG2E));
                        if (mask) {
                            const int q = q0 + qi, key = wkey + 16 * mt + g + (e / 2) * 8;
                            if (key > q || q >= T_) p = 0.0f;
                        }
                        s[mt][j][e] = p;
                    }
            uint32_t pf[MT][BQ / 16][4];
            regs_to_a(pf, s);
            mma_ab(dv, pf, doc, LD);  // dV += P^T·dO

            if (!KV_REGS) load_a(vf, vs + (wkey - k0) * LD, LD);
            float dp[MT][BQ / 8][4];  // dP^T = V·dO^T; then dS^T / scale
            zero(dp);
            mma_abt(dp, vf, doc, LD);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int j = 0; j < BQ / 8; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        dp[mt][j][e] = s[mt][j][e] * (dp[mt][j][e] - dd_c[8 * j + 2 * t + (e & 1)]);
            uint32_t dsf[MT][BQ / 16][4];
            regs_to_a(dsf, dp);
            mma_ab(dk, dsf, qc, LD);  // dK += dS^T·Q (scale applied at the end)
        }
        __syncthreads();  // every warp is done with this stage before it is refilled
    }

#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int key = wkey + 16 * mt + g + 8 * r;
            if (key >= T_) continue;
            bf16* dk_g = dqkv + ((long)b * T_ + key) * C3 + C + hk * HS + 2 * t;  // dv at +KV·HS
#pragma unroll
            for (int j = 0; j < HS / 8; ++j) {
                *reinterpret_cast<uint32_t*>(dk_g + 8 * j) =
                    pack_bf16(dk[mt][j][2 * r] * scale, dk[mt][j][2 * r + 1] * scale);
                *reinterpret_cast<uint32_t*>(dk_g + (long)KV * HS + 8 * j) =
                    pack_bf16(dv[mt][j][2 * r], dv[mt][j][2 * r + 1]);
            }
        }
}

// ---------------------------------------------------------------------------------------------
// backward dQ

// Shared memory: q and dout tiles (64*MT rows); k and v tiles (BK rows) x 2 stages.
template <int HS, int MT, int BK>
constexpr size_t backward_dq_smem() {
    return sizeof(bf16) * (HS + 8) * (2 * 64 * MT + 4 * BK);
}

// dqkv (B, T_, C + 2·KV·HS): q part written; dout (B, T_, C); qkv as dqkv; lse, dd (B, NH, T_);
// grid work_grid(query tiles of 64*MT), THREADS. A warp owns 16*MT query rows; BK keys per step
// (BK divides 64).
template <int HS, int MT, int BK>
static __global__ void __launch_bounds__(THREADS)
    backward_dq_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                       const float* dd, int T_, int C, int NH, int KV, float scale,
                       bool heavy_first) {
    static_assert(64 % BK == 0 && BK % 16 == 0, "backward_dq_kernel: BK must divide 64");
    constexpr int LD = HS + 8, RQ = 64 * MT, KT = BK * LD;
    // Q and dO fragments stay in registers when they fit; otherwise they are reloaded per step
    constexpr bool QD_REGS = HS * MT <= 128;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16* qs = reinterpret_cast<bf16*>(smem);
    bf16* dos = qs + RQ * LD;
    bf16* ks = dos + RQ * LD;  // stage s at ks + s*KT
    bf16* vs = ks + 2 * KT;

    const QueryTile tile = query_tile<HS, RQ>(qkv, T_, C, NH, KV, heavy_first);
    const int h = tile.h, b = tile.b, q0 = tile.q0;
    const long C3 = tile.C3;
    const bf16 *q_g = tile.q, *k_g = tile.k, *v_g = tile.v;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const float scale_log2 = scale * LOG2E;
    const int n_k = (min(q0 + RQ, T_) - 1) / BK + 1;  // key tiles 0 .. the last one needed
    const int wrow = q0 + warp * 16 * MT;             // this warp's first row; a thread's rows are
                                                      // wrow + 16*mt + g + 8*r

    load_tile_async<HS, RQ>(qs, q_g, C3, q0, T_);
    load_tile_async<HS, RQ>(dos, dout + (long)b * T_ * C + h * HS, C, q0, T_);
    load_tile_async<HS, BK>(ks, k_g, C3, 0, T_);
    load_tile_async<HS, BK>(vs, v_g, C3, 0, T_);
    cp_async_commit();

    float lse2[MT][2], ddr[MT][2];  // lse in log2 units and D of this thread's rows
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int q = wrow + 16 * mt + g + 8 * r;
            const long i = ((long)b * NH + h) * T_ + q;
            lse2[mt][r] = q < T_ ? lse[i] * LOG2E : 0.0f;
            ddr[mt][r] = q < T_ ? dd[i] : 0.0f;
        }
    float dq[MT][HS / 8][4];
    zero(dq);
    uint32_t qf[MT][HS / 16][4], dof[MT][HS / 16][4];

    for (int kt = 0; kt < n_k; ++kt) {
        if (kt + 1 < n_k) {
            const int st = (kt + 1) & 1;
            load_tile_async<HS, BK>(ks + st * KT, k_g, C3, (kt + 1) * BK, T_);
            load_tile_async<HS, BK>(vs + st * KT, v_g, C3, (kt + 1) * BK, T_);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (QD_REGS && kt == 0) {
            load_a(qf, qs + (wrow - q0) * LD, LD);
            load_a(dof, dos + (wrow - q0) * LD, LD);
        }
        const int k0 = kt * BK;
        if (k0 < wrow + 16 * MT) {  // else every key of the tile is past every row of the warp
            const bf16* kc = ks + (kt & 1) * KT;
            const bf16* vc = vs + (kt & 1) * KT;
            if (!QD_REGS) load_a(qf, qs + (wrow - q0) * LD, LD);
            float s[MT][BK / 8][4];  // S = Q·K^T, then P
            zero(s);
            mma_abt(s, qf, kc, LD);
            if (!QD_REGS) load_a(dof, dos + (wrow - q0) * LD, LD);
            float dp[MT][BK / 8][4];  // dP = dO·V^T, then dS / scale
            zero(dp);
            mma_abt(dp, dof, vc, LD);
            const bool mask = k0 + BK > wrow;  // keys past this warp's first row (and past T_)
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int j = 0; j < BK / 8; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        float p = fast_exp2(fmaf(s[mt][j][e], scale_log2, -lse2[mt][e / 2]));
                        if (mask && k0 + 8 * j + 2 * t + (e & 1) > wrow + 16 * mt + g + (e / 2) * 8)
                            p = 0.0f;
                        dp[mt][j][e] = p * (dp[mt][j][e] - ddr[mt][e / 2]);
                    }
            uint32_t dsf[MT][BK / 16][4];
            regs_to_a(dsf, dp);
            mma_ab(dq, dsf, kc, LD);  // dQ += dS·K
        }
        __syncthreads();  // every warp is done with this stage before it is refilled
    }

#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int q = wrow + 16 * mt + g + 8 * r;
            if (q >= T_) continue;
            bf16* dq_g = dqkv + ((long)b * T_ + q) * C3 + h * HS + 2 * t;
#pragma unroll
            for (int j = 0; j < HS / 8; ++j)
                *reinterpret_cast<uint32_t*>(dq_g + 8 * j) =
                    pack_bf16(dq[mt][j][2 * r] * scale, dq[mt][j][2 * r + 1] * scale);
        }
}

// ---------------------------------------------------------------------------------------------
// launchers (shapes checked by the callers in attention.cu)

// Tile configuration per head size: MT row tiles of 16 per warp, keys (forward, dQ) or queries
// (dK/dV) per step, launch order. Measured on an H200 at B=16, T=1024, NH=12, hs 64 (ms):
//   forward  MT 1, 64 keys 0.140; MT 2, 64 keys 0.133; heavy_first: 0.127 and 0.121;
//            MT 2, 32 keys 0.150; MT 1, 128 keys 0.151
//   dK/dV    MT 1, 64 queries 0.243; MT 2, 32 queries 0.254; heavy_first: 0.237 and 0.227;
//            MT 1, 32 queries 0.278; dP^T issued before P^T's exponentials 0.235
//   dQ       MT 1, 64 keys 0.183; heavy_first: 0.170; MT 2, 32 keys 0.176, 0.166 with Q and
//            dO fragments held in registers
// hs 32: forward MT 2 0.075 (MT 1 0.079); dQ MT 2 0.100 (MT 1, 64 keys 0.112).
// hs 128 (C=1536): dQ 0.385 -> 0.347 with Q and dO fragments held in registers.
// MT 2 holds twice the accumulators: HS 128 stays at MT 1 (and 32-row steps) to fit in 255
// registers. dK/dV at HS 64, MT 2 spills 56 bytes per thread (ptxas -v) and is still the fastest.
template <int HS>
struct Tiles {
    static constexpr int fwd_mt = HS > 64 ? 1 : 2, fwd_bn = 64;
    static constexpr int dkv_mt = HS > 64 ? 1 : 2, dkv_bq = 32;
    // dK/dV over a grid of about one wave (dkv_grid_is_small)
    static constexpr int dkv_small_mt = 1, dkv_small_bq = HS > 64 ? 32 : 64;
    static constexpr int dq_mt = HS > 64 ? 1 : 2, dq_bk = 32;
    static constexpr bool heavy_first = true;
};

// Whether `blocks` blocks of `kernel` (THREADS threads, smem bytes) make fewer than one and a half
// waves on the current device. A dK/dV block walks every query head of its kv head, and its key
// tile's work falls with the tile's index (causal): with grouped-query heads over few kv heads
// (Qwen2.5: 14 over 2) or small batches the grid is about one wave, paced by its heaviest blocks,
// and 64-key tiles (twice the blocks, each half the work) with 64-query steps run faster.
// Measured on an H200 (bench/kernels_cuda --attention, backward ms, 128-key / 64-key tiles, the
// 128-key grid in waves of 2 blocks per SM): SmolLM-135M B4 T2048 (0.7 waves) 0.429 / 0.318,
// Llama-3.2-1B B2 (1.0) 0.644 / 0.487, Qwen2.5-0.5B B8 (1.0) 1.107 / 0.836, GPT-2 B4 T1024 (1.5)
// 0.124 / 0.123; from about two waves the 128-key tiles are ahead: Qwen2.5-0.5B B16 (1.9) 1.607 /
// 1.662, SmolLM-135M B16 (2.9) 1.086 / 1.082, Llama-3.2-1B B8 (3.9) 1.848 / 1.892, GPT-2 B16
// (5.8) 0.427 / 0.440.
template <typename Kernel>
static bool dkv_grid_is_small(Kernel kernel, size_t smem, long blocks) {
    int dev = 0, sms = 0, per_sm = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, smem));
    return 2 * blocks < 3L * sms * std::max(per_sm, 1);
}

// Launches one of the tiled kernels over work_grid(tiles, NH, B) with Threads threads (THREADS
// here; att_wgmma's kernels run whole warpgroups): its dynamic shared memory raised to smem,
// heavy_first passed as the last argument.
template <int Threads = THREADS, typename Kernel, typename... Args>
static void launch_tiles(const char* name, Kernel kernel, size_t smem, int tiles, int B, int NH,
                         bool heavy_first, cudaStream_t s, Args... args) {
    CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kernel<<<work_grid(tiles, NH, B, heavy_first), Threads, smem, s>>>(args..., heavy_first);
    CUDA_CHECK_LAUNCH(name);
}

template <int HS, int MT = Tiles<HS>::fwd_mt, int BN = Tiles<HS>::fwd_bn>
static void forward(bf16* out, float* lse, const bf16* qkv, int B, int T_, int C, int NH, int KV,
                    cudaStream_t s, bool heavy_first = Tiles<HS>::heavy_first) {
    launch_tiles("att_mma::forward_kernel", forward_kernel<HS, MT, BN>, forward_smem<HS, MT, BN>(),
                 ceil_div(T_, 64 * MT), B, NH, heavy_first, s, out, lse, qkv, T_, C, NH, KV,
                 1.0f / sqrtf((float)HS));
}

// dqkv's k and v parts; dd (B, NH, T_) = rowsum(dout ∘ out) per head, already computed on s.
template <int HS, int MT = Tiles<HS>::dkv_mt, int BQ = Tiles<HS>::dkv_bq>
static void backward_dkv(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                         const float* dd, int B, int T_, int C, int NH, int KV, cudaStream_t s,
                         bool heavy_first = Tiles<HS>::heavy_first) {
    launch_tiles("att_mma::backward_dkv_kernel", backward_dkv_kernel<HS, MT, BQ>,
                 backward_dkv_smem<HS, MT, BQ>(), ceil_div(T_, 64 * MT), B, KV, heavy_first, s,
                 dqkv, dout, qkv, lse, dd, T_, C, NH, KV, 1.0f / sqrtf((float)HS));
}

// dqkv's q part, as backward_dkv.
template <int HS, int MT = Tiles<HS>::dq_mt, int BK = Tiles<HS>::dq_bk>
static void backward_dq(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                        const float* dd, int B, int T_, int C, int NH, int KV, cudaStream_t s,
                        bool heavy_first = Tiles<HS>::heavy_first) {
    launch_tiles("att_mma::backward_dq_kernel", backward_dq_kernel<HS, MT, BK>,
                 backward_dq_smem<HS, MT, BK>(), ceil_div(T_, 64 * MT), B, NH, heavy_first, s, dqkv,
                 dout, qkv, lse, dd, T_, C, NH, KV, 1.0f / sqrtf((float)HS));
}

// dd (B, NH, T_) = rowsum(dout ∘ out) per head; dout, out (B, T_, C) with C = NH*HS; rows =
// B*T_*NH. HS/8 threads per (b, t, h), 8 elements each (one 16-byte load where VEC).
template <int HS, bool VEC>
static __global__ void backward_dd_kernel(float* dd, const bf16* dout, const bf16* out, int T_,
                                          int NH, long rows) {
    constexpr int LANES = HS / 8;
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const long row = i / LANES;  // (b*T_ + t)*NH + h: elements row*HS + 8*lane .. of dout, out
    float sum = 0.0f;
    if (row < rows) {
        const long off = i * 8;
        if constexpr (VEC) {
            const int4 x = *reinterpret_cast<const int4*>(dout + off);
            const int4 y = *reinterpret_cast<const int4*>(out + off);
            const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&x);
            const __nv_bfloat162* yp = reinterpret_cast<const __nv_bfloat162*>(&y);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float2 a = __bfloat1622float2(xp[k]), c = __bfloat1622float2(yp[k]);
                sum = fmaf(a.x, c.x, fmaf(a.y, c.y, sum));
            }
        } else {
#pragma unroll
            for (int k = 0; k < 8; ++k)
                sum = fmaf(__bfloat162float(dout[off + k]), __bfloat162float(out[off + k]), sum);
        }
    }
#pragma unroll
    for (int o = LANES / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (row < rows && i % LANES == 0) {
        const int h = (int)(row % NH);
        const long bt = row / NH;
        dd[((long)(bt / T_) * NH + h) * T_ + bt % T_] = sum;
    }
}

template <int HS>
static void backward_dd(float* dd, const bf16* dout, const bf16* out, int B, int T_, int NH,
                        cudaStream_t s) {
    const long rows = (long)B * T_ * NH;
    const int block = 256;  // a multiple of HS/8: a row's threads share a warp
    const int grid = ceil_div(rows * (HS / 8), block);
    if (aligned16(dout) && aligned16(out))
        backward_dd_kernel<HS, true><<<grid, block, 0, s>>>(dd, dout, out, T_, NH, rows);
    else
        backward_dd_kernel<HS, false><<<grid, block, 0, s>>>(dd, dout, out, T_, NH, rows);
    CUDA_CHECK_LAUNCH("att_mma::backward_dd_kernel");
}

// dqkv (B, T_, C + 2·KV·HS) overwritten; dd (B, NH, T_) scratch, filled here.
template <int HS>
static void backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out,
                     const float* lse, float* dd, int B, int T_, int C, int NH, int KV,
                     cudaStream_t s) {
    backward_dd<HS>(dd, dout, out, B, T_, NH, s);
    using Tl = Tiles<HS>;
    const bool small = dkv_grid_is_small(backward_dkv_kernel<HS, Tl::dkv_mt, Tl::dkv_bq>,
                                         backward_dkv_smem<HS, Tl::dkv_mt, Tl::dkv_bq>(),
                                         ceil_div(T_, 64 * Tl::dkv_mt) * KV * B);
    if (Tl::dkv_small_mt != Tl::dkv_mt && small)
        backward_dkv<HS, Tl::dkv_small_mt, Tl::dkv_small_bq>(dqkv, dout, qkv, lse, dd, B, T_, C, NH,
                                                             KV, s);
    else
        backward_dkv<HS>(dqkv, dout, qkv, lse, dd, B, T_, C, NH, KV, s);
    backward_dq<HS>(dqkv, dout, qkv, lse, dd, B, T_, C, NH, KV, s);
}

}  // namespace att_mma
}  // namespace tessera
