// Device traits, the meta device's ops (which launch nothing) and the choice of backend.
#include "engine/parallel/layer_ops.h"

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

#include "engine/core/error.h"
#include "engine/kernels/fp8_workspace.h"

namespace tessera {

LayerTraits layer_traits(Device d, DType act, bool fp8) {
    TS_CHECK(!fp8 || (d == Device::cuda && act == DType::bf16),
             "layer_traits: FP8 GEMMs need a GPU with bf16 activations");
    LayerTraits t;
    t.device = d;
    t.act = act;
    t.fp8 = fp8;
    if (d == Device::cuda) {
        t.attention_scores = false;  // flash attention: the log-sum-exp only
        t.vocab_align = 128;
        t.tokens_on_device = true;
        t.async_copies = true;
    } else {
        TS_CHECK(d == Device::cpu && act == DType::f32, "layer_traits: the CPU computes in fp32");
    }
    return t;
}

const char* op_kind_name(OpKind k) {
    static const char* names[] = {"matmul_forward",
                                  "matmul_gelu_forward",
                                  "matmul_backward",
                                  "matmul_gelu_backward",
                                  "matmul_residual_forward",
                                  "layernorm_forward",
                                  "layernorm_backward",
                                  "gelu_forward",
                                  "gelu_backward",
                                  "relu_forward",
                                  "relu_backward",
                                  "attention_forward",
                                  "attention_backward",
                                  "rmsnorm_forward",
                                  "rmsnorm_backward",
                                  "rope",
                                  "swiglu_forward",
                                  "swiglu_backward",
                                  "add_bias_residual",
                                  "embedding_forward",
                                  "embedding_backward",
                                  "cross_entropy",
                                  "accumulate",
                                  "cast_weights",
                                  "copy",
                                  "tp_all_reduce"};
    static_assert(sizeof names / sizeof names[0] == (size_t)OpKind::count, "a name per op kind");
    return names[(int)k];
}

bool op_is_gemm(OpKind k) {
    return k == OpKind::matmul_forward || k == OpKind::matmul_gelu_forward ||
           k == OpKind::matmul_backward || k == OpKind::matmul_gelu_backward ||
           k == OpKind::matmul_residual_forward;
}

Tensor LayerOps::fp8_workspace(int N, int C, int OC, bool backward) const {
    if (!traits.fp8 || !Fp8Workspace::eligible(N, C, OC)) return {};
    return Tensor::empty({Fp8Workspace::of(N, C, OC, backward).bytes}, MemCategory::workspace,
                         DType::u8, device());
}

void LayerOps::matmul_residual_forward(void* out, const void* inp, const void* weight,
                                       const void* bias, const void* res, int N, int C, int OC) {
    matmul_forward(out, inp, weight, nullptr, N, C, OC);
    add_bias_residual(out, bias, res, N, OC);
}

void LayerOps::projection_residual(void* out, const void* inp, const void* weight, const void* bias,
                                   const void* res, int N, int C, int OC, const TpGroup& tp) {
    if (tp.size == 1) {
        matmul_residual_forward(out, inp, weight, bias, res, N, C, OC);
        return;
    }
    matmul_forward(out, inp, weight, nullptr, N, C, OC);
    tp.all_reduce(out, (int64_t)N * OC, traits.act);
    add_bias_residual(out, bias, res, N, OC);
}

namespace {

thread_local OpTrace* t_trace = nullptr;

// The meta device: every op launches nothing and records its call in the installed trace.
class MetaLayerOps final : public LayerOps {
  public:
    explicit MetaLayerOps(const LayerTraits& t) : LayerOps(t) {}
    Device device() const override { return Device::meta; }
    void layernorm_forward(void*, float*, float*, const void*, const void*, const void*, int N,
                           int C) override {
        rec(OpKind::layernorm_forward, N, C);
    }
    void layernorm_backward(void* dinp, float* dw, float*, const void*, const void*, const void*,
                            const float*, const float*, int N, int C) override {
        rec(OpKind::layernorm_backward, N, C);
        split_share(dinp, dw);
    }
    void matmul_forward(void*, const void*, const void*, const void*, int N, int C,
                        int OC) override {
        gemm(OpKind::matmul_forward, N, C, OC);
    }
    void matmul_gelu_forward(void*, void*, const void*, const void*, const void*, int N, int C,
                             int OC) override {
        gemm(OpKind::matmul_gelu_forward, N, C, OC);
    }
    void matmul_residual_forward(void*, const void*, const void*, const void*, const void*, int N,
                                 int C, int OC) override {
        gemm(OpKind::matmul_residual_forward, N, C, OC);
    }
    void matmul_backward(void* dinp, float* dw, float*, const void*, const void*, const void*,
                         int N, int C, int OC, bool) override {
        gemm(OpKind::matmul_backward, N, C, OC);
        split_share(dinp, dw);
    }
    void matmul_gelu_backward(void* dinp, float* dw, float*, const void*, const void*, const void*,
                              const void*, int N, int C, int OC, bool) override {
        gemm(OpKind::matmul_gelu_backward, N, C, OC);
        split_share(dinp, dw);
    }
    void gelu_forward(void*, const void*, int64_t n) override { rec(OpKind::gelu_forward, n); }
    void gelu_backward(void*, const void*, const void*, int64_t n) override {
        rec(OpKind::gelu_backward, n);
    }
    void relu_forward(void*, const void*, int64_t n) override { rec(OpKind::relu_forward, n); }
    void relu_backward(void*, const void*, const void*, int64_t n) override {
        rec(OpKind::relu_backward, n);
    }
    int64_t count_correct(const void*, const int*, int, int) override { return 0; }
    void attention_forward(void*, float*, const void*, int B, int T, int C, int NH,
                           int KV) override {
        rec(OpKind::attention_forward, (int64_t)B * T, C, KV, B, T, NH);
    }
    void attention_backward(void*, const void*, const void*, const void*, const float*, int B,
                            int T, int C, int NH, int KV) override {
        rec(OpKind::attention_backward, (int64_t)B * T, C, KV, B, T, NH);
    }
    void rmsnorm_forward(void*, float*, const void*, const void*, int N, int C, float) override {
        rec(OpKind::rmsnorm_forward, N, C);
    }
    void rmsnorm_backward(void* dinp, float* dw, const void*, const void*, const void*,
                          const float*, int N, int C) override {
        rec(OpKind::rmsnorm_backward, N, C);
        split_share(dinp, dw);
    }
    // priced as RMSNorm over the heads' rows
    void head_rmsnorm_forward(void*, float*, const void*, const void*, int N, int heads, int hd,
                              int64_t, float) override {
        rec(OpKind::rmsnorm_forward, (int64_t)N * heads, hd);
    }
    void head_rmsnorm_backward(void*, float*, const void*, const void*, const void*, const float*,
                               int N, int heads, int hd, int64_t) override {
        rec(OpKind::rmsnorm_backward, (int64_t)N * heads, hd);
    }
    void rope(void*, int B, int T, int heads, int hd, int64_t, const std::vector<float>&, bool,
              int) override {
        rec(OpKind::rope, (int64_t)B * T, (int64_t)heads * hd);
    }
    // decoding is not planned: nothing recorded
    void attention_decode(void*, const void*, int64_t, const void*, const void*, int, int, int, int,
                          int, int, int) override {}
    void copy_rows(void*, int64_t, const void*, int64_t, int64_t, int64_t) override {}
    std::vector<float> read_f32(const void*, int64_t n) override {
        return std::vector<float>((size_t)n, 0.0f);
    }
    void swiglu_forward(void*, const void*, int N, int F) override {
        rec(OpKind::swiglu_forward, N, F);
    }
    void swiglu_backward(void*, const void*, const void*, int N, int F) override {
        rec(OpKind::swiglu_backward, N, F);
    }
    void add_bias_residual(void*, const void*, const void*, int N, int C) override {
        rec(OpKind::add_bias_residual, N, C);
    }
    void embedding_forward(void*, const int*, const void*, const void*, int64_t, int64_t, int B,
                           int T, int C) override {
        rec(OpKind::embedding_forward, (int64_t)B * T, C);
    }
    void embedding_backward(float*, float*, const void*, const int*, int64_t, int64_t, int B, int T,
                            int C) override {
        rec(OpKind::embedding_backward, (int64_t)B * T, C);
    }
    void cross_entropy(float*, float*, float*, void*, const int*, int64_t, int N, int, int Vp,
                       const TpGroup&, float, bool) override {
        rec(OpKind::cross_entropy, N, Vp);
    }
    void accumulate(float*, const float*, int64_t n) override { rec(OpKind::accumulate, n); }
    void cast_weights(void*, const float*, int64_t n) override { rec(OpKind::cast_weights, n); }
    void copy(void*, const void*, int64_t bytes) override { rec(OpKind::copy, bytes); }
    void upload_tokens(TokenSlot&, const std::vector<int32_t>&) override {}

