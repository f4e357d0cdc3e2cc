#include "engine/parallel/tp_layers.h"

#include <cmath>
#include <cstring>

#include "engine/core/error.h"
#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/elementwise.h"
#include "engine/kernels/cpu/gelu.h"
#include "engine/kernels/cpu/layernorm.h"
#include "engine/kernels/cpu/matmul.h"

namespace tessera {

Recompute recompute_parse(const std::string& s) {
    if (s == "none") return Recompute::none;
    if (s == "selective") return Recompute::selective;
    if (s == "full") return Recompute::full;
    throw InputError(str_cat("recompute: expected none, selective or full, found '", s, "'"));
}

std::pair<int64_t, int64_t> vocab_shard(int64_t vocab, int r, int t) {
    return {vocab * r / t, vocab * (r + 1) / t};
}

int64_t ParamShard::global_offset(int64_t i) const {
    const int64_t cols = col1 - col0;
    const int64_t gcols = global_shape.size() == 2 ? global_shape[1] : 1;
    int64_t r = i / cols, j = i % cols;
    for (const auto& [first, count] : row_blocks) {
        if (r < count) return (first + r) * gcols + col0 + j;
        r -= count;
    }
    TS_CHECK(false, "local element ", i, " outside its shard");
    return 0;
}

// ------------------------------------------------------------------------------------------
// GptLayer: parameters, saved activations, offload

void GptLayer::add_param(const ParamTable& global, const std::string& gname, Shape local,
                         std::vector<std::pair<int64_t, int64_t>> row_blocks, int64_t col0,
                         int64_t col1) {
    const ParamInfo& gp = global.at(gname);
    const ParamInfo& lp = table_.add(gname, std::move(local), gp.decay, gp.init, gp.init_std);
    ParamShard s;
    s.global_index = (int)(&gp - global.entries().data());
    s.global_shape = gp.shape;
    s.row_blocks = std::move(row_blocks);
    s.col0 = col0;
    s.col1 = col1;
    int64_t rows = 0;
    for (auto& b : s.row_blocks) rows += b.second;
    TS_CHECK(rows * (col1 - col0) == lp.numel, "shard of ", gname, " does not match its shape");
    shards_.push_back(std::move(s));
}

int GptLayer::param_index(const std::string& n) const {
    const ParamInfo& info = table_.at(n);
    return (int)(&info - table_.entries().data());
}

namespace {

// Offload copies in flight on this rank, oldest first: the tensor that must outlive its copy
// (a device buffer being saved, or a pinned buffer being fetched) and the copy's event. Shared by
// all layers so that the forward can be held to the copy engine's pace (see offload()).
struct InFlight {
    Tensor keep;
    void* event = nullptr;
};
std::vector<InFlight>& in_flight() {
    static auto* v = new std::vector<InFlight>();  // never destroyed: outlives every layer
    return *v;
}

// Releases the sources of finished copies; with `upto`, first waits for the oldest `upto`.
void reap_copies(size_t upto = 0) {
    auto& q = in_flight();
    for (size_t i = 0; i < upto && i < q.size(); ++i) device_event_sync(q[i].event);
    size_t kept = 0;
    for (auto& f : q) {
        if (device_event_done(f.event)) {
            device_event_free(f.event);
            f.keep = Tensor();  // the copy is complete: the source may go
        } else {
            q[kept++] = std::move(f);
        }
    }
    q.resize(kept);
}

}  // namespace

GptLayer::~GptLayer() { reap_copies(in_flight().size()); }

// Replaces micro's saved tensors of category `from` by copies in `to` on `dev` (asynchronous on
// GPUs: each source stays in the in-flight queue until its copy is done). Returns the copies'
// events (none on the CPU).
std::vector<void*> GptLayer::move_saved(int micro, MemCategory from, MemCategory to, Device dev) {
    std::vector<void*> events;
    for (Tensor& t : saved_.at(micro)) {
        if (!t.defined() || t.category() != from) continue;
        Tensor copy = Tensor::empty(t.shape(), to, t.dtype(), dev);
        if (void* ev = device_copy_async(copy, t)) {
            events.push_back(ev);
            in_flight().push_back({std::move(t), ev});
        }
        t = std::move(copy);
    }
    return events;
}

// The device buffers of one layer may wait for their copy while the next layer computes; the
// layer before that must be out by then (the forward waits for it), or a compute stream faster
// than the copy engine would keep every layer's activations on the device after all.
void GptLayer::offload(int micro) {
    if (!saved_.count(micro) || offloaded_[micro]) return;
    size_t older = in_flight().size();
    move_saved(micro, MemCategory::activations, MemCategory::host, Device::cpu);
    offloaded_[micro] = true;
    reap_copies(older);
}

void GptLayer::fetch_begin(int micro) {
    reap_copies();
    if (!saved_.count(micro) || !offloaded_[micro]) return;
    std::vector<void*> events = move_saved(micro, MemCategory::host, MemCategory::activations, device);
    if (!events.empty()) fetching_[micro] = std::move(events);
    offloaded_[micro] = false;
}

void GptLayer::fetch_wait(int micro) {
    auto it = fetching_.find(micro);
    if (it == fetching_.end()) return;
    for (void* ev : it->second) device_event_wait(ev);  // ordered on the compute stream
    fetching_.erase(it);
}

int64_t GptLayer::saved_bytes(int micro) const {
    auto it = saved_.find(micro);
    int64_t n = 0;
    if (it != saved_.end())
        for (const Tensor& t : it->second) n += t.defined() ? t.nbytes() : 0;
    return n;
}

namespace {

const auto kAct = MemCategory::activations;
const auto kWork = MemCategory::workspace;

std::vector<std::pair<int64_t, int64_t>> rows(int64_t first, int64_t count) {
    return {{first, count}};
}

// ------------------------------------------------------------------------------------------
// Embedding: vocab-parallel token embedding + replicated position embedding

class EmbeddingLayer final : public GptLayer {
public:
    explicit EmbeddingLayer(const GptShardSpec& s) : spec_(s) {
        name_ = "embedding";
        ParamTable global = gpt_param_table(s.dims);
        auto [v0, v1] = vocab_shard(s.dims.vocab, s.tp.rank, s.tp.size);
        v0_ = v0;
        v1_ = v1;
        const int64_t C = s.dims.d_model;
        add_param(global, "wte.weight", {v1 - v0, C}, rows(v0, v1 - v0), 0, C);
        add_param(global, "wpe.weight", {s.dims.seq_len, C}, rows(0, s.dims.seq_len), 0, C);
    }

