// Linear layer on the GPU through cuBLASLt, with the CPU matmul's row-major semantics: weights are
// (OC, C) like nn.Linear. T is float (fp32 mode: CUBLAS_COMPUTE_32F, no TF32) or bf16 (bf16
// inputs, fp32 accumulation). Descriptors and heuristics are cached per shape.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias (OC, may be null).
// gelu: out = gelu_tanh(x) where x is the pre-activation above; pre_gelu (N, OC), if not null,
// receives x (for the backward). bf16 uses cuBLASLt's GELU_AUX(_BIAS) epilogue when the shape and
// alignment allow it; fp32 (and any fallback) applies a separate kernel that matches the CPU gelu.
//
// fp8_workspace (bf16 only; runtime.precision fp8): Fp8Workspace::of(N, C, OC, false).bytes of
// device memory (256-byte aligned) for the operands quantized to e4m3 with per-tensor current
// scaling (fp8.cuh); the product accumulates in fp32 and is written in bf16. Where cuBLASLt has no
// FP8 algorithm for the shape, the bf16 GEMM runs instead. Null: bf16.
//
// residual (N, OC), if not null (not with gelu): out = inp @ weight^T + bias + residual, the
// residual read by cuBLASLt as its C operand (the sum rounded once; out must not be residual);
// where cuBLASLt has no such algorithm, and after an FP8 GEMM, add_bias_residual_cuda adds it.
template <typename T>
void matmul_forward_cuda(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC,
                         cudaStream_t s, bool gelu = false, T* pre_gelu = nullptr,
                         void* fp8_workspace = nullptr, const T* residual = nullptr);

// dinp (N, C)   = dout (N, OC) @ weight (OC, C)        -- OVERWRITTEN (unlike the CPU's +=)
// dweight (OC, C) += dout^T @ inp (N, C)                -- fp32, accumulates (beta = 1); with
//                                                          dweight_overwrite, = (beta 0)
// dbias (OC)    += sum over n of dout[n]               -- fp32, accumulates, deterministic
// Any of dinp / dweight / dbias may be null to skip it. Uses the matmul_dbias scratch slot.
// fp8_workspace: Fp8Workspace::of(N, C, OC, true).bytes; dout quantized to e5m2, inp and weight
// to e4m3 (dbias is summed from the bf16 dout). Null: bf16.
// gelu_pre (N, C), if not null: the input went through a GELU whose pre-activation this is, and
// dinp is the gradient of that pre-activation, (dout @ weight) * gelu'(gelu_pre). bf16 computes
// it in cuBLASLt's DGELU epilogue (from the fp32 product, rounded once) from 4096 rows on, where
// the shape and alignment allow it; fewer rows (where the epilogue measured slower), fp32, FP8
// and any fallback apply gelu_backward_cuda after the GEMM.
template <typename T>
void matmul_backward_cuda(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                          const T* weight, int N, int C, int OC, cudaStream_t s,
                          void* fp8_workspace = nullptr, const T* gelu_pre = nullptr,
                          bool dweight_overwrite = false);

// For the benches: cuBLASLt's first `count` heuristic candidates for one of a bf16 linear layer's
// GEMMs (kind 0 forward, 1 dinp, 2 dweight with fp32 accumulation, beta 1), on buffers of their
// own, each timed over `reps` calls after one, in the heuristic's order (ms < 0: refused at run
// time); `chosen` marks the one this process runs for the shape (matmul.cu's choice).
struct GemmCandidate {
    float ms = 0;
    int id = 0;  // cuBLASLt's algorithm id
    bool chosen = false;
};
std::vector<GemmCandidate> matmul_candidates_cuda(int kind, int N, int C, int OC, int count,
                                                  int reps);

// The file of the host's GEMM choices for the current device (matmul.cu says what it holds), and
// whether choosing is on (TESSERA_GEMM_TUNING is not "off").
std::string matmul_choice_file();
bool matmul_choice_on();

// How many GEMMs of each kind ran in FP8 in this process (a shape or combination cuBLASLt
// refuses runs in bf16 and is not counted): for the benches and tests to show FP8 ran.
struct Fp8Counts {
    long forward = 0, dinp = 0, dweight = 0;
};
Fp8Counts matmul_fp8_counts();

}  // namespace tessera