  private:
    // a backward computing only its input gradient or only its weights' (zb-h1's B or W)
    void split_share(const void* dinp, const float* dw) const {
        if (t_trace && !t_trace->calls.empty() && (!dinp || !dw)) t_trace->calls.back().share = 0.5;
    }
    void rec(OpKind k, int64_t N, int64_t C = 0, int64_t OC = 0, int64_t B = 0, int64_t T = 0,
             int64_t NH = 0, bool fp8 = false) const {
        if (t_trace) t_trace->calls.push_back({k, N, C, OC, B, T, NH, traits.act, fp8});
    }
    // a GEMM: its FP8 workspace allocated and freed as the CUDA ops do
    void gemm(OpKind k, int N, int C, int OC) const {
        Tensor ws = fp8_workspace(
            N, C, OC, k == OpKind::matmul_backward || k == OpKind::matmul_gelu_backward);
        rec(k, N, C, OC, 0, 0, 0, ws.defined());
    }
};

}  // namespace

OpTrace* op_trace_install(OpTrace* t) {
    return std::exchange(t_trace, t);
}
OpTrace* op_trace_current() {
    return t_trace;
}

LayerOps& layer_ops_meta(const LayerTraits& target) {
    static std::mutex mu;
    static std::map<std::tuple<int, int, bool>, std::unique_ptr<MetaLayerOps>> ops;
    std::lock_guard<std::mutex> lock(mu);
    auto& p = ops[{(int)target.device, (int)target.act, target.fp8}];
    if (!p) p = std::make_unique<MetaLayerOps>(layer_traits(target.device, target.act, target.fp8));
    return *p;
}

LayerOps& layer_ops_without_fp8(LayerOps& ops) {
    if (!ops.traits.fp8) return ops;
    LayerTraits t = ops.traits;
    t.fp8 = false;
    return ops.device() == Device::meta ? layer_ops_meta(t) : layer_ops_for(t.device, t.act);
}

LayerOps& layer_ops_for(Device d, DType act, bool fp8) {
    if (d == Device::cuda) {
#ifdef TESSERA_HAVE_CUDA
        return layer_ops_cuda(act, fp8);
#else
        throw InputError("runtime.device: cuda needs a CUDA build of tessera");
#endif
    }
    TS_CHECK(d == Device::cpu, "layer_ops_for: no ops for the meta device without a target");
    return layer_ops_cpu();
}

}  // namespace tessera
