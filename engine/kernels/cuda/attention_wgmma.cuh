// The Hopper kernels of the fused causal attention (attention.cu), head size 64: warpgroup
// tensor-core products (wgmma.mma_async, sm_90a) instead of att_mma's per-warp mma.sync, which
// run at about half the H200's dense bf16 rate. Include from attention.cu only.
//
// Layouts follow attention.cuh: qkv (B, T, C + 2·KV·64) [q | k | v]; query head h reads kv head
// h / (NH / KV). The kernels keep att_mma's structure and work order (its comment says it): the
// forward's online softmax, a backward of two passes (dK/dV per key tile over the group's query
// heads, then dQ per query tile), recomputing S and dP in both rather than adding dQ with atomics,
// so the results are bit-identical run to run. A warpgroup (4 warps, 128 threads) owns 64 rows of
// its block's tile; its products read Q, K, V and dO tiles from shared memory, and take softmax
// results (P, P^T, dS, dS^T) as A operands straight from registers: a wgmma accumulator has, per
// warp, exactly the m16n8k16 layout pack_a turns into A operands. A product whose B operand is a
// tile indexed by the reduction (P·V, P^T·dO, dS^T·Q, dS·K) reads it N-major (transposed).
// Every shared tile is rows of 64 bf16 (128 bytes) in the 128-byte swizzle wgmma reads: the
// 16-byte chunk c of row r sits at chunk c ^ (r % 8) of its row, rows in 1024-byte groups of 8,
// filled with cp.async (double-buffered) and handed to the products' async proxy by
// fence.proxy.async. Not bit-identical to att_mma's results (another summation order).
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "engine/kernels/cuda/attention_mma.cuh"

namespace tessera {
namespace att_wgmma {

using att_mma::fast_exp2;
using att_mma::LOG2E;
using att_mma::pack_bf16;

constexpr int HS = 64;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TESSERA_WGMMA_DEVICE 1
#endif

// ---------------------------------------------------------------------------------------------
// PTX wrappers (sm_90a). The accumulator registers d[4j + e] hold, in warp w of the warpgroup,
// lane 4g + t: e 0, 1 -> row 16w + g, columns 8j + 2t, +1; e 2, 3 -> row 16w + g + 8, same columns.

// Shared-memory matrix descriptor: 128-byte swizzle, start and stride (between 8-row groups)
// in bytes; the leading offset (between 64-column blocks of an N-major operand) likewise.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lead, uint32_t stride) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | (uint64_t)((lead & 0x3FFFF) >> 4) << 16 |
           (uint64_t)((stride & 0x3FFFF) >> 4) << 32 | (uint64_t)1 << 62;
}

#ifdef TESSERA_WGMMA_DEVICE
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Generic-proxy writes to shared memory (cp.async) made visible to wgmma's async proxy.
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving an accumulator across the asynchronous products.
template <int N>
__device__ __forceinline__ void pin(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (64 x 32 fp32, the accumulator layout) (+)= A (64 x 16, smem descriptor) . B (32 x 16 K-major
// smem descriptor); scale_d 0 overwrites d.
template <int TRANS_B>
__device__ __forceinline__ void wgmma_ss_n32(float (&d)[16], uint64_t a, uint64_t b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
        "%9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, %19;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15])
        : "l"(a), "l"(b), "r"(scale_d), "n"(TRANS_B));
}

// d (64 x 64 fp32, the accumulator layout) (+)= A (64 x 16, smem descriptor) . B (64 x 16 K-major
// smem descriptor); scale_d 0 overwrites d.
template <int TRANS_B>
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], uint64_t a, uint64_t b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
        "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
        "%27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, %35;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(a), "l"(b), "r"(scale_d), "n"(TRANS_B));
}

// d (64 x 128 fp32, the accumulator layout) (+)= A (64 x 16, smem descriptor) . B (128 x 16 K-major
// smem descriptor); scale_d 0 overwrites d.
template <int TRANS_B>
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t a, uint64_t b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, "
        "%8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, "
        "%26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
        "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
        "%62, %63}, %64, %65, p, 1, 1, 0, %67;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63])
        : "l"(a), "l"(b), "r"(scale_d), "n"(TRANS_B));
}

