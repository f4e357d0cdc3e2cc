// What the layers compute with: one device's kernels behind one interface, so that each layer
// (engine/parallel/tp_layers.cpp) is written once for every device. Three devices implement it:
// the CPU kernels (fp32, layer_ops_cpu.cpp), the CUDA kernels on the rank's compute stream
// (bf16 or fp32 activations, layer_ops_cuda.cpp) and the meta device (layer_ops_meta.cpp), which
// launches nothing: tensors on it allocate no memory but are accounted by category, which is how
// the estimator replays a rank's step with the runtime's own code.
//
// Where devices differ in what they allocate, the difference is a trait (LayerTraits), the same
// for a device and for the meta device standing in for it. Pointers are of the activation dtype
// (`act`) unless typed float*; weights are what Layer::w() returns (the fp32 masters, or their
// bf16 copy). Shapes as in engine/kernels/cpu; N = B·T tokens.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/parallel/comm.h"

namespace tessera {

// ------------------------------------------------------------------------------------------
// What the meta device records of a step (the estimator prices it: engine/plan/op_costs.h):
// each op the layers call, with the sizes that set its cost, in call order.

enum class OpKind {
    matmul_forward,           // N, C, OC: (N, C) · (OC, C)ᵀ
    matmul_gelu_forward,      // N, C, OC, GELU epilogue
    matmul_backward,          // N, C, OC: input gradient (N, C) and weight gradient (OC, C)
    matmul_gelu_backward,     // N, C, OC: matmul_backward through a GELU on its input
    matmul_residual_forward,  // N, C, OC: matmul_forward plus a residual (N, OC)
    layernorm_forward,        // N, C
    layernorm_backward,       // N, C
    gelu_forward,             // N elements
    gelu_backward,            // N elements
    relu_forward,             // N elements
    relu_backward,            // N elements
    attention_forward,  // B, T, C (this rank's heads' width), NH (this rank's heads), OC = KV heads
    attention_backward,  // B, T, C, NH, OC = KV heads
    rmsnorm_forward,     // N, C
    rmsnorm_backward,    // N, C
    rope,                // N rows, C = heads·hd rotated
    swiglu_forward,      // N, C = F
    swiglu_backward,     // N, C = F
    add_bias_residual,   // N, C
    embedding_forward,   // N tokens, C
    embedding_backward,  // N tokens, C
    cross_entropy,       // N rows, C = padded vocabulary columns
    accumulate,          // N fp32 elements
    cast_weights,        // N elements
    copy,                // N bytes
    tp_all_reduce,       // N bytes over the tensor-parallel group of NH ranks
    count
};
const char* op_kind_name(OpKind k);
// The GEMMs among the op kinds (matmul forward and backward, with or without a GELU epilogue,
// the forward with a residual).
bool op_is_gemm(OpKind k);

struct OpCall {
    OpKind kind = OpKind::copy;
    int64_t N = 0, C = 0, OC = 0, B = 0, T = 0, NH = 0;
    DType dtype = DType::f32;  // the activation dtype
    bool fp8 = false;          // a GEMM run in FP8
    // A backward's share of its op (zb-h1 splits it: B the input gradient, W the weights'):
    // 1 whole, 0.5 either part, priced in proportion
    double share = 1.0;
    bool operator==(const OpCall&) const = default;  // every field: the same op at the same cost
};

// The ops recorded on this thread while installed (the meta device's calls); returns the
// previous trace. Null: nothing recorded.
struct OpTrace {
    std::vector<OpCall> calls;
};
OpTrace* op_trace_install(OpTrace* t);
OpTrace* op_trace_current();

// This rank's place in its tensor-parallel group (comm null when tp = 1, and on the meta device,
// where an all-reduce over size > 1 ranks is recorded in the op trace).
struct TpGroup {
    Communicator* comm = nullptr;
    int rank = 0, size = 1;
    void all_reduce(void* x, int64_t n, DType t, ReduceOp op = ReduceOp::sum) const {
        if (comm)
            comm->all_reduce(x, n, t, op);
        else if (size > 1 && op_trace_current())
            op_trace_current()->calls.push_back(
                {OpKind::tp_all_reduce, n * dtype_size(t), 0, 0, 0, 0, size, t});
    }
};

// How a device's layers differ in what they keep and allocate.
struct LayerTraits {
    Device device = Device::cpu;  // where the real device keeps tensors (cpu | cuda)
    DType act = DType::f32;       // activations and the weight copies the kernels read
    // Attention saves its (B, NH, T, T) probabilities (the CPU) or only the log-sum-exp
    // (B, NH, T) of flash attention (GPUs); selective recompute drops the probabilities.
    bool attention_scores = true;
    // The logits' rows are padded to a multiple of this (GPUs: 128 keeps cuBLASLt on its fast
    // kernels); the loss ignores the padding.
    int vocab_align = 1;
    // Token ids are uploaded into a device buffer per micro-batch, kept across steps.
    bool tokens_on_device = false;
    // Offload copies run asynchronously on a copy engine (a source stays allocated until its
    // copy is done) rather than synchronously.
    bool async_copies = false;
    // runtime.precision fp8 (GPUs, bf16 activations): the blocks' GEMMs run in FP8 where
    // Fp8Workspace::eligible (engine/kernels/fp8_workspace.h), each with a workspace of its
    // quantized operands allocated around the call. The head's GEMM stays in bf16.
    bool fp8 = false;
};
// The traits of the real device `d` with activations in `act` (f32 on the CPU), FP8 GEMMs
// where `fp8` (CUDA with bf16 activations only).
LayerTraits layer_traits(Device d, DType act, bool fp8 = false);

// A micro-batch's token ids on the device (GPUs): the buffer and the backend's staging.
struct TokenSlot {
    Tensor device;
    int64_t n = 0;
    // pinned host buffer (CUDA) with the backend's deleter (cuda_free_pinned)
    std::unique_ptr<void, void (*)(void*)> staging{nullptr, nullptr};
    size_t staging_bytes = 0;
    TokenSlot() = default;
    TokenSlot(TokenSlot&&) = delete;
};

class LayerOps {
  public:
    explicit LayerOps(LayerTraits t) : traits(t) {}
    virtual ~LayerOps() = default;
    const LayerTraits traits;
    // where this backend's tensors live (meta for the meta device)
    virtual Device device() const { return traits.device; }
    // The workspace of an FP8 GEMM of this shape (forward or backward), allocated on this
    // device as `workspace` (the meta device records it); undefined where the GEMM is not FP8.
    // The caller holds it for the call.
    Tensor fp8_workspace(int N, int C, int OC, bool backward) const;

