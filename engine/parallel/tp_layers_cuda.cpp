// GPT-2 layers on the GPU for the parallel runtime (compiled only in CUDA builds). The structure
// is tp_layers.cpp's — Megatron column/row-parallel blocks, vocab-parallel embedding and loss —
// with the GPU's fusions: cuBLASLt GEMMs with bias and GELU epilogues, flash attention (saving
// only the log-sum-exp, never T×T scores), and the classifier writing its gradient during the
// forward pass. Activations are T (bf16 or float); master weights and gradients are fp32, weights
// cast to T on use (recast when the parameter store's version moves).
#ifdef TESSERA_HAVE_CUDA
#include <cuda_runtime.h>

#include <cstring>

#include "engine/core/error.h"
#include "engine/kernels/cuda/attention.cuh"
#include "engine/kernels/cuda/cross_entropy.cuh"
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device.cuh"
#include "engine/kernels/cuda/elementwise.cuh"
#include "engine/kernels/cuda/embedding.cuh"
#include "engine/kernels/cuda/gelu.cuh"
#include "engine/kernels/cuda/layernorm.cuh"
#include "engine/kernels/cuda/matmul.cuh"
#include "engine/parallel/tp_layers.h"

namespace tessera {

namespace {

const auto kAct = MemCategory::activations;
const auto kWork = MemCategory::workspace;
constexpr Device kGpu = Device::cuda;

template <typename T>
constexpr DType dtype_of() {
    return std::is_same_v<T, float> ? DType::f32 : DType::bf16;
}

std::vector<std::pair<int64_t, int64_t>> rows(int64_t first, int64_t count) { return {{first, count}}; }

// Shared by the GPU layers: the T copy of the layer's weights, the tokens on the device.
template <typename T>
class CudaLayer : public GptLayer {
protected:
    explicit CudaLayer(const GptShardSpec& s) : spec_(s) { device = kGpu; }
    cudaStream_t st() const { return cuda_stream(); }

    // Pointer to parameter `i`'s weights as T (fp32 masters used directly when T is float).
    const T* w(int i) {
        if constexpr (std::is_same_v<T, float>) {
            return param_ptr[i];
        } else {
            if (i < (int)param16_ptr.size() && param16_ptr[i]) return (const T*)param16_ptr[i];
            refresh();
            return (const T*)cache_.data() + cache_off_[i];
        }
    }
    // Token ids and targets of a batch on the device (uploaded once per micro-batch, through a
    // pinned staging buffer per slot so the copy is asynchronous; a slot is reused only in a
    // later step, after the step's final synchronisation).
    const int* tokens(int micro, const Batch& b, bool targets) {
        TokenSlot& slot = tokens_[{micro, targets}];
        const auto& src = targets ? b.targets : b.inputs;
        const size_t bytes = sizeof(int) * src.size();
        if (slot.bytes < bytes) {
            if (slot.pinned) CUDA_CHECK(cudaFreeHost(slot.pinned));
            CUDA_CHECK(cudaMallocHost(&slot.pinned, bytes));
            slot.device = Tensor::empty({(int64_t)src.size()}, kWork, DType::i32, kGpu);
            slot.bytes = bytes;
        }
        // (a repeat upload of the same micro-batch writes the same bytes: harmless)
        std::memcpy(slot.pinned, src.data(), bytes);
        CUDA_CHECK(cudaMemcpyAsync(slot.device.data(), slot.pinned, bytes, cudaMemcpyHostToDevice, st()));
        return (const int*)slot.device.data();
    }
    void forget_tokens(int) {}
    Tensor act(Shape s) { return Tensor::empty(std::move(s), kAct, dtype_of<T>(), kGpu); }
    Tensor work(Shape s, DType t = dtype_of<T>()) { return Tensor::empty(std::move(s), kWork, t, kGpu); }
    void tp_all_reduce(void* x, int64_t n, DType t, ReduceOp op = ReduceOp::sum) {
        if (spec_.tp.comm) spec_.tp.comm->all_reduce(x, n, t, op);
    }

