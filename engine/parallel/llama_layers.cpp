// The Llama family's transformer block for the parallel runtime, Megatron style, written once for
// every device (it computes through LayerOps): RMSNorm; one column-parallel GEMM for q, k and v
// (this TP rank's query heads and its key/value heads, plus Qwen2's biases); Qwen3's RMSNorm of
// each q and k head (its weight replicated, its gradient summed over the TP group); rotary
// embeddings on q and k; grouped-query causal attention; the row-parallel output projection,
// all-reduced, plus the residual; RMSNorm; one column-parallel GEMM for gate and up; SwiGLU; the
// row-parallel down projection, all-reduced, plus the residual. No other biases. Each TP rank holds
// whole key/value heads (the config requires tp to divide n_kv_head). The embedding and the head
// are shared with GPT (tp_layers.cpp).
#include <string>

#include "engine/core/error.h"
#include "engine/kernels/cpu/rope.h"
#include "engine/parallel/tp_layers.h"

namespace tessera {

namespace {

class LlamaBlock final : public Layer {
    // saved for backward; STATS: the attention's probabilities or log-sum-exp (LayerTraits);
    // with q/k norm, QKR: q, k, v before it, QR/KR its statistics (else undefined)
    enum Saved { X, LN1, R1, QKV, ATTY, STATS, RES1, LN2, R2, GU, ACT, QKR, QR, KR, kCount };

  public:
    LlamaBlock(const ShardSpec& s, int l) : Layer(*s.ops), spec_(s), d_(spec_.model.llama) {
        name_ = "block." + std::to_string(l);
        const int64_t t = s.tp.size, r = s.tp.rank, C = d_.d_model;
        TS_CHECK(d_.n_head % t == 0 && d_.n_kv_head % t == 0 && d_.ffn % t == 0, name_, ": tp ", t,
                 " must divide n_head, n_kv_head and ffn");
        NHl_ = d_.n_head / (int)t, KVl_ = d_.n_kv_head / (int)t, Fl_ = d_.ffn / (int)t;
        Ql_ = NHl_ * d_.head_dim, Kl_ = KVl_ * d_.head_dim;
        const int64_t Q = d_.q_width(), K = d_.kv_width(), F = d_.ffn;
        const ParamTable& global = s.model.param_table();
        const std::string p = "model.layers." + std::to_string(l) + ".";
        // this rank's query heads, then its key heads, then its value heads
        std::vector<std::pair<int64_t, int64_t>> qkv{
            {r * Ql_, Ql_}, {Q + r * Kl_, Kl_}, {Q + K + r * Kl_, Kl_}};
        add_param(global, p + "input_layernorm.weight", {C}, {{0, C}}, 0, 1);
        add_param(global, p + "self_attn.qkv_proj.weight", {Ql_ + 2 * Kl_, C}, qkv, 0, C);
        if (d_.qkv_bias)
            add_param(global, p + "self_attn.qkv_proj.bias", {Ql_ + 2 * Kl_}, qkv, 0, 1);
        if (d_.qk_norm) {
            add_param(global, p + "self_attn.q_norm.weight", {d_.head_dim}, {{0, d_.head_dim}}, 0,
                      1);
            add_param(global, p + "self_attn.k_norm.weight", {d_.head_dim}, {{0, d_.head_dim}}, 0,
                      1);
        }
        add_param(global, p + "self_attn.o_proj.weight", {C, Ql_}, {{0, C}}, r * Ql_,
                  (r + 1) * Ql_);
        add_param(global, p + "post_attention_layernorm.weight", {C}, {{0, C}}, 0, 1);
        add_param(global, p + "mlp.gate_up_proj.weight", {2 * Fl_, C},
                  {{r * Fl_, Fl_}, {F + r * Fl_, Fl_}}, 0, C);
        add_param(global, p + "mlp.down_proj.weight", {C, Fl_}, {{0, C}}, r * Fl_, (r + 1) * Fl_);
        ln1_ = param_index(p + "input_layernorm.weight");
        qkv_ = param_index(p + "self_attn.qkv_proj.weight");
        qkv_b_ = d_.qkv_bias ? param_index(p + "self_attn.qkv_proj.bias") : -1;
        qn_ = d_.qk_norm ? param_index(p + "self_attn.q_norm.weight") : -1;
        kn_ = d_.qk_norm ? param_index(p + "self_attn.k_norm.weight") : -1;
        o_ = param_index(p + "self_attn.o_proj.weight");
        ln2_ = param_index(p + "post_attention_layernorm.weight");
        gu_ = param_index(p + "mlp.gate_up_proj.weight");
        down_ = param_index(p + "mlp.down_proj.weight");
        inv_freq_ = rope_inv_freq(d_.head_dim, d_.rope_theta, d_.rope_scaling);
    }