// d (64 x 64 fp32) += A (64 x 16 bf16 in registers, the m16n8k16 A layout per warp) . B (16 x 64,
// smem descriptor; TRANS_B 1: B stored N-major).
template <int TRANS_B>
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
        "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
        "%27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(TRANS_B));
}

template <int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, int scale_d) {
    if constexpr (N == 32)
        wgmma_ss_n32<0>(d, a, b, scale_d);
    else if constexpr (N == 64)
        wgmma_ss_n64<0>(d, a, b, scale_d);
    else
        wgmma_ss_n128<0>(d, a, b, scale_d);
}

// The accumulator d (64 x N) in bf16 as the A operands of N/16 products of 16 columns each
// (per warp, the m16n8k16 A layout).
template <int N>
__device__ __forceinline__ void pack_a(uint32_t (&a)[N / 16][4], const float (&d)[N / 2]) {
#pragma unroll
    for (int k = 0; k < N / 16; ++k) {
        a[k][0] = pack_bf16(d[8 * k], d[8 * k + 1]);
        a[k][1] = pack_bf16(d[8 * k + 2], d[8 * k + 3]);
        a[k][2] = pack_bf16(d[8 * k + 4], d[8 * k + 5]);
        a[k][3] = pack_bf16(d[8 * k + 6], d[8 * k + 7]);
    }
}
#endif  // TESSERA_WGMMA_DEVICE

// dst (R rows x 64, swizzled) = rows row0 .. row0+R of src (row stride src_ld), zero past T_,
// asynchronously (the caller commits and waits); all THREADS threads.
template <int R, int THREADS>
__device__ __forceinline__ void load_tile_swizzled(bf16* dst, const bf16* src, long src_ld,
                                                   int row0, int T_) {
    for (int i = threadIdx.x; i < R * 8; i += THREADS) {
        const int r = i / 8, c = i % 8;
        const bool valid = row0 + r < T_;
        cp_async16(dst + r * 64 + ((c ^ (r % 8)) * 8),
                   src + (long)(valid ? row0 + r : 0) * src_ld + c * 8, valid);
    }
}

// The swizzle pattern repeats every 1024 bytes and the descriptors assume it starts at the tile:
// every kernel's tiles start at its dynamic shared memory rounded up to 1024 bytes (each smem
// size below asks for SMEM_ALIGN more), and every tile is a whole number of 8-row groups.
constexpr size_t SMEM_ALIGN = 1024;
__device__ __forceinline__ bf16* tile_base(unsigned char* smem_raw) {
    return reinterpret_cast<bf16*>((reinterpret_cast<uintptr_t>(smem_raw) + SMEM_ALIGN - 1) &
                                   ~uintptr_t(SMEM_ALIGN - 1));
}

template <int BN, int RQ>
constexpr size_t forward_smem() {
    return sizeof(bf16) * 64 * (RQ + 4 * BN) + SMEM_ALIGN;
}