    GptShardSpec spec_;

private:
    void refresh() {
        if constexpr (!std::is_same_v<T, float>) {
            const auto& es = table_.entries();
            if (!cache_.defined()) {
                int64_t total = 0;
                for (const auto& e : es) {
                    cache_off_.push_back(total);
                    total += e.numel;
                }
                cache_ = Tensor::empty({std::max<int64_t>(total, 1)}, MemCategory::params, DType::bf16, kGpu);
            }
            if (cache_version_ == weights_version && cache_src_ == param_ptr) return;
            // the parameter store keeps a layer's parameters back to back: then one launch
            bool contiguous = true;
            for (size_t i = 0; i < es.size(); ++i) contiguous &= param_ptr[i] == param_ptr[0] + cache_off_[i];
            if (contiguous && !es.empty())
                cast_f32_to_bf16_cuda((T*)cache_.data(), param_ptr[0], cache_.numel(), st());
            else
                for (size_t i = 0; i < es.size(); ++i)
                    cast_f32_to_bf16_cuda((T*)cache_.data() + cache_off_[i], param_ptr[i], es[i].numel, st());
            cache_version_ = weights_version;
            cache_src_ = param_ptr;
        }
    }
    Tensor cache_;
    std::vector<int64_t> cache_off_;
    std::vector<float*> cache_src_;
    uint64_t cache_version_ = 0;
    struct TokenSlot {
        void* pinned = nullptr;
        size_t bytes = 0;
        Tensor device;
    };
    std::map<std::pair<int, bool>, TokenSlot> tokens_;
};

// ------------------------------------------------------------------------------------------
// Embedding: vocab-parallel wte + wpe (added by TP rank 0 before the all-reduce: exact)

template <typename T>
class CudaEmbedding final : public CudaLayer<T> {
    using B = CudaLayer<T>;

public:
    explicit CudaEmbedding(const GptShardSpec& s) : B(s) {
        this->name_ = "embedding";
        ParamTable global = gpt_param_table(s.dims);
        std::tie(v0_, v1_) = vocab_shard(s.dims.vocab, s.tp.rank, s.tp.size);
        const int64_t C = s.dims.d_model;
        this->add_param(global, "wte.weight", {v1_ - v0_, C}, rows(v0_, v1_ - v0_), 0, C);
        this->add_param(global, "wpe.weight", {s.dims.seq_len, C}, rows(0, s.dims.seq_len), 0, C);
    }

    Tensor forward(int micro, Tensor, const Batch& b) override {
        const int Bn = b.batch_size, Tn = b.seq_len, C = this->spec_.dims.d_model;
        Tensor out = this->act({Bn, Tn, C});
        const T* wpe = this->spec_.tp.rank == 0 ? this->w(1) : nullptr;
        embedding_forward_cuda<T>((T*)out.data(), this->tokens(micro, b, false), this->w(0), wpe, v0_,
                                  v1_, Bn, Tn, C, this->st());
        this->tp_all_reduce(out.data(), out.numel(), dtype_of<T>());
        this->saved_[micro];
        if (micro < 0) this->forget_tokens(micro);
        return out;
    }