    Tensor forward(int micro, Tensor x, const Batch& b) override {
        std::vector<Tensor> s = compute(std::move(x), b.batch_size, b.seq_len);
        Tensor out = std::move(s[kCount]);
        s.resize(kCount);
        if (micro < 0) return out;  // evaluation: nothing kept
        // selective: the large, cheap ones, the SwiGLU output and the attention probabilities
        save_for_backward(micro, std::move(s), spec_.recompute, ACT, STATS);
        return out;
    }

    // One rank's cached decoding: the block's forward over n new tokens per sequence, their keys
    // and values appended to the block's cache, attention over the cache.
    Tensor decode(Tensor x, const DecodeStep& st) override {
        TS_CHECK(spec_.tp.size == 1, name_, ": cached decoding runs on one rank");
        TS_CHECK(st.max_len > 0 && st.pos0 + st.n <= st.max_len, name_, ": positions ", st.pos0,
                 "..", st.pos0 + st.n, " beyond the cache of ", st.max_len);
        if (!kc_.defined() || cache_B_ != st.B || cache_len_ != st.max_len) {
            kc_ = act({st.B, st.max_len, Kl_});
            vc_ = act({st.B, st.max_len, Kl_});
            cache_B_ = st.B, cache_len_ = st.max_len;
        }
        return std::move(compute(std::move(x), st.B, st.n, &st)[kCount]);
    }

    // the four projections' weight gradients: each written whole by its GEMM
    bool grad_written_whole(int i) const override {
        return i == qkv_ || i == o_ || i == gu_ || i == down_;
    }

    Tensor backward(int micro, Tensor dout, const Batch& b) override {
        const int B = b.batch_size, T = b.seq_len, N = B * T, C = d_.d_model, hd = d_.head_dim;
        const int S = Ql_ + 2 * Kl_;
        std::vector<Tensor>& s = saved_for_backward(micro, B, T);
        const DType adt = ops_.traits.act;
        void* gp = dout.data();  // d(block output); becomes d(block input) in place
        Tensor dgu = work({N, 2 * Fl_});
        {
            Tensor dact = work({N, Fl_});
            ops_.matmul_backward(dact.data(), grad_ptr[down_], nullptr, gp, s[ACT].data(), w(down_),
                                 N, Fl_, C, first_write(down_));
            ops_.swiglu_backward(dgu.data(), dact.data(), s[GU].data(), N, Fl_);
        }
        Tensor dln = work({N, C});
        ops_.matmul_backward(dln.data(), grad_ptr[gu_], nullptr, dgu.data(), s[LN2].data(), w(gu_),
                             N, C, 2 * Fl_, first_write(gu_));
        dgu = Tensor();
        spec_.tp.all_reduce(dln.data(), dln.numel(), adt);
        ops_.rmsnorm_backward(gp, grad_ptr[ln2_], dln.data(), s[RES1].data(), w(ln2_), s[R2].f32(),
                              N, C);
        Tensor datty = work({N, Ql_});
        ops_.matmul_backward(datty.data(), grad_ptr[o_], nullptr, gp, s[ATTY].data(), w(o_), N, Ql_,
                             C, first_write(o_));
        Tensor dqkv = work({N, S});
        ops_.attention_backward(dqkv.data(), datty.data(), s[QKV].data(), s[ATTY].data(),
                                s[STATS].f32(), B, T, Ql_, NHl_, KVl_);
        datty = Tensor();
        // the rotation's gradient: rotate back (query heads, then the key heads after them)
        ops_.rope(dqkv.data(), B, T, NHl_ + KVl_, hd, S, inv_freq_, true);
        if (d_.qk_norm) qk_norm_backward(dqkv, s, N);
        ops_.matmul_backward(dln.data(), grad_ptr[qkv_], qkv_b_ >= 0 ? grad_ptr[qkv_b_] : nullptr,
                             dqkv.data(), s[LN1].data(), w(qkv_), N, C, S, first_write(qkv_));
        dqkv = Tensor();
        spec_.tp.all_reduce(dln.data(), dln.numel(), adt);
        ops_.rmsnorm_backward(gp, grad_ptr[ln1_], dln.data(), s[X].data(), w(ln1_), s[R1].f32(), N,
                              C);
        release(micro);
        return dout;
    }