// out (B, T_, C), lse (B, NH, T_), qkv (B, T_, C + 2·KV·64); grid att_mma::work_grid(query tiles
// of RQ), THREADS threads.
template <int BN, int MINB, int WGS>
static __global__ void __launch_bounds__(128 * WGS, MINB)
    forward_kernel(bf16* out, float* lse, const bf16* qkv, int T_, int C, int NH, int KV,
                   float scale, bool heavy_first) {
#ifdef TESSERA_WGMMA_DEVICE
    constexpr int KT = BN * 64;  // elements of a K or V tile
    constexpr int THREADS = 128 * WGS, RQ = 64 * WGS;
    extern __shared__ unsigned char smem_raw[];
    bf16* qs = tile_base(smem_raw);
    bf16* ks = qs + RQ * 64;  // stage s at ks + s*KT
    bf16* vs = ks + 2 * KT;

    const att_mma::QueryTile tile = att_mma::query_tile<HS, RQ>(qkv, T_, C, NH, KV, heavy_first);
    const int h = tile.h, b = tile.b, q0 = tile.q0;
    const long C3 = tile.C3;
    const bf16 *q_g = tile.q, *k_g = tile.k, *v_g = tile.v;
    const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const float scale_log2 = scale * LOG2E;
    const int n_k = (min(q0 + RQ, T_) - 1) / BN + 1;  // key tiles 0 .. the last one needed
    const int wgrow = q0 + wg * 64;                   // this warpgroup's first row
    const int wrow = wgrow + warp * 16;               // this warp's; a thread's: wrow + g + 8*r

    load_tile_swizzled<RQ, THREADS>(qs, q_g, C3, q0, T_);
    load_tile_swizzled<BN, THREADS>(ks, k_g, C3, 0, T_);
    load_tile_swizzled<BN, THREADS>(vs, v_g, C3, 0, T_);
    cp_async_commit();

    float o[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) o[i] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float s[BN / 2];  // S = Q·K^T of the current key tile, then P
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) s[i] = 0.0f;
    const uint32_t q_addr = smem_addr(qs + wg * 64 * 64);

    for (int kt = 0; kt < n_k; ++kt) {
        if (kt + 1 < n_k) {  // prefetch the next K, V tile into the other stage
            const int st = (kt + 1) & 1;
            load_tile_swizzled<BN, THREADS>(ks + st * KT, k_g, C3, (kt + 1) * BN, T_);
            load_tile_swizzled<BN, THREADS>(vs + st * KT, v_g, C3, (kt + 1) * BN, T_);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        fence_proxy_async();
        __syncthreads();
        const int k0 = kt * BN;
        // Tiles wholly above this warpgroup's rows are skipped (uniform over the warpgroup).
        // Otherwise every row sees key 0 in tile 0: the running max is finite from then on.
        if (k0 < wgrow + 64) {
            const uint32_t k_addr = smem_addr(ks + (kt & 1) * KT);
            const uint32_t v_addr = smem_addr(vs + (kt & 1) * KT);
            pin(s);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < HS / 16; ++kk)  // 16 columns of Q and K: 32 bytes along a row
                wgmma_ss<BN>(s, smem_desc(q_addr + 32 * kk, 0, 1024),
                             smem_desc(k_addr + 32 * kk, 0, 1024), kk > 0);
            wgmma_commit();
            wgmma_wait<0>();
            pin(s);
            if (k0 + BN > wrow) {  // keys past this warp's first row: mask key > row (and >= T_)
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int key = k0 + 8 * j + 2 * t + (e & 1);
                        if (key > wrow + g + (e / 2) * 8) s[4 * j + e] = -INFINITY;
                    }
            }
            float mx[2] = {m[0], m[1]};  // online softmax
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
                mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
            }
            float alpha[2], mref[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {  // the 4 threads of a quad share a row
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                alpha[r] = fast_exp2((m[r] - mx[r]) * scale_log2);  // 0 on the first tile
                m[r] = mx[r];
                mref[r] = mx[r] * scale_log2;
                l[r] *= alpha[r];
            }
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    s[4 * j + e] = fast_exp2(fmaf(s[4 * j + e], scale_log2, -mref[e / 2]));
                    l[e / 2] += s[4 * j + e];
                }
#pragma unroll
            for (int j = 0; j < HS / 8; ++j) {
                o[4 * j] *= alpha[0];
                o[4 * j + 1] *= alpha[0];
                o[4 * j + 2] *= alpha[1];
                o[4 * j + 3] *= alpha[1];
            }
            uint32_t pf[BN / 16][4];  // P as A operands, 16 keys each
            pack_a<BN>(pf, s);
            pin(o);
            wgmma_fence();