    Tensor backward(int micro, Tensor dout, const Batch& b, float) override {
        const int Bn = b.batch_size, Tn = b.seq_len, C = this->spec_.dims.d_model;
        embedding_backward_cuda<T>(this->g("wte.weight"), this->g("wpe.weight"), (const T*)dout.data(),
                                   this->tokens(micro, b, false), v0_, v1_, Bn, Tn, C, this->st());
        this->saved_.erase(micro);
        this->forget_tokens(micro);
        return Tensor();
    }

private:
    int64_t v0_, v1_;
};

// ------------------------------------------------------------------------------------------
// Block

template <typename T>
class CudaBlock final : public CudaLayer<T> {
    using B = CudaLayer<T>;
    enum Saved { X, LN1, M1, R1, QKV, ATTY, LSE, RES1, LN2, M2, R2, FCH, FCG, kCount };

public:
    CudaBlock(const GptShardSpec& s, int l) : B(s) {
        this->name_ = "block." + std::to_string(l);
        ParamTable global = gpt_param_table(s.dims);
        const int64_t C = s.dims.d_model, t = s.tp.size, r = s.tp.rank, Cl = C / t;
        std::string p = "h." + std::to_string(l) + ".";
        auto qkv_rows = std::vector<std::pair<int64_t, int64_t>>{{r * Cl, Cl}, {C + r * Cl, Cl}, {2 * C + r * Cl, Cl}};
        this->add_param(global, p + "ln_1.weight", {C}, rows(0, C), 0, 1);
        this->add_param(global, p + "ln_1.bias", {C}, rows(0, C), 0, 1);
        this->add_param(global, p + "attn.c_attn.weight", {3 * Cl, C}, qkv_rows, 0, C);
        this->add_param(global, p + "attn.c_attn.bias", {3 * Cl}, qkv_rows, 0, 1);
        this->add_param(global, p + "attn.c_proj.weight", {C, Cl}, rows(0, C), r * Cl, (r + 1) * Cl);
        this->add_param(global, p + "attn.c_proj.bias", {C}, rows(0, C), 0, 1);
        this->add_param(global, p + "ln_2.weight", {C}, rows(0, C), 0, 1);
        this->add_param(global, p + "ln_2.bias", {C}, rows(0, C), 0, 1);
        this->add_param(global, p + "mlp.c_fc.weight", {4 * Cl, C}, rows(4 * r * Cl, 4 * Cl), 0, C);
        this->add_param(global, p + "mlp.c_fc.bias", {4 * Cl}, rows(4 * r * Cl, 4 * Cl), 0, 1);
        this->add_param(global, p + "mlp.c_proj.weight", {C, 4 * Cl}, rows(0, C), 4 * r * Cl, 4 * (r + 1) * Cl);
        this->add_param(global, p + "mlp.c_proj.bias", {C}, rows(0, C), 0, 1);
    }

    Tensor forward(int micro, Tensor x, const Batch& b) override {
        std::vector<Tensor> s = compute(std::move(x), b.batch_size, b.seq_len);
        Tensor out = std::move(s[kCount]);
        s.resize(kCount);
        if (micro < 0) return out;  // evaluation: nothing kept
        if (this->spec_.recompute == Recompute::full) {
            for (int i = 1; i < kCount; ++i) s[i] = Tensor();
        } else if (this->spec_.recompute == Recompute::selective) {
            s[FCG] = Tensor();  // the GELU output: recomputed from its input in backward
        }
        this->saved_[micro] = std::move(s);
        return out;
    }

