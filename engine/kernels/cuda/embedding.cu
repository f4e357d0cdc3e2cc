// Embedding forward (one block per token row) and backward (each token's rows summed in order).
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"
#include "engine/kernels/cuda/embedding.cuh"

namespace tessera {

// out is (B*Tseq, C); tokens (B*Tseq); wte (v1 - v0, C); wpe (Tseq, C) or null. Block per row.
template <typename T>
static __global__ void embedding_forward_kernel(T* out, const int* tokens, const T* wte,
                                                const T* wpe, long v0, long v1, int Tseq, int C) {
    const long row = blockIdx.x;
    const int t = (int)(row % Tseq);
    const long tok = tokens[row];
    const bool mine = tok >= v0 && tok < v1;
    const T* e = wte + (mine ? (tok - v0) : 0) * (long)C;
    const T* p = wpe ? wpe + (long)t * C : nullptr;
    T* o = out + row * C;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        float x = mine ? to_float(e[i]) : 0.0f;
        if (p) x += to_float(p[i]);
        o[i] = from_float<T>(x);
    }
}

// The backward adds each row of dout where its token (and its position) says in a fixed order, no
// atomics, so the bits of dwte and dwpe are the same from run to run (an atomic sum's order
// changed the gradient norm's last bits, and with clipping a bf16 run's curve). The rows are
// sorted by token (a stable radix sort keeps each token's rows in order); a token's run of up to
// kShortRun rows and each position's rows are added in row order, as the CPU kernel does (its
// bits in fp32); a longer run in kLongWarps interleaved parts, added in part order.

// rows[r] = r; keys[r]: the token's row in the shard [v0, v1), or v1 - v0 for a token outside it
static __global__ void embedding_sort_keys_kernel(int* rows, int* keys, const int* tokens, int n,
                                                  long v0, long v1) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    rows[r] = r;
    const long tok = tokens[r];
    keys[r] = (int)(tok >= v0 && tok < v1 ? tok - v0 : v1 - v0);
}

// starts_flag[p]: whether sorted position p begins a token's run
static __global__ void embedding_run_flags_kernel(int* starts_flag, const int* tok_sorted, int n) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < n) starts_flag[p] = p == 0 || tok_sorted[p] != tok_sorted[p - 1];
}

constexpr int kShortRun = 16;  // runs up to this long: a thread per column adds them in row order

// Where run r of nruns ends in the n sorted positions (the next run's start, or n)
__device__ inline int embedding_run_end(const int* run_starts, int nruns, int r, int n) {
    return r + 1 < nruns ? run_starts[r + 1] : n;
}

// long_flag[r]: whether run r (of *runs; 0 past them) is longer than kShortRun
static __global__ void embedding_long_flags_kernel(int* long_flag, const int* run_starts,
                                                   const int* runs, int n) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int nruns = *runs;
    long_flag[r] =
        r < nruns && embedding_run_end(run_starts, nruns, r, n) - run_starts[r] > kShortRun;
}

// dwte (v1 - v0, C) fp32; dout (n, C); tok_sorted, row_sorted (n): the sorted keys and their rows;
// run_starts (*runs): where each key's run begins in them.
// Each run of at most kShortRun rows (blocks stride over the *runs of them) adds its rows, in row
// order, into its token's dwte row: a thread per column (blockIdx.y: a group of columns).
template <typename T>
static __global__ void embedding_dwte_short_kernel(float* dwte, const T* dout,
                                                   const int* tok_sorted, const int* row_sorted,
                                                   const int* run_starts, const int* runs, int n,
                                                   int shard_rows, int C) {
    const int i = blockIdx.y * blockDim.x + threadIdx.x;
    if (i >= C) return;
    const int nruns = *runs;
    for (int r = blockIdx.x; r < nruns; r += gridDim.x) {
        const int p = run_starts[r], end = embedding_run_end(run_starts, nruns, r, n);
        const int tok = tok_sorted[p];
        if (end - p > kShortRun || tok >= shard_rows) continue;
        float x[kShortRun];
#pragma unroll
        for (int j = 0; j < kShortRun; ++j)
            x[j] = p + j < end ? to_float(dout[(long)row_sorted[p + j] * C + i]) : 0.0f;
        float* w = dwte + tok * (long)C + i;
        float acc = *w;
#pragma unroll
        for (int j = 0; j < kShortRun; ++j)
            if (p + j < end) acc += x[j];
        *w = acc;
    }
}