#pragma unroll
            for (int k = 0; k < BN / 16; ++k)  // 16 keys of V: two 8-row groups, 2048 bytes
                wgmma_rs_n64<1>(o, pf[k], smem_desc(v_addr + 2048 * k, 64 * 128, 1024));
            wgmma_commit();
            wgmma_wait<0>();
            pin(o);
        }
        __syncthreads();  // every warpgroup is done with this stage before it is refilled
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float sum = l[r];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const int q = wrow + g + 8 * r;
        if (q >= T_) continue;
        const float inv = 1.0f / sum;
        bf16* o_g = out + ((long)b * T_ + q) * C + h * HS + 2 * t;
#pragma unroll
        for (int j = 0; j < HS / 8; ++j)
            *reinterpret_cast<uint32_t*>(o_g + 8 * j) =
                pack_bf16(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
        if (t == 0) lse[((long)b * NH + h) * T_ + q] = m[r] * scale + logf(sum);
    }
#else
    __trap();  // launched only where attention_wgmma_available() says so
#endif
}

// Whether this build and the current device run the wgmma kernels: compiled for sm_90a, a
// compute capability 9.0 device, and TESSERA_ATTENTION_KERNELS is not "mma" (which keeps the
// mma.sync kernels, for comparisons).
inline bool available() {
#ifdef TESSERA_CUDA_SM90A
    static const bool ok = [] {
        const char* pick = std::getenv("TESSERA_ATTENTION_KERNELS");
        if (pick && std::string(pick) == "mma") return false;
        int dev = 0, major = 0, minor = 0;
        if (cudaGetDevice(&dev) != cudaSuccess) return false;
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
        return major == 9 && minor == 0;
    }();
    return ok;
#else
    return false;
#endif
}

// ---------------------------------------------------------------------------------------------
// backward (dd = rowsum(dout ∘ out) comes from att_mma::backward_dd)

// Shared memory of the dK/dV pass: k and v tiles (64·WGS rows), q and dout tiles (BQ rows) x 2
// stages, then lse and dd (BQ floats) x 2 stages.
template <int BQ, int WGS>
constexpr size_t backward_dkv_smem() {
    return sizeof(bf16) * 64 * (2 * 64 * WGS + 4 * BQ) + sizeof(float) * 4 * BQ + SMEM_ALIGN;
}