    Tensor forward(int micro, Tensor, const Batch& b) override {
        const int B = b.batch_size, T = b.seq_len, C = spec_.dims.d_model, N = B * T;
        Tensor out = Tensor::zeros({B, T, C}, kAct);
        const float* wte = p("wte.weight");
        for (int n = 0; n < N; ++n) {
            int tok = b.inputs[n];
            TS_CHECK(tok >= 0 && tok < spec_.dims.vocab, "token id ", tok, " outside vocab ",
                     spec_.dims.vocab);
            if (tok >= v0_ && tok < v1_)
                std::memcpy(out.f32() + (int64_t)n * C, wte + (tok - v0_) * C, sizeof(float) * C);
        }
        spec_.tp.all_reduce(out.f32(), out.numel());
        const float* wpe = p("wpe.weight");
        for (int n = 0; n < N; ++n) {
            float* o = out.f32() + (int64_t)n * C;
            const float* pe = wpe + (int64_t)(n % T) * C;
            for (int c = 0; c < C; ++c) o[c] += pe[c];
        }
        saved_[micro];  // nothing to keep: the tokens are in the batch
        return out;
    }

    Tensor backward(int micro, Tensor dout, const Batch& b, float) override {
        const int B = b.batch_size, T = b.seq_len, C = spec_.dims.d_model, N = B * T;
        float* dwte = g("wte.weight");
        float* dwpe = g("wpe.weight");
        for (int n = 0; n < N; ++n) {
            const float* d = dout.f32() + (int64_t)n * C;
            int tok = b.inputs[n];
            if (tok >= v0_ && tok < v1_) {
                float* w = dwte + (tok - v0_) * C;
                for (int c = 0; c < C; ++c) w[c] += d[c];
            }
            float* pe = dwpe + (int64_t)(n % T) * C;
            for (int c = 0; c < C; ++c) pe[c] += d[c];
        }
        saved_.erase(micro);
        offloaded_.erase(micro);
        return Tensor();
    }