    // out (N, C), mean, rstd (N); inp (N, C); weight, bias (C)
    virtual void layernorm_forward(void* out, float* mean, float* rstd, const void* inp,
                                   const void* weight, const void* bias, int N, int C) = 0;
    // dinp (N, C) += ; dweight, dbias (C) +=
    virtual void layernorm_backward(void* dinp, float* dweight, float* dbias, const void* dout,
                                    const void* inp, const void* weight, const float* mean,
                                    const float* rstd, int N, int C) = 0;
    // out (N, OC) = inp (N, C) · weight (OC, C)ᵀ + bias (OC, may be null)
    virtual void matmul_forward(void* out, const void* inp, const void* weight, const void* bias,
                                int N, int C, int OC) = 0;
    // out (N, OC) = inp · weightᵀ + bias + res (bias may be null; out is not res). Default:
    // matmul_forward, then add_bias_residual; CUDA adds both in the GEMM (cuBLASLt's C).
    virtual void matmul_residual_forward(void* out, const void* inp, const void* weight,
                                         const void* bias, const void* res, int N, int C, int OC);
    // A row-parallel projection with its bias and the residual stream: out (N, OC) = the sum
    // over the tensor-parallel group of inp · weightᵀ (each rank's slice of C), + bias + res. One
    // rank: matmul_residual_forward; more: matmul_forward, the all-reduce, add_bias_residual.
    void projection_residual(void* out, const void* inp, const void* weight, const void* bias,
                             const void* res, int N, int C, int OC, const TpGroup& tp);
    // pre (N, OC) = inp · weightᵀ + bias, out = gelu(pre)
    virtual void matmul_gelu_forward(void* out, void* pre, const void* inp, const void* weight,
                                     const void* bias, int N, int C, int OC) = 0;
    // dinp (N, C) = (overwritten); dweight (OC, C) +=, dbias (OC) += (each may be null);
    // dweight_overwrite: dweight = instead (its buffer holds no values yet; the GPU's GEMM
    // writes it with beta 0, the CPU zeroes it first: the bits of += onto zeros)
    virtual void matmul_backward(void* dinp, float* dweight, float* dbias, const void* dout,
                                 const void* inp, const void* weight, int N, int C, int OC,
                                 bool dweight_overwrite) = 0;
    // matmul_backward for an input that was gelu(pre): dinp (N, C) = gelu'(pre) · (dout · weight)
    // (overwritten), the gradient of pre; dweight, dbias as there (each may be null)
    virtual void matmul_gelu_backward(void* dinp, float* dweight, float* dbias, const void* dout,
                                      const void* inp, const void* weight, const void* pre, int N,
                                      int C, int OC, bool dweight_overwrite) = 0;
    virtual void gelu_forward(void* out, const void* inp, int64_t n) = 0;
    // dinp = gelu'(inp) · dout (overwritten; dinp may be dout)
    virtual void gelu_backward(void* dinp, const void* inp, const void* dout, int64_t n) = 0;
    virtual void relu_forward(void* out, const void* inp, int64_t n) = 0;
    // dinp = (inp > 0) · dout (overwritten; dinp may be dout)
    virtual void relu_backward(void* dinp, const void* inp, const void* dout, int64_t n) = 0;
    // C = NH·hs queries' width, KV key/value heads (grouped-query attention; KV = NH for GPT).
    // out (B, T, C); stats: the probabilities (B, NH, T, T) or the log-sum-exp (B, NH, T), per
    // traits.attention_scores; qkv (B, T, C + 2·KV·hs) laid out [q | k | v]
    virtual void attention_forward(void* out, float* stats, const void* qkv, int B, int T, int C,
                                   int NH, int KV) = 0;
    // dqkv (B, T, C + 2·KV·hs) = (overwritten); dout, out (B, T, C)
    virtual void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* out,
                                    const float* stats, int B, int T, int C, int NH, int KV) = 0;
    // out (N, C) = RMSNorm(inp) · weight; rstd (N)
    virtual void rmsnorm_forward(void* out, float* rstd, const void* inp, const void* weight, int N,
                                 int C, float eps) = 0;
    // dinp (N, C) +=; dweight (C) +=
    virtual void rmsnorm_backward(void* dinp, float* dweight, const void* dout, const void* inp,
                                  const void* weight, const float* rstd, int N, int C) = 0;
    // Per-head RMSNorm (Qwen3's q/k norm): `heads` heads of hd at the start of each of N rows of
    // out and inp (row stride `stride` elements); weight (hd); rstd (N·heads)
    virtual void head_rmsnorm_forward(void* out, float* rstd, const void* inp, const void* weight,
                                      int N, int heads, int hd, int64_t stride, float eps) = 0;
    // dinp (laid out as inp) = (overwritten; dinp may be dout); dweight (hd) +=
    virtual void head_rmsnorm_backward(void* dinp, float* dweight, const void* dout,
                                       const void* inp, const void* weight, const float* rstd,
                                       int N, int heads, int hd, int64_t stride) = 0;
    // Rotary embeddings, in place: `heads` heads of width hd at the start of each of B·T rows of
    // x (row stride `stride` elements), position pos0 + row % T; inverse: the backward's rotation
    virtual void rope(void* x, int B, int T, int heads, int hd, int64_t stride,
                      const std::vector<float>& inv_freq, bool inverse, int pos0 = 0) = 0;
    // Cached decoding (tessera sample): n new queries per sequence against a key/value cache.
    // q: B·n rows (row stride q_stride elements) of NH heads of hd; kc, vc (B, Tmax, KV·hd); query
    // i of sequence b at position pos0 + i sees keys 0 .. pos0 + i. out (B·n, NH·hd).
    virtual void attention_decode(void* out, const void* q, int64_t q_stride, const void* kc,
                                  const void* vc, int B, int n, int pos0, int NH, int KV, int hd,
                                  int Tmax) = 0;
    // rows rows of row_bytes from src (row pitch src_pitch bytes) to dst (row pitch dst_pitch)
    virtual void copy_rows(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
                           int64_t rows, int64_t row_bytes) = 0;
    // n elements of the activation dtype, widened to fp32 on the host (waits for the device)
    virtual std::vector<float> read_f32(const void* x, int64_t n) = 0;
    // out (N, F) = silu(gate) · up, gu (N, 2F) each row's gate then up
    virtual void swiglu_forward(void* out, const void* gu, int N, int F) = 0;
    // dgu (N, 2F) = (overwritten); dout (N, F)
    virtual void swiglu_backward(void* dgu, const void* dout, const void* gu, int N, int F) = 0;
    // y (N, C) = (y + bias) + res (bias may be null)
    virtual void add_bias_residual(void* y, const void* bias, const void* res, int N, int C) = 0;
    // out (B, T, C) = the rows [v0, v1) of wte (v1 - v0, C) for tokens in them, else 0; plus
    // wpe (T, C) where given
    virtual void embedding_forward(void* out, const int* tokens, const void* wte, const void* wpe,
                                   int64_t v0, int64_t v1, int B, int T, int C) = 0;
    // dwte (v1 - v0, C) +=, dwpe (T, C) += (where given)
    virtual void embedding_backward(float* dwte, float* dwpe, const void* dout, const int* tokens,
                                    int64_t v0, int64_t v1, int B, int T, int C) = 0;
    // Vocab-parallel cross-entropy over this rank's logits (N rows of Vp, the first Vl real;
    // columns are the vocabulary rows from v0): losses (N fp32) and, with `grad`, the gradient of
    // loss_scale · Σ losses written into the logits. Targets < 0 are ignored (loss 0, no
    // gradient). The softmax's global row statistics (max, sum of exponentials, the target's
    // term) are combined over the TP group in stats (3, N fp32, scratch); gmax (N fp32) is
    // scratch for that, given only when tp.size > 1. Without `grad` the logits may be rewritten
    // too (the CPU keeps the exponentials there).
    virtual void cross_entropy(float* losses, float* stats, float* gmax, void* logits,
                               const int* targets, int64_t v0, int N, int Vl, int Vp,
                               const TpGroup& tp, float loss_scale, bool grad) = 0;
    // Rows (N, V) whose largest entry is at their target: a classifier's correct answers (read
    // on the host; the meta device counts none). Call on the logits or on what cross_entropy
    // without `grad` left there (a monotone function of them).
    virtual int64_t count_correct(const void* logits, const int* targets, int N, int V) = 0;
    virtual void accumulate(float* dst, const float* src, int64_t n) = 0;  // dst += src
    // dst (act) = src (fp32 masters); bytes copies within the device
    virtual void cast_weights(void* dst, const float* src, int64_t n) = 0;
    virtual void copy(void* dst, const void* src, int64_t bytes) = 0;
    // slot.device (already large enough) = ids, through the backend's staging
    virtual void upload_tokens(TokenSlot& slot, const std::vector<int32_t>& ids) = 0;
};

LayerOps& layer_ops_cpu();
#ifdef TESSERA_HAVE_CUDA
LayerOps& layer_ops_cuda(DType act, bool fp8 = false);  // engine/parallel/layer_ops_cuda.cpp
#endif
// The meta device standing in for the real device `target` (see core/tensor.h: Device::meta).
LayerOps& layer_ops_meta(const LayerTraits& target);
// The real device's ops (throws for cuda without a CUDA build); `fp8`: LayerTraits::fp8.
LayerOps& layer_ops_for(Device d, DType act, bool fp8 = false);
// The same backend without FP8 GEMMs (the head's; `ops` itself where it has none).
LayerOps& layer_ops_without_fp8(LayerOps& ops);

}  // namespace tessera