    // The backward above split in two (zb-h1). B: the input-gradient chain without the weight
    // gradients; it keeps each GEMM's and norm's output gradient for W (down, gate/up,
    // post-attention norm, o, qkv, input norm) and drops what W does not read (the gate/up
    // output, the attention statistics, QKV). With qk_norm the heads' norm gradient would need
    // splitting too: those blocks run whole (splits_backward false).
    bool splits_backward() const override { return !d_.qk_norm; }
    Tensor backward_input(int micro, Tensor dout, const Batch& b) override {
        const int B = b.batch_size, T = b.seq_len, N = B * T, C = d_.d_model, hd = d_.head_dim;
        const int S = Ql_ + 2 * Kl_;
        TS_CHECK(!d_.qk_norm, name_, ": qk_norm blocks run their whole backward");
        std::vector<Tensor>& s = saved_for_backward(micro, B, T);
        const DType adt = ops_.traits.act;
        const int64_t es = dtype_size(adt);
        Tensor dx = act({B, T, C});  // d(block output), becoming d(block input); dout stays for W
        ops_.copy(dx.data(), dout.data(), es * N * C);
        void* gp = dx.data();
        Tensor dgu = act({N, 2 * Fl_});
        {
            Tensor dact = work({N, Fl_});
            ops_.matmul_backward(dact.data(), nullptr, nullptr, gp, s[ACT].data(), w(down_), N, Fl_,
                                 C, false);
            ops_.swiglu_backward(dgu.data(), dact.data(), s[GU].data(), N, Fl_);
        }
        Tensor dln2 = act({N, C});
        ops_.matmul_backward(dln2.data(), nullptr, nullptr, dgu.data(), s[LN2].data(), w(gu_), N, C,
                             2 * Fl_, false);
        spec_.tp.all_reduce(dln2.data(), dln2.numel(), adt);
        ops_.rmsnorm_backward(gp, nullptr, dln2.data(), s[RES1].data(), w(ln2_), s[R2].f32(), N, C);
        Tensor dres1 = act({N, C});
        ops_.copy(dres1.data(), gp, es * N * C);
        Tensor datty = work({N, Ql_});
        ops_.matmul_backward(datty.data(), nullptr, nullptr, gp, s[ATTY].data(), w(o_), N, Ql_, C,
                             false);
        Tensor dqkv = act({N, S});
        ops_.attention_backward(dqkv.data(), datty.data(), s[QKV].data(), s[ATTY].data(),
                                s[STATS].f32(), B, T, Ql_, NHl_, KVl_);
        datty = Tensor();
        ops_.rope(dqkv.data(), B, T, NHl_ + KVl_, hd, S, inv_freq_, true);
        Tensor dln1 = act({N, C});
        ops_.matmul_backward(dln1.data(), nullptr, nullptr, dqkv.data(), s[LN1].data(), w(qkv_), N,
                             C, S, false);
        spec_.tp.all_reduce(dln1.data(), dln1.numel(), adt);
        ops_.rmsnorm_backward(gp, nullptr, dln1.data(), s[X].data(), w(ln1_), s[R1].f32(), N, C);
        for (int k : {GU, STATS, QKV}) s[k] = Tensor();  // W reads none of them
        wsaved_[micro] = tensor_list(std::move(dout), std::move(dgu), std::move(dln2),
                                     std::move(dres1), std::move(dqkv), std::move(dln1));
        return dx;
    }
    void backward_weight(int micro, const Batch& b) override {
        const int N = b.batch_size * b.seq_len, C = d_.d_model, S = Ql_ + 2 * Kl_;
        std::vector<Tensor>& s = saved_.at(micro);
        std::vector<Tensor>& d =
            w_saved_at(micro);  // d out, d gate/up, d ln2, d res1, d qkv, d ln1
        ops_.matmul_backward(nullptr, grad_ptr[down_], nullptr, d[0].data(), s[ACT].data(), nullptr,
                             N, Fl_, C, first_write(down_));
        ops_.matmul_backward(nullptr, grad_ptr[gu_], nullptr, d[1].data(), s[LN2].data(), nullptr,
                             N, C, 2 * Fl_, first_write(gu_));
        ops_.rmsnorm_backward(nullptr, grad_ptr[ln2_], d[2].data(), s[RES1].data(), nullptr,
                              s[R2].f32(), N, C);
        ops_.matmul_backward(nullptr, grad_ptr[o_], nullptr, d[3].data(), s[ATTY].data(), nullptr,
                             N, Ql_, C, first_write(o_));
        ops_.matmul_backward(nullptr, grad_ptr[qkv_], qkv_b_ >= 0 ? grad_ptr[qkv_b_] : nullptr,
                             d[4].data(), s[LN1].data(), nullptr, N, C, S, first_write(qkv_));
        ops_.rmsnorm_backward(nullptr, grad_ptr[ln1_], d[5].data(), s[X].data(), nullptr,
                              s[R1].f32(), N, C);
        release(micro);
    }