// Shapes as above; long_runs (*long_count): the runs longer than kShortRun.
// The longer runs (a frequent token's: text's commonest is ~5% of the rows, hundreds of them):
// warp w of kLongWarps adds rows w, w + kLongWarps, ... of the run in order, then the warps'
// sums go into dwte in warp order. Deterministic (a fixed order), not the CPU's. A block takes
// kLongCols columns (blockIdx.y), a lane every 32nd of them.
constexpr int kLongWarps = 16, kLongCols = 128, kLongRows = 4;  // kLongRows: rows in flight a warp
template <typename T>
static __global__ void __launch_bounds__(kLongWarps * 32)
    embedding_dwte_long_kernel(float* dwte, const T* dout, const int* tok_sorted,
                               const int* row_sorted, const int* run_starts, const int* runs,
                               const int* long_runs, const int* long_count, int n, int shard_rows,
                               int C) {
    __shared__ float part[kLongWarps][kLongCols];
    constexpr int kPerLane = kLongCols / 32;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int c0 = blockIdx.y * kLongCols;
    const int nruns = *runs, nlong = *long_count;
    for (int k = blockIdx.x; k < nlong; k += gridDim.x) {
        const int r = long_runs[k];
        const int p = run_starts[r], end = embedding_run_end(run_starts, nruns, r, n);
        const int tok = tok_sorted[p];
        if (tok >= shard_rows) continue;  // the whole block alike
        float acc[kPerLane] = {};
        for (int q = p + warp; q < end; q += kLongWarps * kLongRows) {
            float x[kLongRows][kPerLane];
#pragma unroll
            for (int j = 0; j < kLongRows; ++j) {
                const int qj = q + j * kLongWarps;
                const long row = qj < end ? row_sorted[qj] : -1;
#pragma unroll
                for (int c = 0; c < kPerLane; ++c) {
                    const int col = c0 + c * 32 + lane;
                    x[j][c] = row >= 0 && col < C ? to_float(dout[row * C + col]) : 0.0f;
                }
            }
#pragma unroll
            for (int j = 0; j < kLongRows; ++j)
                if (q + j * kLongWarps < end)
#pragma unroll
                    for (int c = 0; c < kPerLane; ++c) acc[c] += x[j][c];
        }
#pragma unroll
        for (int c = 0; c < kPerLane; ++c) part[warp][c * 32 + lane] = acc[c];
        __syncthreads();
        const int col = c0 + (int)threadIdx.x;
        if (threadIdx.x < kLongCols && col < C) {
            float* w = dwte + tok * (long)C + col;
            float v = *w;
            for (int wp = 0; wp < kLongWarps; ++wp) v += part[wp][threadIdx.x];
            *w = v;
        }
        __syncthreads();
    }
}

// dwpe (Tseq, C) fp32, dout (B, Tseq, C): dwpe[t] += dout[b, t] for b = 0, 1, ... in order. Block
// x: the position; y: a group of columns.
template <typename T>
static __global__ void embedding_dwpe_kernel(float* dwpe, const T* dout, int B, int Tseq, int C) {
    const int t = blockIdx.x;
    const int i = blockIdx.y * blockDim.x + threadIdx.x;
    if (i >= C) return;
    float* w = dwpe + (long)t * C + i;
    float acc = *w;
    for (int b = 0; b < B; ++b) acc += to_float(dout[((long)b * Tseq + t) * C + i]);
    *w = acc;
}

static int embedding_block(int C) {
    return C >= 256 ? 256 : ((C + 31) / 32) * 32;
}

template <typename T>
void embedding_forward_cuda(T* out, const int* tokens, const T* wte, const T* wpe, long v0, long v1,
                            int B, int Tseq, int C, cudaStream_t s) {
    TS_CUDA_REQUIRE(B >= 0 && Tseq > 0 && C > 0 && v0 >= 0 && v1 >= v0,
                    "embedding_forward_cuda: bad shape B=", B, " T=", Tseq, " C=", C, " shard [",
                    v0, ", ", v1, ")");
    TS_CUDA_REQUIRE(out && tokens && (wte || v1 == v0),
                    "embedding_forward_cuda: null out/tokens/wte");
    if (B == 0) return;
    embedding_forward_kernel<T><<<(unsigned)((long)B * Tseq), embedding_block(C), 0, s>>>(
        out, tokens, wte, wpe, v0, v1, Tseq, C);
    CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}