    int64_t v0_, v1_;

private:
    GptShardSpec spec_;
};

// ------------------------------------------------------------------------------------------
// Transformer block: column-parallel QKV and fc, row-parallel projections

class BlockLayer final : public GptLayer {
public:
    BlockLayer(const GptShardSpec& s, int l) : spec_(s) {
        name_ = "block." + std::to_string(l);
        ParamTable global = gpt_param_table(s.dims);
        const int64_t C = s.dims.d_model, t = s.tp.size, r = s.tp.rank;
        const int64_t Cl = C / t;  // local width of attention (heads / tp)
        std::string p = "h." + std::to_string(l) + ".";
        auto qkv_rows = std::vector<std::pair<int64_t, int64_t>>{
            {r * Cl, Cl}, {C + r * Cl, Cl}, {2 * C + r * Cl, Cl}};
        add_param(global, p + "ln_1.weight", {C}, rows(0, C), 0, 1);
        add_param(global, p + "ln_1.bias", {C}, rows(0, C), 0, 1);
        add_param(global, p + "attn.c_attn.weight", {3 * Cl, C}, qkv_rows, 0, C);
        add_param(global, p + "attn.c_attn.bias", {3 * Cl}, qkv_rows, 0, 1);
        add_param(global, p + "attn.c_proj.weight", {C, Cl}, rows(0, C), r * Cl, (r + 1) * Cl);
        add_param(global, p + "attn.c_proj.bias", {C}, rows(0, C), 0, 1);
        add_param(global, p + "ln_2.weight", {C}, rows(0, C), 0, 1);
        add_param(global, p + "ln_2.bias", {C}, rows(0, C), 0, 1);
        add_param(global, p + "mlp.c_fc.weight", {4 * Cl, C}, rows(4 * r * Cl, 4 * Cl), 0, C);
        add_param(global, p + "mlp.c_fc.bias", {4 * Cl}, rows(4 * r * Cl, 4 * Cl), 0, 1);
        add_param(global, p + "mlp.c_proj.weight", {C, 4 * Cl}, rows(0, C), 4 * r * Cl,
                  4 * (r + 1) * Cl);
        add_param(global, p + "mlp.c_proj.bias", {C}, rows(0, C), 0, 1);
    }

    Tensor forward(int micro, Tensor x, const Batch& b) override {
        Acts a = compute(std::move(x), b.batch_size, b.seq_len);
        Tensor out = std::move(a.out);
        std::vector<Tensor> keep(kSavedCount);
        keep[X] = std::move(a.x);
        if (spec_.recompute != Recompute::full) {
            keep[LN1] = std::move(a.ln1);
            keep[M1] = std::move(a.m1);
            keep[R1] = std::move(a.r1);
            keep[QKV] = std::move(a.qkv);
            keep[ATTY] = std::move(a.atty);
            keep[RES1] = std::move(a.res1);
            keep[LN2] = std::move(a.ln2);
            keep[M2] = std::move(a.m2);
            keep[R2] = std::move(a.r2);
            keep[FCH] = std::move(a.fch);
            if (spec_.recompute == Recompute::none) {
                keep[ATT] = std::move(a.att);
                keep[FCG] = std::move(a.fcg);
            }
        }
        saved_[micro] = std::move(keep);
        return out;
    }