// dqkv's k and v parts; grid att_mma::work_grid(key tiles of 64·WGS, KV heads), 128·WGS threads.
// A warpgroup owns 64 keys; BQ queries per step; the steps run over the group's query heads, then
// their query tiles, as att_mma::backward_dkv_kernel: S^T = K·Q^T and dP^T = V·dO^T from shared
// memory, then dV += P^T·dO and dK += dS^T·Q with P^T and dS^T from registers.
template <int BQ, int MINB, int WGS>
static __global__ void __launch_bounds__(128 * WGS, MINB)
    backward_dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                        const float* dd, int T_, int C, int NH, int KV, float scale,
                        bool heavy_first) {
#ifdef TESSERA_WGMMA_DEVICE
    static_assert(BQ <= 64 * WGS, "backward_dkv_kernel: lse and dd take a thread per query each");
    constexpr int THREADS = 128 * WGS, RK = 64 * WGS, QT = BQ * 64;
    extern __shared__ unsigned char smem_raw[];
    bf16* ks = tile_base(smem_raw);
    bf16* vs = ks + RK * 64;
    bf16* qs = vs + RK * 64;  // stage s at qs + s*QT
    bf16* dos = qs + 2 * QT;
    float* lse_s = reinterpret_cast<float*>(dos + 2 * QT);  // stage s at lse_s + s*BQ
    float* dd_s = lse_s + 2 * BQ;

    const att_mma::BlockWork w = att_mma::block_work(KV, heavy_first);
    const int hk = w.h, b = w.b, G = NH / KV;  // the kv head and its query heads' count
    const int k0 = w.rank * RK;                // key tile 0 sees the most query tiles
    const long C3 = C + 2L * KV * HS;          // the row stride
    const bf16* k_g = qkv + (long)b * T_ * C3 + C + hk * HS;
    const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const float scale_log2 = scale * LOG2E;
    const int qb0 = k0 / BQ, n_qb = (T_ + BQ - 1) / BQ;  // query tiles qb0 .. n_qb - 1
    const int nq = n_qb - qb0, n_steps = G * nq;  // step i: query head hk*G + i / nq, tile i % nq
    const int wgkey = k0 + wg * 64;               // this warpgroup's first key
    const int wkey = wgkey + warp * 16;           // this warp's; a thread's: wkey + g + 8*r

    auto load_q_stage = [&](int i) {
        const int st = i & 1, h = hk * G + i / nq, qb = qb0 + i % nq;
        load_tile_swizzled<BQ, THREADS>(qs + st * QT, qkv + (long)b * T_ * C3 + h * HS, C3, qb * BQ,
                                        T_);
        load_tile_swizzled<BQ, THREADS>(dos + st * QT, dout + (long)b * T_ * C + h * HS, C, qb * BQ,
                                        T_);
        att_mma::load_rows_async<BQ>(lse_s + st * BQ, lse + ((long)b * NH + h) * T_, qb * BQ, T_,
                                     0);
        att_mma::load_rows_async<BQ>(dd_s + st * BQ, dd + ((long)b * NH + h) * T_, qb * BQ, T_,
                                     THREADS / 2);
    };
    load_tile_swizzled<RK, THREADS>(ks, k_g, C3, k0, T_);
    load_tile_swizzled<RK, THREADS>(vs, k_g + (long)KV * HS, C3, k0, T_);
    load_q_stage(0);
    cp_async_commit();

    float dk[32], dv[32], s[BQ / 2], dp[BQ / 2];
#pragma unroll
    for (int i = 0; i < 32; ++i) dk[i] = dv[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < BQ / 2; ++i) s[i] = dp[i] = 0.0f;
    const uint32_t k_addr = smem_addr(ks + wg * 64 * 64);
    const uint32_t v_addr = smem_addr(vs + wg * 64 * 64);

    for (int i = 0; i < n_steps; ++i) {
        const int qb = qb0 + i % nq;
        if (i + 1 < n_steps) {
            load_q_stage(i + 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        fence_proxy_async();
        __syncthreads();
        const int q0 = qb * BQ;
        if (wgkey < q0 + BQ) {  // else every key of this warpgroup is past every query: P = 0
            const int st = i & 1;
            const uint32_t q_addr = smem_addr(qs + st * QT);
            const uint32_t do_addr = smem_addr(dos + st * QT);
            const float* lse_c = lse_s + st * BQ;
            const float* dd_c = dd_s + st * BQ;
            pin(s);
            pin(dp);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < HS / 16; ++kk)  // S^T = K·Q^T
                wgmma_ss<BQ>(s, smem_desc(k_addr + 32 * kk, 0, 1024),
                             smem_desc(q_addr + 32 * kk, 0, 1024), kk > 0);
#pragma unroll
            for (int kk = 0; kk < HS / 16; ++kk)  // dP^T = V·dO^T
                wgmma_ss<BQ>(dp, smem_desc(v_addr + 32 * kk, 0, 1024),
                             smem_desc(do_addr + 32 * kk, 0, 1024), kk > 0);
            wgmma_commit();
            wgmma_wait<0>();
            pin(s);
            pin(dp);
            const bool mask = q0 < wgkey + 64 || q0 + BQ > T_;
#pragma unroll
            for (int j = 0; j < BQ / 8; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int qi = 8 * j + 2 * t + (e & 1);
                    float p = fast_exp2(fmaf(s[4 * j + e], scale_log2, -lse_c[qi] * LOG2E));
                    if (mask) {
                        const int q = q0 + qi, key = wkey + g + (e / 2) * 8;
                        if (key > q || q >= T_) p = 0.0f;
                    }
                    s[4 * j + e] = p;
                    dp[4 * j + e] = p * (dp[4 * j + e] - dd_c[qi]);  // dS^T / scale
                }
            uint32_t pf[BQ / 16][4], dsf[BQ / 16][4];
            pack_a<BQ>(pf, s);
            pack_a<BQ>(dsf, dp);
            pin(dv);
            pin(dk);
            wgmma_fence();
#pragma unroll
            for (int k = 0; k < BQ / 16; ++k)  // dV += P^T·dO (16 queries of dO: 2048 bytes)
                wgmma_rs_n64<1>(dv, pf[k], smem_desc(do_addr + 2048 * k, 64 * 128, 1024));
#pragma unroll
            for (int k = 0; k < BQ / 16; ++k)  // dK += dS^T·Q
                wgmma_rs_n64<1>(dk, dsf[k], smem_desc(q_addr + 2048 * k, 64 * 128, 1024));
            wgmma_commit();
            wgmma_wait<0>();
            pin(dv);
            pin(dk);
        }
        __syncthreads();  // every warpgroup is done with this stage before it is refilled
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int key = wkey + g + 8 * r;
        if (key >= T_) continue;
        bf16* dk_g = dqkv + ((long)b * T_ + key) * C3 + C + hk * HS + 2 * t;  // dv at +KV·HS
#pragma unroll
        for (int j = 0; j < HS / 8; ++j) {
            *reinterpret_cast<uint32_t*>(dk_g + 8 * j) =
                pack_bf16(dk[4 * j + 2 * r] * scale, dk[4 * j + 2 * r + 1] * scale);
            *reinterpret_cast<uint32_t*>(dk_g + (long)KV * HS + 8 * j) =
                pack_bf16(dv[4 * j + 2 * r], dv[4 * j + 2 * r + 1]);
        }
    }
#else
    __trap();  // launched only where available() says so
#endif
}

// Shared memory of the dQ pass: q and dout tiles (64·WGS rows); k and v tiles (BK rows) x 2 stages.
template <int BK, int WGS>
constexpr size_t backward_dq_smem() {
    return sizeof(bf16) * 64 * (2 * 64 * WGS + 4 * BK) + SMEM_ALIGN;
}

// dqkv's q part; grid att_mma::work_grid(query tiles of 64·WGS, NH), 128·WGS threads. A
// warpgroup owns 64 query rows; BK keys per step: S = Q·K^T and dP = dO·V^T from shared memory, dQ
// += dS·K with dS from registers. Recomputing S and dP here (no atomics) keeps dQ bit-identical run
// to run.
template <int BK, int MINB, int WGS>
static __global__ void __launch_bounds__(128 * WGS, MINB)
    backward_dq_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                       const float* dd, int T_, int C, int NH, int KV, float scale,
                       bool heavy_first) {
#ifdef TESSERA_WGMMA_DEVICE
    constexpr int THREADS = 128 * WGS, RQ = 64 * WGS, KT = BK * 64;
    extern __shared__ unsigned char smem_raw[];
    bf16* qs = tile_base(smem_raw);
    bf16* dos = qs + RQ * 64;
    bf16* ks = dos + RQ * 64;  // stage s at ks + s*KT
    bf16* vs = ks + 2 * KT;

    const att_mma::QueryTile tile = att_mma::query_tile<HS, RQ>(qkv, T_, C, NH, KV, heavy_first);
    const int h = tile.h, b = tile.b, q0 = tile.q0;
    const long C3 = tile.C3;
    const bf16 *q_g = tile.q, *k_g = tile.k, *v_g = tile.v;
    const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const float scale_log2 = scale * LOG2E;
    const int n_k = (min(q0 + RQ, T_) - 1) / BK + 1;  // key tiles 0 .. the last one needed
    const int wgrow = q0 + wg * 64;                   // this warpgroup's first row
    const int wrow = wgrow + warp * 16;               // this warp's; a thread's: wrow + g + 8*r

    load_tile_swizzled<RQ, THREADS>(qs, q_g, C3, q0, T_);
    load_tile_swizzled<RQ, THREADS>(dos, dout + (long)b * T_ * C + h * HS, C, q0, T_);
    load_tile_swizzled<BK, THREADS>(ks, k_g, C3, 0, T_);
    load_tile_swizzled<BK, THREADS>(vs, v_g, C3, 0, T_);
    cp_async_commit();

    float lse2[2], ddr[2];  // lse in log2 units and D of this thread's rows
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int q = wrow + g + 8 * r;
        const long i = ((long)b * NH + h) * T_ + q;
        lse2[r] = q < T_ ? lse[i] * LOG2E : 0.0f;
        ddr[r] = q < T_ ? dd[i] : 0.0f;
    }
    float dq[32], s[BK / 2], dp[BK / 2];
