// Embedding forward (one block per token row) and backward (fp32 atomics into dwte/dwpe).
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

// dwte (v1 - v0, C), dwpe (Tseq, C) or null, fp32; dout (B*Tseq, C); tokens (B*Tseq). Block per
// row.
template <typename T>
static __global__ void embedding_backward_kernel(float* dwte, float* dwpe, const T* dout,
                                                 const int* tokens, long v0, long v1, int Tseq,
                                                 int C) {
    const long row = blockIdx.x;
    const int t = (int)(row % Tseq);
    const long tok = tokens[row];
    const bool mine = dwte && tok >= v0 && tok < v1;
    const T* g = dout + row * C;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        float x = to_float(g[i]);
        if (mine) atomicAdd(dwte + (tok - v0) * C + i, x);
        if (dwpe) atomicAdd(dwpe + (long)t * C + i, x);
    }
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
    embedding_backward_kernel<T><<<(unsigned)((long)B * Tseq), embedding_block(C), 0, s>>>(
        dwte, dwpe, dout, tokens, v0, v1, Tseq, C);
    CUDA_CHECK_LAUNCH("embedding_backward_kernel");
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