    Tensor backward(int micro, Tensor dout, const Batch& b, float) override {
        const int B = b.batch_size, T = b.seq_len, N = B * T;
        const int C = spec_.dims.d_model, Cl = C / spec_.tp.size;
        const int NHl = spec_.dims.n_head / spec_.tp.size;
        auto it = saved_.find(micro);
        TS_CHECK(it != saved_.end(), name_, ": backward of micro-batch ", micro, " before forward");
        std::vector<Tensor>& s = it->second;
        TS_CHECK(!offloaded_[micro], name_, ": micro-batch ", micro, " still offloaded");
        if (spec_.recompute == Recompute::full) {
            Acts a = compute(std::move(s[X]), B, T);
            s[X] = std::move(a.x);
            s[LN1] = std::move(a.ln1), s[M1] = std::move(a.m1), s[R1] = std::move(a.r1);
            s[QKV] = std::move(a.qkv), s[ATT] = std::move(a.att), s[ATTY] = std::move(a.atty);
            s[RES1] = std::move(a.res1), s[LN2] = std::move(a.ln2), s[M2] = std::move(a.m2);
            s[R2] = std::move(a.r2), s[FCH] = std::move(a.fch), s[FCG] = std::move(a.fcg);
        } else if (spec_.recompute == Recompute::selective) {
            // recompute the attention probabilities and the GELU output, the large cheap ones
            s[ATT] = Tensor::empty({B, NHl, T, T}, kAct);
            Tensor scratch = Tensor::empty({N, Cl}, kWork);
            attention_forward(scratch.f32(), s[ATT].f32(), s[QKV].f32(), B, T, Cl, NHl);
            s[FCG] = Tensor::empty({N, 4 * Cl}, kAct);
            gelu_forward(s[FCG].f32(), s[FCH].f32(), (int64_t)N * 4 * Cl);
        }
        Tensor grad = std::move(dout);  // d(block output), becomes d(block input) in place
        float* gp = grad.f32();
        Tensor dfcg = Tensor::zeros({N, 4 * Cl}, kWork);
        matmul_backward(dfcg.f32(), gw(10), gw(11), gp, s[FCG].f32(), pw(10), N, 4 * Cl, C);
        Tensor dfch = Tensor::zeros({N, 4 * Cl}, kWork);
        gelu_backward(dfch.f32(), s[FCH].f32(), dfcg.f32(), (int64_t)N * 4 * Cl);
        dfcg = Tensor();
        Tensor dln = Tensor::zeros({N, C}, kWork);
        matmul_backward(dln.f32(), gw(8), gw(9), dfch.f32(), s[LN2].f32(), pw(8), N, C, 4 * Cl);
        dfch = Tensor();
        spec_.tp.all_reduce(dln.f32(), dln.numel());
        layernorm_backward(gp, gw(6), gw(7), dln.f32(), s[RES1].f32(), pw(6), s[M2].f32(),
                           s[R2].f32(), N, C);
        Tensor datty = Tensor::zeros({N, Cl}, kWork);
        matmul_backward(datty.f32(), gw(4), gw(5), gp, s[ATTY].f32(), pw(4), N, Cl, C);
        Tensor dqkv = Tensor::zeros({N, 3 * Cl}, kWork);
        attention_backward(dqkv.f32(), datty.f32(), s[QKV].f32(), s[ATT].f32(), B, T, Cl, NHl);
        datty = Tensor();
        dln.zero();
        matmul_backward(dln.f32(), gw(2), gw(3), dqkv.f32(), s[LN1].f32(), pw(2), N, C, 3 * Cl);
        dqkv = Tensor();
        spec_.tp.all_reduce(dln.f32(), dln.numel());
        layernorm_backward(gp, gw(0), gw(1), dln.f32(), s[X].f32(), pw(0), s[M1].f32(), s[R1].f32(),
                           N, C);
        saved_.erase(it);
        offloaded_.erase(micro);
        return grad;
    }

private:
    enum Saved { X, LN1, M1, R1, QKV, ATT, ATTY, RES1, LN2, M2, R2, FCH, FCG, kSavedCount };
    struct Acts {
        Tensor x, ln1, m1, r1, qkv, att, atty, res1, ln2, m2, r2, fch, fcg, out;
    };
    // parameters in table order: ln_1 w/b, c_attn w/b, attn c_proj w/b, ln_2 w/b, c_fc w/b,
    // mlp c_proj w/b
    float* pw(int i) { return param_ptr[i]; }
    float* gw(int i) { return grad_ptr[i]; }