#pragma unroll
    for (int i = 0; i < 32; ++i) dq[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < BK / 2; ++i) s[i] = dp[i] = 0.0f;
    const uint32_t q_addr = smem_addr(qs + wg * 64 * 64);
    const uint32_t do_addr = smem_addr(dos + wg * 64 * 64);

    for (int kt = 0; kt < n_k; ++kt) {
        if (kt + 1 < n_k) {
            const int st = (kt + 1) & 1;
            load_tile_swizzled<BK, THREADS>(ks + st * KT, k_g, C3, (kt + 1) * BK, T_);
            load_tile_swizzled<BK, THREADS>(vs + st * KT, v_g, C3, (kt + 1) * BK, T_);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        fence_proxy_async();
        __syncthreads();
        const int k0 = kt * BK;
        if (k0 < wgrow + 64) {  // else every key of the tile is past every row of the warpgroup
            const uint32_t k_addr = smem_addr(ks + (kt & 1) * KT);
            const uint32_t v_addr = smem_addr(vs + (kt & 1) * KT);
            pin(s);
            pin(dp);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < HS / 16; ++kk)  // S = Q·K^T
                wgmma_ss<BK>(s, smem_desc(q_addr + 32 * kk, 0, 1024),
                             smem_desc(k_addr + 32 * kk, 0, 1024), kk > 0);
#pragma unroll
            for (int kk = 0; kk < HS / 16; ++kk)  // dP = dO·V^T
                wgmma_ss<BK>(dp, smem_desc(do_addr + 32 * kk, 0, 1024),
                             smem_desc(v_addr + 32 * kk, 0, 1024), kk > 0);
            wgmma_commit();
            wgmma_wait<0>();
            pin(s);
            pin(dp);
            const bool mask = k0 + BK > wrow;  // keys past this warp's first row (and past T_)
#pragma unroll
            for (int j = 0; j < BK / 8; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    float p = fast_exp2(fmaf(s[4 * j + e], scale_log2, -lse2[e / 2]));
                    if (mask && k0 + 8 * j + 2 * t + (e & 1) > wrow + g + (e / 2) * 8) p = 0.0f;
                    dp[4 * j + e] = p * (dp[4 * j + e] - ddr[e / 2]);  // dS / scale
                }
            uint32_t dsf[BK / 16][4];
            pack_a<BK>(dsf, dp);
            pin(dq);
            wgmma_fence();
#pragma unroll
            for (int k = 0; k < BK / 16; ++k)  // dQ += dS·K (16 keys of K: 2048 bytes)
                wgmma_rs_n64<1>(dq, dsf[k], smem_desc(k_addr + 2048 * k, 64 * 128, 1024));
            wgmma_commit();
            wgmma_wait<0>();
            pin(dq);
        }
        __syncthreads();  // every warpgroup is done with this stage before it is refilled
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int q = wrow + g + 8 * r;
        if (q >= T_) continue;
        bf16* dq_g = dqkv + ((long)b * T_ + q) * C3 + h * HS + 2 * t;
#pragma unroll
        for (int j = 0; j < HS / 8; ++j)
            *reinterpret_cast<uint32_t*>(dq_g + 8 * j) =
                pack_bf16(dq[4 * j + 2 * r] * scale, dq[4 * j + 2 * r + 1] * scale);
    }