  private:
    // micro's saved tensors, the ones the recompute policy dropped computed again (the SwiGLU
    // output the selective one's cheap activation; the whole backward and B both start here).
    std::vector<Tensor>& saved_for_backward(int micro, int B, int T) {
        const int N = B * T;
        return saved_recomputed(
            micro, spec_.recompute, [&](Tensor x) { return compute(std::move(x), B, T); }, STATS,
            QKV, {B, T, Ql_, NHl_, KVl_},
            [&](std::vector<Tensor>& s) {
                s[ACT] = act({N, Fl_});
                ops_.swiglu_forward(s[ACT].data(), s[GU].data(), N, Fl_);
            });
    }

    // element `k` of a tensor's rows, in the activation dtype
    void* at(Tensor& t, int64_t k) {
        return static_cast<char*>(t.data()) + k * dtype_size(ops_.traits.act);
    }

    // dqkv's q and k heads: from the gradient of the normalised heads to that of the raw ones, in
    // place. The weights' gradients are partial sums over this rank's heads: with tensor
    // parallelism they are summed over the group before they are added.
    void qk_norm_backward(Tensor& dqkv, std::vector<Tensor>& s, int N) {
        const int hd = d_.head_dim, S = Ql_ + 2 * Kl_;
        Tensor part;
        float* dq = grad_ptr[qn_];
        float* dk = grad_ptr[kn_];
        if (spec_.tp.size > 1) {
            part = Tensor::zeros({2 * hd}, MemCategory::workspace, DType::f32, device);
            dq = part.f32(), dk = part.f32() + hd;
        }
        ops_.head_rmsnorm_backward(dqkv.data(), dq, dqkv.data(), s[QKR].data(), w(qn_), s[QR].f32(),
                                   N, NHl_, hd, S);
        ops_.head_rmsnorm_backward(at(dqkv, Ql_), dk, at(dqkv, Ql_), at(s[QKR], Ql_), w(kn_),
                                   s[KR].f32(), N, KVl_, hd, S);
        if (part.defined()) {
            spec_.tp.all_reduce(part.f32(), 2 * hd, DType::f32);
            ops_.accumulate(grad_ptr[qn_], part.f32(), hd);
            ops_.accumulate(grad_ptr[kn_], part.f32() + hd, hd);
        }
    }

