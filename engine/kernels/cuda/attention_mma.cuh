// The bf16 path of the fused causal attention (attention.cu): FlashAttention-2 style kernels on
// raw tensor-core instructions (mma.sync m16n8k16 bf16 with fp32 accumulation, ldmatrix, cp.async).
// Include from attention.cu only (static device code; sm_80+).
//
// Layouts follow attention.cuh: qkv (B, T, 3C) [q | k | v], head h at columns h*HS .. of each part.
// Every kernel runs 4 warps (128 threads); a warp owns 16 rows of its block's row tile (queries,
// or keys in the dK/dV pass) and keeps its score tile, probabilities and output accumulators in
// registers. The m16n8k16 accumulator of two adjacent 8-column tiles has exactly the register
// layout of a 16x16 A operand, so probabilities feed the next product without a trip through
// shared memory (regs_to_a). Shared-memory tiles are row-major with HS + 8 elements per row:
// a row pitch that is an odd multiple of 16 bytes keeps ldmatrix free of bank conflicts.
//   forward: one block per 64-query tile; key tiles of 64 are double-buffered with cp.async; an
//            online softmax (running max and partial sums per row in registers); only the
//            diagonal tile is masked, tiles above it are skipped.
//   backward dK/dV: one block per 64-key tile; it walks the query tiles from the diagonal down,
//            computes S^T = K·Q^T directly (a warp owns keys), P^T, dV += P^T·dO,
//            dP^T = V·dO^T, dS^T, dK += dS^T·Q. No cross-warp traffic.
//   backward dQ: one block per 64-query tile over key tiles 0 .. diagonal: S, dP, dS, dQ += dS·K.
//            Recomputing S and dP here instead of accumulating dQ with atomics keeps the result
//            bit-identical run to run.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "engine/kernels/cuda/cuda_common.cuh"

namespace tessera {
namespace att_mma {

constexpr int THREADS = 128;  // 4 warps, 16 rows each
constexpr int ROWS = 64;      // rows of the tile a block owns (queries, or keys in dK/dV)
constexpr float LOG2E = 1.4426950408889634f;

// ---------------------------------------------------------------------------------------------
// PTX wrappers

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

// 16 bytes global -> shared, asynchronously; zero-fills the destination when !valid (src must
// still be a mapped address).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
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

// c[NT][4] (16 x 8*NT) += a (16 x 16*KS) · b^T, b row-major (8*NT rows x 16*KS cols, pitch ld):
// b's rows are the output columns (S = Q·K^T with b = K).
template <int NT, int KS>
__device__ __forceinline__ void mma_abt(float (&c)[NT][4], const uint32_t (&a)[KS][4],
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
            mma_bf16(c[2 * np], a[ks], r[0], r[1]);
            mma_bf16(c[2 * np + 1], a[ks], r[2], r[3]);
        }
}

// c[NT][4] (16 x 8*NT) += a (16 x 16*KS) · b, b row-major (16*KS rows x 8*NT cols, pitch ld)
// (O = P·V with b = V).
template <int NT, int KS>
__device__ __forceinline__ void mma_ab(float (&c)[NT][4], const uint32_t (&a)[KS][4],
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
            mma_bf16(c[2 * np], a[ks], r[0], r[1]);
            mma_bf16(c[2 * np + 1], a[ks], r[2], r[3]);
        }
}

// The accumulators c (16 x 8*NT) as an A operand (16 x 8*NT) in bf16.
template <int NT>
__device__ __forceinline__ void regs_to_a(uint32_t (&a)[NT / 2][4], const float (&c)[NT][4]) {
#pragma unroll
    for (int k = 0; k < NT / 2; ++k) {
        a[k][0] = pack_bf16(c[2 * k][0], c[2 * k][1]);
        a[k][1] = pack_bf16(c[2 * k][2], c[2 * k][3]);
        a[k][2] = pack_bf16(c[2 * k + 1][0], c[2 * k + 1][1]);
        a[k][3] = pack_bf16(c[2 * k + 1][2], c[2 * k + 1][3]);
    }
}