#else
    __trap();  // launched only where available() says so
#endif
}

// As att_mma::forward<64>. Tiles: BN keys per step, MINB blocks per SM, WGS warpgroups (64
// query rows each) per block. Measured on an H200 (bench/kernels_cuda --attention, forward ms at
// SmolLM-135M B16 T2048, 9/3 heads; mma.sync kernels 0.302): BN 128, 2 warpgroups, 2 blocks per
// SM (128 registers, 24 bytes spilled) 0.250; the same at 1 block per SM (171 registers) 0.354;
// BN 64 with 2 blocks 0.284, with 1 0.271; one warpgroup per block: BN 128 at 3 blocks 0.298, at
// 2 0.334; BN 64 at 4 blocks 0.308. The two warpgroups of a block share every K and V tile.
template <int BN = 128, int MINB = 2, int WGS = 2>
static void forward(bf16* out, float* lse, const bf16* qkv, int B, int T_, int C, int NH, int KV,
                    cudaStream_t s) {
    att_mma::launch_tiles<128 * WGS>("att_wgmma::forward_kernel", forward_kernel<BN, MINB, WGS>,
                                     forward_smem<BN, 64 * WGS>(), ceil_div(T_, 64 * WGS), B, NH,
                                     true, s, out, lse, qkv, T_, C, NH, KV,
                                     1.0f / sqrtf((float)HS));
}