    // The block's forward from its input x (B, T, C); returns the saved tensors and, at index
    // kCount, the output. With a decode step: the T tokens sit at positions pos0 .. pos0 + T, their
    // keys and values go into the cache and the queries attend over it (nothing is saved).
    std::vector<Tensor> compute(Tensor x, int B, int T, const DecodeStep* dec = nullptr) {
        const int N = B * T, C = d_.d_model, hd = d_.head_dim, S = Ql_ + 2 * Kl_;
        const auto kA = MemCategory::activations;
        std::vector<Tensor> s(kCount + 1);
        s[X] = std::move(x);
        auto D = [&](int k) { return s[k].data(); };
        s[LN1] = act({N, C});
        s[R1] = f32({N}, kA);
        ops_.rmsnorm_forward(D(LN1), s[R1].f32(), D(X), w(ln1_), N, C, d_.norm_eps);
        s[QKV] = act({N, S});
        if (d_.qk_norm) {  // q, k, v into QKR; QKV = v and the normalised q and k heads
            s[QKR] = act({N, S});
            ops_.matmul_forward(D(QKR), D(LN1), w(qkv_), qkv_b_ >= 0 ? w(qkv_b_) : nullptr, N, C,
                                S);
            ops_.copy(D(QKV), D(QKR), s[QKV].nbytes());
            s[QR] = f32({N, NHl_}, kA);
            s[KR] = f32({N, KVl_}, kA);
            ops_.head_rmsnorm_forward(D(QKV), s[QR].f32(), D(QKR), w(qn_), N, NHl_, hd, S,
                                      d_.norm_eps);
            ops_.head_rmsnorm_forward(at(s[QKV], Ql_), s[KR].f32(), at(s[QKR], Ql_), w(kn_), N,
                                      KVl_, hd, S, d_.norm_eps);
        } else {
            ops_.matmul_forward(D(QKV), D(LN1), w(qkv_), qkv_b_ >= 0 ? w(qkv_b_) : nullptr, N, C,
                                S);
        }
        // q heads, then k heads
        ops_.rope(D(QKV), B, T, NHl_ + KVl_, hd, S, inv_freq_, false, dec ? dec->pos0 : 0);
        s[ATTY] = act({N, Ql_});
        if (dec) {
            const int64_t es = dtype_size(ops_.traits.act);
            for (int b = 0; b < B; ++b) {  // the new keys and values into the cache at pos0
                const int64_t dst = ((int64_t)b * dec->max_len + dec->pos0) * Kl_ * es,
                              src = (int64_t)b * T * S * es;
                ops_.copy_rows(static_cast<char*>(kc_.data()) + dst, Kl_ * es,
                               static_cast<char*>(D(QKV)) + src + Ql_ * es, S * es, T, Kl_ * es);
                ops_.copy_rows(static_cast<char*>(vc_.data()) + dst, Kl_ * es,
                               static_cast<char*>(D(QKV)) + src + (Ql_ + Kl_) * es, S * es, T,
                               Kl_ * es);
            }
            ops_.attention_decode(D(ATTY), D(QKV), S, kc_.data(), vc_.data(), B, T, dec->pos0, NHl_,
                                  KVl_, hd, dec->max_len);
        } else {
            s[STATS] =
                ops_.traits.attention_scores ? f32({B, NHl_, T, T}, kA) : f32({B, NHl_, T}, kA);
            ops_.attention_forward(D(ATTY), s[STATS].f32(), D(QKV), B, T, Ql_, NHl_, KVl_);
        }
        // row-parallel projection: partial sums, all-reduced, then the residual
        s[RES1] = act({N, C});
        ops_.projection_residual(D(RES1), D(ATTY), w(o_), nullptr, D(X), N, Ql_, C, spec_.tp);
        s[LN2] = act({N, C});
        s[R2] = f32({N}, kA);
        ops_.rmsnorm_forward(D(LN2), s[R2].f32(), D(RES1), w(ln2_), N, C, d_.norm_eps);
        s[GU] = act({N, 2 * Fl_});
        ops_.matmul_forward(D(GU), D(LN2), w(gu_), nullptr, N, C, 2 * Fl_);
        s[ACT] = act({N, Fl_});
        ops_.swiglu_forward(D(ACT), D(GU), N, Fl_);
        s[kCount] = act({B, T, C});
        ops_.projection_residual(D(kCount), D(ACT), w(down_), nullptr, D(RES1), N, Fl_, C,
                                 spec_.tp);
        return s;
    }

    ShardSpec spec_;
    const LlamaDims& d_;
    int NHl_ = 0, KVl_ = 0, Fl_ = 0, Ql_ = 0, Kl_ = 0;
    int ln1_ = 0, qkv_ = 0, qkv_b_ = -1, qn_ = -1, kn_ = -1, o_ = 0, ln2_ = 0, gu_ = 0,
        down_ = 0;  // parameter indices
    std::vector<float> inv_freq_;
    Tensor kc_, vc_;  // cached decoding's keys and values (B, max_len, this rank's kv width)
    int cache_B_ = 0, cache_len_ = 0;
};

}  // namespace

std::unique_ptr<Layer> llama_block_create(const ShardSpec& spec, int block) {
    return std::make_unique<LlamaBlock>(spec, block);
}

}  // namespace tessera