template <typename T>
void embedding_backward_cuda(float* dwte, float* dwpe, const T* dout, const int* tokens, long v0,
                             long v1, int B, int Tseq, int C, cudaStream_t s) {
    TS_CUDA_REQUIRE(B >= 0 && Tseq > 0 && C > 0 && v0 >= 0 && v1 >= v0,
                    "embedding_backward_cuda: bad shape B=", B, " T=", Tseq, " C=", C, " shard [",
                    v0, ", ", v1, ")");
    TS_CUDA_REQUIRE(dout && tokens, "embedding_backward_cuda: null dout/tokens");
    if (B == 0 || (!dwte && !dwpe)) return;
    const int block = embedding_block(C);
    const unsigned col_groups = (unsigned)ceil_div(C, block);
    const int n = B * Tseq;
    if (dwte) {
        // The rows sorted by their token's row in the shard (stable: each token's rows stay in
        // order; the tokens outside it last, as one run of the key v1 - v0, left alone), the
        // sorted positions where a token's run begins, the runs longer than kShortRun, then the
        // short runs a thread per column and the long ones a block each. Scratch: the row
        // indices, the keys, the sorted keys and rows, the flags, the run starts, the long
        // runs, their two counts, then CUB's own storage (each CUB call with its size query's
        // argument types: one instantiation, one size).
        const int shard_rows = (int)(v1 - v0);
        int key_bits = 1;
        while (key_bits < 31 && (1L << key_bits) <= shard_rows) ++key_bits;
        size_t sort_bytes = 0, select_bytes = 0;
        CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, (const int*)nullptr,
                                                   (int*)nullptr, (const int*)nullptr,
                                                   (int*)nullptr, n, 0, key_bits, s));
        CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, select_bytes, (const int*)nullptr,
                                              (const int*)nullptr, (int*)nullptr, (int*)nullptr, n,
                                              s));
        const size_t ints = ((size_t)7 * n + 2 + 63) / 64 * 64;  // 256-byte aligned after
        char* scratch = static_cast<char*>(cuda_scratch(
            ScratchSlot::embedding_sort, sizeof(int) * ints + std::max(sort_bytes, select_bytes)));
        int* rows = reinterpret_cast<int*>(scratch);
        int* keys = rows + n;
        int* sorted_tok = keys + n;
        int* sorted_rows = sorted_tok + n;
        int* flags = sorted_rows + n;
        int* starts = flags + n;
        int* long_runs = starts + n;
        int* runs = long_runs + n;
        int* long_count = runs + 1;
        void* cub_temp = scratch + sizeof(int) * ints;
        const unsigned lines = (unsigned)ceil_div(n, 256);
        embedding_sort_keys_kernel<<<lines, 256, 0, s>>>(rows, keys, tokens, n, v0, v1);
        CUDA_CHECK_LAUNCH("embedding_sort_keys_kernel");
        CUDA_CHECK(cub::DeviceRadixSort::SortPairs(cub_temp, sort_bytes, keys, sorted_tok, rows,
                                                   sorted_rows, n, 0, key_bits, s));
        embedding_run_flags_kernel<<<lines, 256, 0, s>>>(flags, sorted_tok, n);
        CUDA_CHECK_LAUNCH("embedding_run_flags_kernel");
        CUDA_CHECK(cub::DeviceSelect::Flagged(cub_temp, select_bytes, (const int*)rows,
                                              (const int*)flags, starts, runs, n, s));
        // a run's blocks stride over the runs: the count stays on the device
        embedding_dwte_short_kernel<T>
            <<<dim3((unsigned)std::min(n, 2048), col_groups), block, 0, s>>>(
                dwte, dout, sorted_tok, sorted_rows, starts, runs, n, shard_rows, C);
        CUDA_CHECK_LAUNCH("embedding_dwte_short_kernel");
        // the runs longer than kShortRun, listed (their count stays on the device too)
        embedding_long_flags_kernel<<<lines, 256, 0, s>>>(flags, starts, runs, n);
        CUDA_CHECK_LAUNCH("embedding_long_flags_kernel");
        CUDA_CHECK(cub::DeviceSelect::Flagged(cub_temp, select_bytes, (const int*)rows,
                                              (const int*)flags, long_runs, long_count, n, s));
        const unsigned long_blocks = (unsigned)std::max(1, std::min(n / (kShortRun + 1), 128));
        embedding_dwte_long_kernel<T>
            <<<dim3(long_blocks, (unsigned)ceil_div(C, kLongCols)), kLongWarps * 32, 0, s>>>(
                dwte, dout, sorted_tok, sorted_rows, starts, runs, long_runs, long_count, n,
                shard_rows, C);
        CUDA_CHECK_LAUNCH("embedding_dwte_long_kernel");
    }
    if (dwpe) {
        embedding_dwpe_kernel<T>
            <<<dim3((unsigned)Tseq, col_groups), block, 0, s>>>(dwpe, dout, B, Tseq, C);
        CUDA_CHECK_LAUNCH("embedding_dwpe_kernel");
    }
}

template void embedding_forward_cuda<float>(float*, const int*, const float*, const float*, long,
                                            long, int, int, int, cudaStream_t);
template void embedding_forward_cuda<bf16>(bf16*, const int*, const bf16*, const bf16*, long, long,
                                           int, int, int, cudaStream_t);
template void embedding_backward_cuda<float>(float*, float*, const float*, const int*, long, long,
                                             int, int, int, cudaStream_t);
template void embedding_backward_cuda<bf16>(float*, float*, const bf16*, const int*, long, long,
                                            int, int, int, cudaStream_t);

}  // namespace tessera