// Tiles measured on an H200 (bench/kernels_cuda --attention, backward ms; SmolLM-135M B16 T2048
// 9/3 heads, Qwen2.5-0.5B B8 14/2, Llama-3.2-1B B8 32/8; att_mma's kernels 1.090, 0.838, 1.848):
//   one warpgroup a block, 64 queries (dK/dV) / keys (dQ) a step, 2 blocks per SM: 0.955, 0.752,
//   1.676 (kept); two warpgroups, 64 a step, 1 block: 1.036, 0.812, 1.839; the same with 128-key
//   dQ steps: 1.010, 0.787, 1.783; two warpgroups, 32 a step, 2 blocks: 1.076, 1.111, 1.870; one
//   warpgroup, 32 a step, 3 blocks: 1.057, 0.954, 1.837.
// As att_mma::backward<64>: dqkv (B, T_, C + 2·KV·64) overwritten; dd (B, NH, T_) scratch. The
// dK/dV pass takes DKV_BQ queries a step over DKV_WGS warpgroups of keys, DKV_MINB blocks per SM;
// the dQ pass DQ_BK keys a step likewise.
template <int DKV_BQ = 64, int DKV_MINB = 2, int DKV_WGS = 1, int DQ_BK = 64, int DQ_MINB = 2,
          int DQ_WGS = 1>
static void backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out,
                     const float* lse, float* dd, int B, int T_, int C, int NH, int KV,
                     cudaStream_t s) {
    att_mma::backward_dd<HS>(dd, dout, out, B, T_, NH, s);
    const float scale = 1.0f / sqrtf((float)HS);
    att_mma::launch_tiles<128 * DKV_WGS>(
        "att_wgmma::backward_dkv_kernel", backward_dkv_kernel<DKV_BQ, DKV_MINB, DKV_WGS>,
        backward_dkv_smem<DKV_BQ, DKV_WGS>(), ceil_div(T_, 64 * DKV_WGS), B, KV, true, s, dqkv,
        dout, qkv, lse, dd, T_, C, NH, KV, scale);
    att_mma::launch_tiles<128 * DQ_WGS>(
        "att_wgmma::backward_dq_kernel", backward_dq_kernel<DQ_BK, DQ_MINB, DQ_WGS>,
        backward_dq_smem<DQ_BK, DQ_WGS>(), ceil_div(T_, 64 * DQ_WGS), B, NH, true, s, dqkv, dout,
        qkv, lse, dd, T_, C, NH, KV, scale);
}

}  // namespace att_wgmma
}  // namespace tessera