    Tensor backward(int micro, Tensor dout, const Batch& b, float) override {
        const int Bn = b.batch_size, Tn = b.seq_len, N = Bn * Tn;
        const int C = this->spec_.dims.d_model, Cl = C / this->spec_.tp.size;
        const int NHl = this->spec_.dims.n_head / this->spec_.tp.size;
        auto it = this->saved_.find(micro);
        TS_CHECK(it != this->saved_.end(), this->name_, ": backward before forward");
        std::vector<Tensor>& s = it->second;
        if (this->spec_.recompute == Recompute::full) {
            std::vector<Tensor> r = compute(std::move(s[X]), Bn, Tn);
            r.resize(kCount);
            s = std::move(r);
        } else if (this->spec_.recompute == Recompute::selective) {
            s[FCG] = this->act({N, 4 * Cl});
            gelu_forward_cuda<T>((T*)s[FCG].data(), (const T*)s[FCH].data(), (long)N * 4 * Cl, this->st());
        }
        cudaStream_t st = this->st();
        auto P = [&](Saved k) { return (T*)s[k].data(); };
        T* g = (T*)dout.data();  // d(block output); becomes d(block input) in place
        Tensor dfc = this->work({N, 4 * Cl});
        matmul_backward_cuda<T>((T*)dfc.data(), this->grad_ptr[10], this->grad_ptr[11], g, P(FCG),
                                this->w(10), N, 4 * Cl, C, st);
        gelu_backward_cuda<T>((T*)dfc.data(), P(FCH), (const T*)dfc.data(), (long)N * 4 * Cl, st);
        Tensor dln = this->work({N, C});
        matmul_backward_cuda<T>((T*)dln.data(), this->grad_ptr[8], this->grad_ptr[9], (const T*)dfc.data(),
                                P(LN2), this->w(8), N, C, 4 * Cl, st);
        dfc = Tensor();
        this->tp_all_reduce(dln.data(), dln.numel(), dtype_of<T>());
        layernorm_backward_cuda<T>(g, this->grad_ptr[6], this->grad_ptr[7], (const T*)dln.data(), P(RES1),
                                   this->w(6), (const float*)s[M2].data(), (const float*)s[R2].data(), N, C, st);
        Tensor datty = this->work({N, Cl});
        matmul_backward_cuda<T>((T*)datty.data(), this->grad_ptr[4], this->grad_ptr[5], g, P(ATTY),
                                this->w(4), N, Cl, C, st);
        Tensor dqkv = this->work({N, 3 * Cl});
        attention_backward_cuda<T>((T*)dqkv.data(), (const T*)datty.data(), P(QKV), P(ATTY),
                                   (const float*)s[LSE].data(), Bn, Tn, Cl, NHl, st);
        datty = Tensor();
        matmul_backward_cuda<T>((T*)dln.data(), this->grad_ptr[2], this->grad_ptr[3], (const T*)dqkv.data(),
                                P(LN1), this->w(2), N, C, 3 * Cl, st);
        dqkv = Tensor();
        this->tp_all_reduce(dln.data(), dln.numel(), dtype_of<T>());
        layernorm_backward_cuda<T>(g, this->grad_ptr[0], this->grad_ptr[1], (const T*)dln.data(), P(X),
                                   this->w(0), (const float*)s[M1].data(), (const float*)s[R1].data(), N, C, st);
        this->saved_.erase(it);
        return dout;
    }

private:
    // The block's forward from x; returns the saved tensors and, at index kCount, the output.
    std::vector<Tensor> compute(Tensor x, int Bn, int Tn) {
        const int N = Bn * Tn, C = this->spec_.dims.d_model, Cl = C / this->spec_.tp.size;
        const int NHl = this->spec_.dims.n_head / this->spec_.tp.size;
        cudaStream_t st = this->st();
        std::vector<Tensor> s(kCount + 1);
        s[X] = std::move(x);
        auto P = [&](int k) { return (T*)s[k].data(); };
        auto F = [&](int k) { return (float*)s[k].data(); };
        s[LN1] = this->act({N, C});
        s[M1] = Tensor::empty({N}, kAct, DType::f32, kGpu);
        s[R1] = Tensor::empty({N}, kAct, DType::f32, kGpu);
        layernorm_forward_cuda<T>(P(LN1), F(M1), F(R1), P(X), this->w(0), this->w(1), N, C, st);
        s[QKV] = this->act({N, 3 * Cl});
        matmul_forward_cuda<T>(P(QKV), P(LN1), this->w(2), this->w(3), N, C, 3 * Cl, st);
        s[ATTY] = this->act({N, Cl});
        s[LSE] = Tensor::empty({Bn, NHl, Tn}, kAct, DType::f32, kGpu);
        attention_forward_cuda<T>(P(ATTY), F(LSE), P(QKV), Bn, Tn, Cl, NHl, st);
        // row-parallel projection: partial sums, all-reduced, then bias and residual
        s[RES1] = this->act({N, C});
        matmul_forward_cuda<T>(P(RES1), P(ATTY), this->w(4), nullptr, N, Cl, C, st);
        this->tp_all_reduce(s[RES1].data(), s[RES1].numel(), dtype_of<T>());
        add_bias_residual_cuda<T>(P(RES1), this->w(5), P(X), N, C, st);
        s[LN2] = this->act({N, C});
        s[M2] = Tensor::empty({N}, kAct, DType::f32, kGpu);
        s[R2] = Tensor::empty({N}, kAct, DType::f32, kGpu);
        layernorm_forward_cuda<T>(P(LN2), F(M2), F(R2), P(RES1), this->w(6), this->w(7), N, C, st);
        s[FCH] = this->act({N, 4 * Cl});
        s[FCG] = this->act({N, 4 * Cl});
        matmul_forward_cuda<T>(P(FCG), P(LN2), this->w(8), this->w(9), N, C, 4 * Cl, st, true, P(FCH));
        s[kCount] = this->act({Bn, Tn, C});
        matmul_forward_cuda<T>(P(kCount), P(FCG), this->w(10), nullptr, N, 4 * Cl, C, st);
        this->tp_all_reduce(s[kCount].data(), s[kCount].numel(), dtype_of<T>());
        add_bias_residual_cuda<T>(P(kCount), this->w(11), P(RES1), N, C, st);
        return s;
    }
};

// ------------------------------------------------------------------------------------------
// Head: final LayerNorm, LM head on the (tied) vocab-parallel wte, vocab-parallel fused loss

template <typename T>
class CudaHead final : public CudaLayer<T> {
    using B = CudaLayer<T>;

public:
    CudaHead(const GptShardSpec& s, GptLayer* tied) : B(s), tied_(tied) {
        this->name_ = "head";
        ParamTable global = gpt_param_table(s.dims);
        const int64_t C = s.dims.d_model;
        this->add_param(global, "ln_f.weight", {C}, rows(0, C), 0, 1);
        this->add_param(global, "ln_f.bias", {C}, rows(0, C), 0, 1);
        std::tie(v0_, v1_) = vocab_shard(s.dims.vocab, s.tp.rank, s.tp.size);
        if (!tied_) this->add_param(global, "wte.weight", {v1_ - v0_, C}, rows(v0_, v1_ - v0_), 0, C);
    }
    GptLayer* tied_embedding() const override { return tied_; }