    // The block's forward from its input x (B, T, C); returns every intermediate.
    Acts compute(Tensor x, int B, int T) {
        const int N = B * T, C = spec_.dims.d_model, Cl = C / spec_.tp.size;
        const int NHl = spec_.dims.n_head / spec_.tp.size;
        Acts a;
        a.x = std::move(x);
        a.ln1 = Tensor::empty({N, C}, kAct);
        a.m1 = Tensor::empty({N}, kAct);
        a.r1 = Tensor::empty({N}, kAct);
        layernorm_forward(a.ln1.f32(), a.m1.f32(), a.r1.f32(), a.x.f32(), pw(0), pw(1), N, C);
        a.qkv = Tensor::empty({N, 3 * Cl}, kAct);
        matmul_forward(a.qkv.f32(), a.ln1.f32(), pw(2), pw(3), N, C, 3 * Cl);
        a.att = Tensor::empty({B, NHl, T, T}, kAct);
        a.atty = Tensor::empty({N, Cl}, kAct);
        attention_forward(a.atty.f32(), a.att.f32(), a.qkv.f32(), B, T, Cl, NHl);
        // row-parallel projection: partial sums, all-reduced, then the (replicated) bias
        a.res1 = Tensor::empty({N, C}, kAct);
        matmul_forward(a.res1.f32(), a.atty.f32(), pw(4), nullptr, N, Cl, C);
        spec_.tp.all_reduce(a.res1.f32(), a.res1.numel());
        add_bias_residual(a.res1.f32(), pw(5), a.x.f32(), N, C);
        a.ln2 = Tensor::empty({N, C}, kAct);
        a.m2 = Tensor::empty({N}, kAct);
        a.r2 = Tensor::empty({N}, kAct);
        layernorm_forward(a.ln2.f32(), a.m2.f32(), a.r2.f32(), a.res1.f32(), pw(6), pw(7), N, C);
        a.fch = Tensor::empty({N, 4 * Cl}, kAct);
        matmul_forward(a.fch.f32(), a.ln2.f32(), pw(8), pw(9), N, C, 4 * Cl);
        a.fcg = Tensor::empty({N, 4 * Cl}, kAct);
        gelu_forward(a.fcg.f32(), a.fch.f32(), (int64_t)N * 4 * Cl);
        a.out = Tensor::empty({B, T, C}, kAct);
        matmul_forward(a.out.f32(), a.fcg.f32(), pw(10), nullptr, N, 4 * Cl, C);
        spec_.tp.all_reduce(a.out.f32(), a.out.numel());
        add_bias_residual(a.out.f32(), pw(11), a.res1.f32(), N, C);
        return a;
    }

    // y (N, C) = (y + bias) + residual, in GptModel's order of additions
    static void add_bias_residual(float* y, const float* bias, const float* res, int N, int C) {
#pragma omp parallel for
        for (int n = 0; n < N; ++n) {
            float* row = y + (int64_t)n * C;
            const float* r = res + (int64_t)n * C;
            for (int c = 0; c < C; ++c) row[c] = (bias[c] + row[c]) + r[c];
        }
    }

    GptShardSpec spec_;
};

// ------------------------------------------------------------------------------------------
// Head: final LayerNorm, LM head on the (tied) vocab-parallel embedding, vocab-parallel CE

class HeadLayer final : public GptLayer {
public:
    HeadLayer(const GptShardSpec& s, GptLayer* tied) : spec_(s), tied_(tied) {
        name_ = "head";
        ParamTable global = gpt_param_table(s.dims);
        const int64_t C = s.dims.d_model;
        add_param(global, "ln_f.weight", {C}, rows(0, C), 0, 1);
        add_param(global, "ln_f.bias", {C}, rows(0, C), 0, 1);
        auto [v0, v1] = vocab_shard(s.dims.vocab, s.tp.rank, s.tp.size);
        v0_ = v0;
        v1_ = v1;
        if (!tied_) add_param(global, "wte.weight", {v1 - v0, C}, rows(v0, v1 - v0), 0, C);
    }
    GptLayer* tied_embedding() const override { return tied_; }