template <int NT>
__device__ __forceinline__ void zero(float (&c)[NT][4]) {
#pragma unroll
    for (int j = 0; j < NT; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.0f;
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
// forward

// out (B, T_, C), lse (B, NH, T_), qkv (B, T_, 3C); grid (query tiles of ROWS, NH, B), THREADS.
template <int HS>
struct FwdCfg {
    static constexpr int BN = 64;  // keys per tile
    static constexpr int LD = HS + 8;
    static constexpr size_t smem = sizeof(bf16) * LD * (ROWS + 4 * BN);  // q; k, v x 2 stages
};

template <int HS>
static __global__ void __launch_bounds__(THREADS)
    forward_kernel(bf16* out, float* lse, const bf16* qkv, int T_, int C, int NH, float scale) {
    using Cfg = FwdCfg<HS>;
    constexpr int BN = Cfg::BN, LD = Cfg::LD, KT = BN * LD;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16* qs = reinterpret_cast<bf16*>(smem);
    bf16* ks = qs + ROWS * LD;  // stage s at ks + s*KT
    bf16* vs = ks + 2 * KT;

    const int n_q = (T_ + ROWS - 1) / ROWS;
    const int qt = n_q - 1 - (int)blockIdx.x;  // the longest (last) query tiles start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int q0 = qt * ROWS;
    const long C3 = 3L * C;
    const bf16* q_g = qkv + (long)b * T_ * C3 + h * HS;
    const bf16* k_g = q_g + C;
    const bf16* v_g = q_g + 2 * C;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const float scale_log2 = scale * LOG2E;
    // key tiles 0 .. the one holding key min(q0 + ROWS, T_) - 1
    const int n_k = (min(q0 + ROWS, T_) - 1) / BN + 1;

    load_tile_async<HS, ROWS>(qs, q_g, C3, q0, T_);
    load_tile_async<HS, BN>(ks, k_g, C3, 0, T_);
    load_tile_async<HS, BN>(vs, v_g, C3, 0, T_);
    cp_async_commit();

    float o[HS / 8][4];
    zero(o);
    float m[2] = {-INFINITY, -INFINITY};  // running max of raw scores, rows g and g+8
    float l[2] = {0.0f, 0.0f};            // this thread's part of the running sum
    uint32_t qf[HS / 16][4];
    const int row0 = q0 + warp * 16 + g;  // this thread's rows: row0, row0 + 8

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
        if (kt == 0) load_a<HS / 16>(qf, qs + warp * 16 * LD, LD);
        const bf16* kc = ks + (kt & 1) * KT;
        const bf16* vc = vs + (kt & 1) * KT;

        float s[BN / 8][4];  // S = Q·K^T, 16 x BN per warp
        zero(s);
        mma_abt<BN / 8, HS / 16>(s, qf, kc, LD);
        const int k0 = kt * BN;
        if (k0 + BN > q0) {  // keys past this tile's first query: mask key > query (and >= T_)
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = k0 + 8 * j + 2 * t + (e & 1);
                    if (key > row0 + (e / 2) * 8) s[j][e] = -INFINITY;
                }
        }
        // online softmax. Every row has key 0 in tile 0, so the running max is finite from then.
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            mx[0] = fmaxf(mx[0], fmaxf(s[j][0], s[j][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[j][2], s[j][3]));
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {  // the 4 threads of a quad share a row
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        }
        float alpha[2], mref[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            alpha[r] = fast_exp2((m[r] - mx[r]) * scale_log2);  // 0 on the first tile
            m[r] = mx[r];
            mref[r] = mx[r] * scale_log2;
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                s[j][e] = fast_exp2(fmaf(s[j][e], scale_log2, -mref[e / 2]));
                l[e / 2] += s[j][e];
            }
#pragma unroll
        for (int j = 0; j < HS / 8; ++j) {
            o[j][0] *= alpha[0];
            o[j][1] *= alpha[0];
            o[j][2] *= alpha[1];
            o[j][3] *= alpha[1];
        }
        uint32_t pf[BN / 16][4];
        regs_to_a<BN / 8>(pf, s);
        mma_ab<HS / 8, BN / 16>(o, pf, vc, LD);  // O += P·V
        __syncthreads();  // every warp is done with this stage before it is refilled
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int q = row0 + 8 * r;
        if (q >= T_) continue;
        const float inv = 1.0f / l[r];
        bf16* o_g = out + ((long)b * T_ + q) * C + h * HS + 2 * t;
#pragma unroll
        for (int j = 0; j < HS / 8; ++j)
            *reinterpret_cast<uint32_t*>(o_g + 8 * j) =
                pack_bf16(o[j][2 * r] * inv, o[j][2 * r + 1] * inv);
        if (t == 0) lse[((long)b * NH + h) * T_ + q] = m[r] * scale + logf(l[r]);
    }
}

// ---------------------------------------------------------------------------------------------
// backward dK, dV

// Query rows per step: 32 for HS 128 keeps S^T, dP^T and the dK, dV accumulators in registers.
template <int HS>
struct DkvCfg {
    static constexpr int BQ = HS > 64 ? 32 : 64;
    static constexpr int LD = HS + 8;
    static constexpr int QT = BQ * LD;  // elements of a q or dout stage
    // k, v; then 2 stages of q, dout; then 2 stages of lse, dd
    static constexpr size_t smem = sizeof(bf16) * LD * (2 * ROWS + 4 * BQ) + sizeof(float) * 4 * BQ;
};

// dqkv (B, T_, 3C): k and v parts written; dout (B, T_, C); qkv (B, T_, 3C); lse, dd (B, NH, T_);
// grid (key tiles of ROWS, NH, B), THREADS.
template <int HS>
static __global__ void __launch_bounds__(THREADS)
    backward_dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                        const float* dd, int T_, int C, int NH, float scale) {
    using Cfg = DkvCfg<HS>;
    constexpr int BQ = Cfg::BQ, LD = Cfg::LD, QT = Cfg::QT;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16* ks = reinterpret_cast<bf16*>(smem);
    bf16* vs = ks + ROWS * LD;
    bf16* qs = vs + ROWS * LD;  // stage s at qs + s*QT
    bf16* dos = qs + 2 * QT;
    float* lse_s = reinterpret_cast<float*>(dos + 2 * QT);  // stage s at lse_s + s*BQ
    float* dd_s = lse_s + 2 * BQ;

    const int kt = blockIdx.x;  // key tile 0 sees the most query tiles and starts first
    const int h = blockIdx.y, b = blockIdx.z;
    const int k0 = kt * ROWS;
    const long C3 = 3L * C;
    const bf16* q_g = qkv + (long)b * T_ * C3 + h * HS;
    const bf16* do_g = dout + (long)b * T_ * C + h * HS;
    const float* lse_g = lse + ((long)b * NH + h) * T_;
    const float* dd_g = dd + ((long)b * NH + h) * T_;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const float scale_log2 = scale * LOG2E;
    const int qb0 = k0 / BQ, n_qb = (T_ + BQ - 1) / BQ;  // query tiles qb0 .. n_qb - 1

    auto load_q_stage = [&](int qb) {
        const int st = (qb - qb0) & 1;
        load_tile_async<HS, BQ>(qs + st * QT, q_g, C3, qb * BQ, T_);
        load_tile_async<HS, BQ>(dos + st * QT, do_g, C, qb * BQ, T_);
        load_rows_async<BQ>(lse_s + st * BQ, lse_g, qb * BQ, T_, 0);
        load_rows_async<BQ>(dd_s + st * BQ, dd_g, qb * BQ, T_, 64);
    };
    load_tile_async<HS, ROWS>(ks, q_g + C, C3, k0, T_);
    load_tile_async<HS, ROWS>(vs, q_g + 2 * C, C3, k0, T_);
    load_q_stage(qb0);
    cp_async_commit();

    float dk[HS / 8][4], dv[HS / 8][4];
    zero(dk);
    zero(dv);
    const int key0 = k0 + warp * 16 + g;  // this thread's keys: key0, key0 + 8
    uint32_t kf[HS / 16][4], vf[HS / 16][4];

    for (int qb = qb0; qb < n_qb; ++qb) {
        if (qb + 1 < n_qb) {
            load_q_stage(qb + 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const int st = (qb - qb0) & 1;
        const bf16* qc = qs + st * QT;
        const bf16* doc = dos + st * QT;
        const float* lse_c = lse_s + st * BQ;
        const float* dd_c = dd_s + st * BQ;
        const int q0 = qb * BQ;
        // small heads keep K, V fragments in registers; HS 128 reloads them (register budget)
        if (HS > 64 || qb == qb0) load_a<HS / 16>(kf, ks + warp * 16 * LD, LD);

        float s[BQ / 8][4];  // S^T = K·Q^T, 16 keys x BQ queries per warp; then P^T
        zero(s);
        mma_abt<BQ / 8, HS / 16>(s, kf, qc, LD);
        const bool mask = q0 < k0 + ROWS || q0 + BQ > T_;
#pragma unroll
        for (int j = 0; j < BQ / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int qi = 8 * j + 2 * t + (e & 1);
                float p = fast_exp2(fmaf(s[j][e], scale_log2, -lse_c[qi] * LOG2E));
                if (mask) {
                    const int q = q0 + qi, key = key0 + (e / 2) * 8;
                    if (key > q || q >= T_) p = 0.0f;
                }
                s[j][e] = p;
            }
        uint32_t pf[BQ / 16][4];
        regs_to_a<BQ / 8>(pf, s);
        mma_ab<HS / 8, BQ / 16>(dv, pf, doc, LD);  // dV += P^T·dO

        if (HS > 64 || qb == qb0) load_a<HS / 16>(vf, vs + warp * 16 * LD, LD);
        float dp[BQ / 8][4];  // dP^T = V·dO^T; then dS^T / scale
        zero(dp);
        mma_abt<BQ / 8, HS / 16>(dp, vf, doc, LD);
#pragma unroll
        for (int j = 0; j < BQ / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) dp[j][e] = s[j][e] * (dp[j][e] - dd_c[8 * j + 2 * t + (e & 1)]);
        uint32_t dsf[BQ / 16][4];
        regs_to_a<BQ / 8>(dsf, dp);
        mma_ab<HS / 8, BQ / 16>(dk, dsf, qc, LD);  // dK += dS^T·Q (scale applied at the end)
        __syncthreads();  // every warp is done with this stage before it is refilled
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int key = key0 + 8 * r;
        if (key >= T_) continue;
        bf16* dk_g = dqkv + ((long)b * T_ + key) * C3 + C + h * HS + 2 * t;  // dv at +C
#pragma unroll
        for (int j = 0; j < HS / 8; ++j) {
            *reinterpret_cast<uint32_t*>(dk_g + 8 * j) =
                pack_bf16(dk[j][2 * r] * scale, dk[j][2 * r + 1] * scale);
            *reinterpret_cast<uint32_t*>(dk_g + C + 8 * j) = pack_bf16(dv[j][2 * r], dv[j][2 * r + 1]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// backward dQ

// Keys per step: 32 for HS 128 (register budget, as DkvCfg).
template <int HS>
struct DqCfg {
    static constexpr int BK = HS > 64 ? 32 : 64;
    static constexpr int LD = HS + 8;
    static constexpr int KT = BK * LD;
    static constexpr size_t smem = sizeof(bf16) * LD * (2 * ROWS + 4 * BK);  // q, dout; k, v x 2
};

// dqkv (B, T_, 3C): q part written; dout (B, T_, C); qkv (B, T_, 3C); lse, dd (B, NH, T_);
// grid (query tiles of ROWS, NH, B), THREADS.
template <int HS>
static __global__ void __launch_bounds__(THREADS)
    backward_dq_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                       const float* dd, int T_, int C, int NH, float scale) {
    using Cfg = DqCfg<HS>;
    constexpr int BK = Cfg::BK, LD = Cfg::LD, KT = Cfg::KT;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16* qs = reinterpret_cast<bf16*>(smem);
    bf16* dos = qs + ROWS * LD;
    bf16* ks = dos + ROWS * LD;  // stage s at ks + s*KT
    bf16* vs = ks + 2 * KT;

    const int n_q = (T_ + ROWS - 1) / ROWS;
    const int qt = n_q - 1 - (int)blockIdx.x;  // the longest (last) query tiles start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int q0 = qt * ROWS;
    const long C3 = 3L * C;
    const bf16* q_g = qkv + (long)b * T_ * C3 + h * HS;
    const bf16* k_g = q_g + C;
    const bf16* v_g = q_g + 2 * C;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const float scale_log2 = scale * LOG2E;
    const int n_k = (min(q0 + ROWS, T_) - 1) / BK + 1;  // key tiles 0 .. the last one needed
    const int row0 = q0 + warp * 16 + g;                // this thread's rows: row0, row0 + 8

    load_tile_async<HS, ROWS>(qs, q_g, C3, q0, T_);
    load_tile_async<HS, ROWS>(dos, dout + (long)b * T_ * C + h * HS, C, q0, T_);
    load_tile_async<HS, BK>(ks, k_g, C3, 0, T_);
    load_tile_async<HS, BK>(vs, v_g, C3, 0, T_);
    cp_async_commit();

    float lse2[2], ddr[2];  // lse in log2 units and D of this thread's rows
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int q = row0 + 8 * r;
        const long i = ((long)b * NH + h) * T_ + q;
        lse2[r] = q < T_ ? lse[i] * LOG2E : 0.0f;
        ddr[r] = q < T_ ? dd[i] : 0.0f;
    }
    float dq[HS / 8][4];
    zero(dq);
    uint32_t qf[HS / 16][4], dof[HS / 16][4];

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
        if (kt == 0) {
            load_a<HS / 16>(qf, qs + warp * 16 * LD, LD);
            load_a<HS / 16>(dof, dos + warp * 16 * LD, LD);
        }
        const bf16* kc = ks + (kt & 1) * KT;
        const bf16* vc = vs + (kt & 1) * KT;
        const int k0 = kt * BK;

        float s[BK / 8][4];  // S = Q·K^T, then P
        zero(s);
        mma_abt<BK / 8, HS / 16>(s, qf, kc, LD);
        float dp[BK / 8][4];  // dP = dO·V^T, then dS / scale
        zero(dp);
        mma_abt<BK / 8, HS / 16>(dp, dof, vc, LD);
        const bool mask = k0 + BK > q0;  // keys past this tile's first query (and past T_)
#pragma unroll
        for (int j = 0; j < BK / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float p = fast_exp2(fmaf(s[j][e], scale_log2, -lse2[e / 2]));
                if (mask && k0 + 8 * j + 2 * t + (e & 1) > row0 + (e / 2) * 8) p = 0.0f;
                dp[j][e] = p * (dp[j][e] - ddr[e / 2]);
            }
        uint32_t dsf[BK / 16][4];
        regs_to_a<BK / 8>(dsf, dp);
        mma_ab<HS / 8, BK / 16>(dq, dsf, kc, LD);  // dQ += dS·K
        __syncthreads();  // every warp is done with this stage before it is refilled
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int q = row0 + 8 * r;
        if (q >= T_) continue;
        bf16* dq_g = dqkv + ((long)b * T_ + q) * C3 + h * HS + 2 * t;
#pragma unroll
        for (int j = 0; j < HS / 8; ++j)
            *reinterpret_cast<uint32_t*>(dq_g + 8 * j) =
                pack_bf16(dq[j][2 * r] * scale, dq[j][2 * r + 1] * scale);
    }
}

// ---------------------------------------------------------------------------------------------
// launchers (shapes checked by the callers in attention.cu)

template <typename Kernel>
static void set_smem(Kernel kernel, size_t bytes) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

template <int HS>
static void forward(bf16* out, float* lse, const bf16* qkv, int B, int T_, int C, int NH,
                    cudaStream_t s) {
    auto kernel = forward_kernel<HS>;
    set_smem(kernel, FwdCfg<HS>::smem);
    const dim3 grid(ceil_div(T_, ROWS), NH, B);
    kernel<<<grid, THREADS, FwdCfg<HS>::smem, s>>>(out, lse, qkv, T_, C, NH, 1.0f / sqrtf((float)HS));
    CUDA_CHECK_LAUNCH("attention forward_kernel (bf16 mma)");
}

// dd (B, NH, T_) = rowsum(dout ∘ out) per head, already computed on s.
template <int HS>
static void backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                     const float* dd, int B, int T_, int C, int NH, cudaStream_t s) {
    const dim3 grid(ceil_div(T_, ROWS), NH, B);
    const float scale = 1.0f / sqrtf((float)HS);
    auto dkv = backward_dkv_kernel<HS>;
    set_smem(dkv, DkvCfg<HS>::smem);
    dkv<<<grid, THREADS, DkvCfg<HS>::smem, s>>>(dqkv, dout, qkv, lse, dd, T_, C, NH, scale);
    CUDA_CHECK_LAUNCH("attention backward_dkv_kernel (bf16 mma)");
    auto dq = backward_dq_kernel<HS>;
    set_smem(dq, DqCfg<HS>::smem);
    dq<<<grid, THREADS, DqCfg<HS>::smem, s>>>(dqkv, dout, qkv, lse, dd, T_, C, NH, scale);
    CUDA_CHECK_LAUNCH("attention backward_dq_kernel (bf16 mma)");
}

}  // namespace att_mma
}  // namespace tessera