    Tensor forward(int micro, Tensor x, const Batch& b) override {
        const int N = b.batch_size * b.seq_len, C = this->spec_.dims.d_model, Vl = (int)(v1_ - v0_);
        cudaStream_t st = this->st();
        std::vector<Tensor> s(5);
        s[0] = std::move(x);
        s[1] = this->act({N, C});
        s[2] = Tensor::empty({N}, kAct, DType::f32, kGpu);
        s[3] = Tensor::empty({N}, kAct, DType::f32, kGpu);
        layernorm_forward_cuda<T>((T*)s[1].data(), (float*)s[2].data(), (float*)s[3].data(), (const T*)s[0].data(),
                                  this->w(0), this->w(1), N, C, st);
        // logits over the padded vocabulary shard (Vp columns: aligned rows keep cuBLASLt on its
        // fast kernels; an odd 50257 is 7x slower); the loss ignores the padding columns
        const int Vp = padded_vocab();
        s[4] = this->act({N, Vp});
        T* logits = (T*)s[4].data();
        matmul_forward_cuda<T>(logits, (const T*)s[1].data(), wte_padded(), nullptr, N, C, Vp, st);
        Tensor stats = this->work({3, N}, DType::f32);
        float* mx = (float*)stats.data();
        float* sum = mx + N;
        float* tt = sum + N;
        const int* tgt = this->tokens(micro, b, true);
        ce_row_stats_cuda<T>(mx, sum, tt, logits, tgt, v0_, N, Vl, st, Vp);
        if (this->spec_.tp.comm) {  // combine the shards: global max, then the rescaled sums
            Tensor gmax_t = this->work({N}, DType::f32);
            float* gmax = (float*)gmax_t.data();
            CUDA_CHECK(cudaMemcpyAsync(gmax, mx, sizeof(float) * N, cudaMemcpyDeviceToDevice, st));
            this->tp_all_reduce(gmax, N, DType::f32, ReduceOp::max);
            ce_rescale_cuda(mx, sum, tt, gmax, N, st);
            this->tp_all_reduce(sum, 2 * (int64_t)N, DType::f32);
        }
        Tensor losses = Tensor::empty({N}, kWork, DType::f32, kGpu);
        if (micro < 0) {  // evaluation: the loss only
            ce_loss_only_cuda((float*)losses.data(), sum, tt, tgt, N, st);
            this->forget_tokens(micro);
            return losses;
        }
        // the gradient of the loss is written into the logits now: backward costs no pass
        ce_loss_and_grad_cuda<T>((float*)losses.data(), logits, mx, sum, tt, tgt, v0_,
                                 this->spec_.loss_scale, N, Vl, st, Vp);
        this->saved_[micro] = std::move(s);
        return losses;
    }