    Tensor forward(int micro, Tensor x, const Batch& b) override {
        const int N = b.batch_size * b.seq_len, C = spec_.dims.d_model;
        const int Vl = (int)(v1_ - v0_);
        std::vector<Tensor> s(5);
        s[0] = std::move(x);
        s[1] = Tensor::empty({N, C}, kAct);
        s[2] = Tensor::empty({N}, kAct);
        s[3] = Tensor::empty({N}, kAct);
        layernorm_forward(s[1].f32(), s[2].f32(), s[3].f32(), s[0].f32(), p("ln_f.weight"),
                          p("ln_f.bias"), N, C);
        s[4] = Tensor::empty({N, Vl}, kAct);
        float* logits = s[4].f32();
        matmul_forward(logits, s[1].f32(), wte(), nullptr, N, C, Vl);
        // vocab-parallel cross-entropy: global max, global sum of exp, global target logit
        Tensor stats = Tensor::empty({3, N}, kWork);
        float* mx = stats.f32();
        float* sum = mx + N;
        float* tl = sum + N;
#pragma omp parallel for
        for (int n = 0; n < N; ++n) {
            const float* row = logits + (int64_t)n * Vl;
            float m = -INFINITY;
            for (int v = 0; v < Vl; ++v) m = row[v] > m ? row[v] : m;
            mx[n] = m;
        }
        spec_.tp.all_reduce(mx, N, ReduceOp::max);
#pragma omp parallel for
        for (int n = 0; n < N; ++n) {
            float* row = logits + (int64_t)n * Vl;
            float z = 0.0f;
            for (int v = 0; v < Vl; ++v) {
                row[v] = std::exp(row[v] - mx[n]);
                z += row[v];
            }
            sum[n] = z;
            int t = b.targets[n];
            tl[n] = (t >= v0_ && t < v1_) ? row[t - v0_] : 0.0f;  // exp(logit_t - max)
        }
        spec_.tp.all_reduce(sum, 2 * (int64_t)N);  // sums and target terms together
        Tensor losses = Tensor::empty({N}, kWork);
#pragma omp parallel for
        for (int n = 0; n < N; ++n) {
            float* row = logits + (int64_t)n * Vl;
            float inv = 1.0f / sum[n];
            for (int v = 0; v < Vl; ++v) row[v] *= inv;  // probabilities, kept for backward
            losses.f32()[n] = b.targets[n] >= 0 ? -std::log(tl[n] * inv) : 0.0f;
        }
        saved_[micro] = std::move(s);
        return losses;
    }

    Tensor backward(int micro, Tensor, const Batch& b, float loss_scale) override {
        const int N = b.batch_size * b.seq_len, C = spec_.dims.d_model;
        const int Vl = (int)(v1_ - v0_);
        auto it = saved_.find(micro);
        TS_CHECK(it != saved_.end(), "head: backward of micro-batch ", micro, " before forward");
        std::vector<Tensor>& s = it->second;
        float* dlogits = s[4].f32();
#pragma omp parallel for
        for (int n = 0; n < N; ++n) {
            float* row = dlogits + (int64_t)n * Vl;
            int t = b.targets[n];
            if (t < 0) {
                for (int v = 0; v < Vl; ++v) row[v] = 0.0f;
                continue;
            }
            for (int v = 0; v < Vl; ++v) row[v] *= loss_scale;
            if (t >= v0_ && t < v1_) row[t - v0_] -= loss_scale;
        }
        Tensor dln = Tensor::zeros({N, C}, kWork);
        matmul_backward(dln.f32(), dwte(), nullptr, dlogits, s[1].f32(), wte(), N, C, Vl);
        spec_.tp.all_reduce(dln.f32(), dln.numel());
        Tensor dx = Tensor::zeros({b.batch_size, b.seq_len, C}, kAct);
        layernorm_backward(dx.f32(), g("ln_f.weight"), g("ln_f.bias"), dln.f32(), s[0].f32(),
                           p("ln_f.weight"), s[2].f32(), s[3].f32(), N, C);
        saved_.erase(it);
        offloaded_.erase(micro);
        return dx;
    }

private:
    float* wte() {
        return tied_ ? tied_->param_ptr[tied_->param_index("wte.weight")] : p("wte.weight");
    }
    float* dwte() {
        return tied_ ? tied_->grad_ptr[tied_->param_index("wte.weight")] : g("wte.weight");
    }
    GptShardSpec spec_;
    GptLayer* tied_;
    int64_t v0_, v1_;
};

}  // namespace

std::unique_ptr<GptLayer> gpt_layer_create(const GptShardSpec& spec, int index,
                                           GptLayer* tied_embedding) {
    const GptDims& d = spec.dims;
    TS_CHECK(d.n_head % spec.tp.size == 0, "n_head ", d.n_head, " not divisible by tp ", spec.tp.size);
    if (index == 0) return std::make_unique<EmbeddingLayer>(spec);
    if (index <= d.n_layer) return std::make_unique<BlockLayer>(spec, index - 1);
    TS_CHECK(index == d.n_layer + 1, "layer index ", index, " outside 0..", d.n_layer + 1);
    return std::make_unique<HeadLayer>(spec, tied_embedding);
}

}  // namespace tessera