    Tensor backward(int micro, Tensor, const Batch& b, float) override {
        const int N = b.batch_size * b.seq_len, C = this->spec_.dims.d_model, Vl = (int)(v1_ - v0_);
        cudaStream_t st = this->st();
        auto it = this->saved_.find(micro);
        TS_CHECK(it != this->saved_.end(), "head: backward before forward");
        std::vector<Tensor>& s = it->second;
        const int Vp = padded_vocab();
        Tensor dln = this->work({N, C});
        Tensor dw = Tensor::zeros({Vp, C}, kWork, DType::f32, kGpu);  // padded rows dropped below
        matmul_backward_cuda<T>((T*)dln.data(), (float*)dw.data(), nullptr, (const T*)s[4].data(),
                                (const T*)s[1].data(), wte_padded(), N, C, Vp, st);
        accumulate_cuda(dwte(), (const float*)dw.data(), (long)Vl * C, st);
        dw = Tensor();
        this->tp_all_reduce(dln.data(), dln.numel(), dtype_of<T>());
        Tensor dx = Tensor::zeros({b.batch_size, b.seq_len, C}, kAct, dtype_of<T>(), kGpu);
        layernorm_backward_cuda<T>((T*)dx.data(), this->grad_ptr[0], this->grad_ptr[1], (const T*)dln.data(),
                                   (const T*)s[0].data(), this->w(0), (const float*)s[2].data(),
                                   (const float*)s[3].data(), N, C, st);
        this->saved_.erase(it);
        this->forget_tokens(micro);
        return dx;
    }

private:
    int padded_vocab() const { return (int)(((v1_ - v0_) + 127) / 128 * 128); }
    // The (tied) wte shard in T, padded with zero rows to padded_vocab(); refreshed when the
    // parameter version or storage moves.
    const T* wte_padded() {
        const int64_t C = this->spec_.dims.d_model, Vl = v1_ - v0_, Vp = padded_vocab();
        const GptLayer* owner = tied_ ? tied_ : this;
        const int wi = tied_ ? tied_->param_index("wte.weight") : 2;
        const float* src = owner->param_ptr[wi];
        const void* src16 = wi < (int)owner->param16_ptr.size() ? owner->param16_ptr[wi] : nullptr;
        if (!pad_.defined()) {
            pad_ = Tensor::zeros({Vp, C}, MemCategory::params, dtype_of<T>(), kGpu);
            pad_version_ = 0;
        }
        if (pad_version_ != this->weights_version || pad_src_ != src) {
            if constexpr (std::is_same_v<T, float>)
                CUDA_CHECK(cudaMemcpyAsync(pad_.data(), src, sizeof(float) * Vl * C,
                                           cudaMemcpyDeviceToDevice, this->st()));
            else if (src16)  // the store's bf16 image: a copy, no cast
                CUDA_CHECK(cudaMemcpyAsync(pad_.data(), src16, sizeof(T) * Vl * C,
                                           cudaMemcpyDeviceToDevice, this->st()));
            else
                cast_f32_to_bf16_cuda((T*)pad_.data(), src, Vl * C, this->st());
            pad_version_ = this->weights_version;
            pad_src_ = src;
        }
        return (const T*)pad_.data();
    }
    Tensor pad_;
    uint64_t pad_version_ = 0;
    const float* pad_src_ = nullptr;
    float* dwte() {
        return tied_ ? tied_->grad_ptr[tied_->param_index("wte.weight")] : this->grad_ptr[2];
    }
    GptLayer* tied_;
    int64_t v0_, v1_;
};

template <typename T>
std::unique_ptr<GptLayer> create(const GptShardSpec& spec, int index, GptLayer* tied) {
    const GptDims& d = spec.dims;
    if (index == 0) return std::make_unique<CudaEmbedding<T>>(spec);
    if (index <= d.n_layer) return std::make_unique<CudaBlock<T>>(spec, index - 1);
    return std::make_unique<CudaHead<T>>(spec, tied);
}

}  // namespace

std::unique_ptr<GptLayer> gpt_layer_create_cuda(const GptShardSpec& spec, int index,
                                                GptLayer* tied_embedding) {
    TS_CHECK(spec.dims.n_head % spec.tp.size == 0, "n_head not divisible by tp");
    TS_CHECK(index >= 0 && index <= spec.dims.n_layer + 1, "layer index ", index, " out of range");
    if (spec.act_dtype == DType::bf16) return create<bf16>(spec, index, tied_embedding);
    return create<float>(spec, index, tied_embedding);
}

}  // namespace tessera
#endif
