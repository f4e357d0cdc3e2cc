#include "engine/parallel/tp_layers.h"

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"
#include "engine/core/str_join.h"

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

bool vocab_embedding_name(const std::string& n) {
    return n == "wte.weight" || n == "model.embed_tokens.weight";
}

ModelShape model_shape(const ModelConfig& m, int vocab) {
    ModelShape s;
    const std::string family = model_family(m.preset);
    if (family == "mlp") {
        s.family = ModelShape::Family::mlp;
        s.sizes = mlp_sizes(m);
    } else if (family == "llama") {
        s.family = ModelShape::Family::llama;
        s.llama = LlamaDims{m.n_layer,         m.n_head,
                            m.n_kv_head,       m.d_model,
                            m.head_dim,        m.ffn,
                            m.seq_len,         m.vocab_size > 0 ? m.vocab_size : vocab,
                            (float)m.norm_eps, (float)m.rope_theta,
                            m.rope_scaling,    m.qkv_bias,
                            m.tie_embeddings,  m.qk_norm};
    } else {
        s.gpt = GptDims{m.n_layer, m.n_head, m.d_model, m.seq_len, vocab};
    }
    return s;
}

const ParamTable& ModelShape::param_table() const {
    if (!table_)
        table_ =
            std::make_shared<const ParamTable>(family == Family::gpt     ? gpt_param_table(gpt)
                                               : family == Family::llama ? llama_param_table(llama)
                                                                         : mlp_param_table(sizes));
    return *table_;
}

std::vector<LayerSpec> ModelShape::layer_specs() const {
    return family == Family::gpt     ? gpt_layer_specs(gpt)
           : family == Family::llama ? llama_layer_specs(llama)
                                     : mlp_layer_specs(sizes);
}

std::string ModelShape::describe() const {
    const int64_t P = param_table().total_numel();
    if (family == Family::mlp) {
        return str_cat("MLP ", str_join(sizes, "-", [](int n) { return std::to_string(n); }), ", ",
                       P, " parameters");
    }
    if (family == Family::llama)
        return str_cat("Llama family ", llama.n_layer, " layers, ", llama.n_head, " heads over ",
                       llama.n_kv_head, " key/value heads of ", llama.head_dim, ", d_model ",
                       llama.d_model, ", ffn ", llama.ffn, llama.qk_norm ? ", q/k norm" : "",
                       llama.qkv_bias ? ", q/k/v biases" : "", ", seq ", llama.seq_len, ", vocab ",
                       llama.vocab, llama.tie_embeddings ? " (tied)" : "", ", ", P, " parameters");
    return str_cat("GPT ", gpt.n_layer, " layers, ", gpt.n_head, " heads, d_model ", gpt.d_model,
                   ", seq ", gpt.seq_len, ", vocab ", gpt.vocab, ", ", P, " parameters");
}

Shape ModelShape::hidden(int B, int T) const {
    TS_CHECK(family != Family::mlp, "an MLP's layers are not split into stages");
    return {B, T, d_model()};
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
// Layer: parameters, saved activations, offload

void Layer::add_param(const ParamTable& global, const std::string& gname, Shape local,
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

int Layer::param_index(const std::string& n) const {
    const ParamInfo& info = table_.at(n);
    return (int)(&info - table_.entries().data());
}

namespace {

// Offload copies in flight on this thread (a rank's, or the estimator's replay), oldest first: the
// tensor that must outlive its copy (a device buffer being saved, or a pinned buffer being fetched)
// and the copy's event. Shared by all layers so that the forward can be held to the copy engine's
// pace (see offload()).
struct InFlight {
    Tensor keep;
    void* event = nullptr;
};
std::vector<InFlight>& in_flight() {
    thread_local auto* v = new std::vector<InFlight>();  // never destroyed: outlives every layer
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

Layer::~Layer() {
    reap_copies(in_flight().size());
}

Tensor Layer::backward_input(int, Tensor, const Batch&) {
    throw Error(str_cat(name_, ": no split backward (splits_backward() is false)"));
}

void Layer::backward_weight(int, const Batch&) {
    throw Error(str_cat(name_, ": no split backward (splits_backward() is false)"));
}

Tensor Layer::decode(Tensor, const DecodeStep&) {
    throw Error(str_cat(name_, ": cached decoding covers the Llama family"));
}

// Replaces micro's saved tensors of category `from` by copies in `to` on `dev` (asynchronous on
// GPUs: each source stays in the in-flight queue until its copy is done). Returns the copies'
// events (none on the CPU).
std::vector<void*> Layer::move_saved(int micro, MemCategory from, MemCategory to, Device dev) {
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
void Layer::offload(int micro) {
    if (!saved_.count(micro) || offloaded_[micro]) return;
    size_t older = in_flight().size();
    move_saved(micro, MemCategory::activations, MemCategory::host,
               device == Device::meta ? Device::meta : Device::cpu);
    offloaded_[micro] = true;
    reap_copies(older);
}

void Layer::fetch_begin(int micro) {
    reap_copies();
    if (!saved_.count(micro) || !offloaded_[micro]) return;
    std::vector<void*> events =
        move_saved(micro, MemCategory::host, MemCategory::activations, device);
    if (!events.empty()) fetching_[micro] = std::move(events);
    offloaded_[micro] = false;
}

void Layer::fetch_wait(int micro) {
    auto it = fetching_.find(micro);
    if (it == fetching_.end()) return;
    for (void* ev : it->second) device_event_wait(ev);  // ordered on the compute stream
    fetching_.erase(it);
}

const void* Layer::w(int i) {
    if (ops_.traits.act == DType::f32) return param_ptr[i];
    if (i < (int)param16_ptr.size() && param16_ptr[i]) return param16_ptr[i];
    const auto& es = table_.entries();
    const int64_t esize = dtype_size(ops_.traits.act);
    if (!cache_.defined()) {
        int64_t total = 0;
        for (const auto& e : es) {
            cache_off_.push_back(total);
            total += e.numel;
        }
        cache_ = Tensor::empty({std::max<int64_t>(total, 1)}, MemCategory::params, ops_.traits.act,
                               device);
    }
    if (cache_version_ != weights_version || cache_src_ != param_ptr) {
        // made once where the optimizer keeps it current: the run's setup, not a step's work
        const bool setup = copy_kept_by_optimizer && cache_version_ == 0;
        OpTrace* trace = setup ? op_trace_install(nullptr) : op_trace_current();
        // the parameter store keeps a layer's parameters back to back: then one cast
        bool contiguous = true;
        for (size_t k = 0; k < es.size(); ++k)
            contiguous &= param_ptr[k] == param_ptr[0] + cache_off_[k];
        if (contiguous && !es.empty())
            ops_.cast_weights(cache_.data(), param_ptr[0], cache_.numel());
        else
            for (size_t k = 0; k < es.size(); ++k)
                ops_.cast_weights((char*)cache_.data() + esize * cache_off_[k], param_ptr[k],
                                  es[k].numel);
        op_trace_install(trace);
        cache_version_ = weights_version;
        cache_src_ = param_ptr;
    }
    return (const char*)cache_.data() + esize * cache_off_[i];
}

void* Layer::weights_copy(int i) {
    // the optimizer's to write while it is the cast of the parameters where they are now (a copy
    // of moved storage is cast again by w())
    if (!copy_kept_by_optimizer || !cache_.defined() || cache_src_ != param_ptr ||
        (i < (int)param16_ptr.size() && param16_ptr[i]))
        return nullptr;
    return (char*)cache_.data() + dtype_size(ops_.traits.act) * cache_off_[i];
}

void Layer::weights_copy_written(uint64_t version) {
    // as weights_copy: only a copy the optimizer was given to write is now current
    if (copy_kept_by_optimizer && cache_.defined() && cache_src_ == param_ptr)
        cache_version_ = version;
}

const int* Layer::tokens(int micro, const Batch& b, bool targets) {
    const std::vector<int32_t>& ids = targets ? b.targets : b.inputs;
    if (!ops_.traits.tokens_on_device) return ids.data();
    TokenSlot& slot = tokens_[{micro, targets}];
    if (slot.n < (int64_t)ids.size()) {
        slot.device =
            Tensor::empty({(int64_t)ids.size()}, MemCategory::workspace, DType::i32, device);
        slot.n = (int64_t)ids.size();
    }
    ops_.upload_tokens(slot, ids);
    return static_cast<const int*>(slot.device.data());
}

void Layer::save_for_backward(int micro, std::vector<Tensor> s, Recompute rc, int cheap,
                              int scores) {
    if (rc == Recompute::full) {
        for (size_t i = 1; i < s.size(); ++i) s[i] = Tensor();
    } else if (rc == Recompute::selective) {
        s[cheap] = Tensor();
        if (ops_.traits.attention_scores) s[scores] = Tensor();
    }
    saved_[micro] = std::move(s);
}

std::vector<Tensor>& Layer::saved_recomputed(
    int micro, Recompute rc, const std::function<std::vector<Tensor>(Tensor)>& forward, int scores,
    int qkv, const AttentionShape& att, const std::function<void(std::vector<Tensor>&)>& cheap) {
    std::vector<Tensor>& s = saved_at(micro);
    if (rc == Recompute::full) {
        const size_t count = s.size();
        std::vector<Tensor> r = forward(std::move(s[0]));
        r.resize(count);  // the block's output is not kept
        s = std::move(r);
    } else if (rc == Recompute::selective) {
        if (ops_.traits.attention_scores) {
            s[scores] = f32({att.B, att.NH, att.T, att.T}, MemCategory::activations);
            Tensor scratch = work({(int64_t)att.B * att.T, att.Cq});
            ops_.attention_forward(scratch.data(), s[scores].f32(), s[qkv].data(), att.B, att.T,
                                   att.Cq, att.NH, att.KV);
        }
        cheap(s);
    }
    return s;
}

std::vector<Tensor>& Layer::saved_at(int micro) {
    auto it = saved_.find(micro);
    TS_CHECK(it != saved_.end(), name_, ": backward of micro-batch ", micro, " before forward");
    TS_CHECK(!offloaded_[micro], name_, ": micro-batch ", micro, " still offloaded");
    return it->second;
}

std::vector<Tensor>& Layer::w_saved_at(int micro) {
    auto it = wsaved_.find(micro);
    TS_CHECK(it != wsaved_.end(), name_, ": W of micro-batch ", micro, " before its B");
    return it->second;
}

int64_t Layer::saved_bytes(int micro) const {
    auto it = saved_.find(micro);
    int64_t n = 0;
    if (it != saved_.end())
        for (const Tensor& t : it->second) n += t.defined() ? t.nbytes() : 0;
    return n;
}

namespace {

std::vector<std::pair<int64_t, int64_t>> rows(int64_t first, int64_t count) {
    return {{first, count}};
}

// ------------------------------------------------------------------------------------------
// Embedding: vocab-parallel token embedding; GPT adds the replicated position embedding (TP
// rank 0 before the all-reduce: exact, the other ranks add zeros), the Llama family has none
// (its positions are rotary, in the blocks)

class EmbeddingLayer final : public Layer {
  public:
    explicit EmbeddingLayer(const ShardSpec& s) : Layer(*s.ops), spec_(s) {
        name_ = "embedding";
        gpt_ = s.model.family == ModelShape::Family::gpt;
        const ParamTable& global = s.model.param_table();
        std::tie(v0_, v1_) = vocab_shard(s.model.vocab(), s.tp.rank, s.tp.size);
        const int64_t C = s.model.d_model();
        add_param(global, gpt_ ? "wte.weight" : "model.embed_tokens.weight", {v1_ - v0_, C},
                  rows(v0_, v1_ - v0_), 0, C);
        if (gpt_)
            add_param(global, "wpe.weight", {s.model.gpt.seq_len, C}, rows(0, s.model.gpt.seq_len),
                      0, C);
    }

    Tensor forward(int micro, Tensor, const Batch& b) override {
        const int B = b.batch_size, T = b.seq_len, C = spec_.model.d_model();
        for (int32_t tok : b.inputs)
            TS_CHECK(tok >= 0 && tok < spec_.model.vocab(), "token id ", tok, " outside vocab ",
                     spec_.model.vocab());
        Tensor out = act({B, T, C});
        ops_.embedding_forward(out.data(), tokens(micro, b, false), w(0),
                               gpt_ && spec_.tp.rank == 0 ? w(1) : nullptr, v0_, v1_, B, T, C);
        spec_.tp.all_reduce(out.data(), out.numel(), out.dtype());
        if (micro >= 0) saved_[micro];  // nothing to keep: the tokens are in the batch
        return out;
    }

    Tensor backward(int micro, Tensor dout, const Batch& b) override {
        ops_.embedding_backward(grad_ptr[0], gpt_ ? grad_ptr[1] : nullptr, dout.data(),
                                tokens(micro, b, false), v0_, v1_, b.batch_size, b.seq_len,
                                spec_.model.d_model());
        saved_.erase(micro);
        offloaded_.erase(micro);
        return Tensor();
    }

    // No input gradient: B keeps dout, W is the whole backward.
    bool splits_backward() const override { return true; }
    Tensor backward_input(int micro, Tensor dout, const Batch&) override {
        wsaved_[micro] = tensor_list(std::move(dout));
        return Tensor();
    }
    void backward_weight(int micro, const Batch& b) override {
        ops_.embedding_backward(grad_ptr[0], gpt_ ? grad_ptr[1] : nullptr,
                                w_saved_at(micro)[0].data(), tokens(micro, b, false), v0_, v1_,
                                b.batch_size, b.seq_len, spec_.model.d_model());
        release(micro);
    }

  private:
    ShardSpec spec_;
    bool gpt_ = true;
    int64_t v0_, v1_;
};

// ------------------------------------------------------------------------------------------
// Transformer block: column-parallel QKV and fc, row-parallel projections

class BlockLayer final : public Layer {
    // saved for backward; STATS: the attention's probabilities or log-sum-exp (LayerTraits)
    enum Saved { X, LN1, M1, R1, QKV, ATTY, STATS, RES1, LN2, M2, R2, FCH, FCG, kCount };

  public:
    BlockLayer(const ShardSpec& s, int l) : Layer(*s.ops), spec_(s) {
        name_ = "block." + std::to_string(l);
        const ParamTable& global = s.model.param_table();
        const int64_t C = s.model.gpt.d_model, t = s.tp.size, r = s.tp.rank;
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

    // the four weights' gradients: each written whole by its weight-gradient GEMM
    bool grad_written_whole(int i) const override { return i == 2 || i == 4 || i == 8 || i == 10; }

    Tensor forward(int micro, Tensor x, const Batch& b) override {
        std::vector<Tensor> s = compute(std::move(x), b.batch_size, b.seq_len);
        Tensor out = std::move(s[kCount]);
        s.resize(kCount);
        if (micro < 0) return out;  // evaluation: nothing kept
        // selective: the large, cheap ones, the GELU output and the attention probabilities
        save_for_backward(micro, std::move(s), spec_.recompute, FCG, STATS);
        return out;
    }

    Tensor backward(int micro, Tensor dout, const Batch& b) override {
        const int B = b.batch_size, T = b.seq_len, N = B * T;
        const int C = spec_.model.gpt.d_model, Cl = C / spec_.tp.size;
        const int NHl = spec_.model.gpt.n_head / spec_.tp.size;
        std::vector<Tensor>& s = saved_for_backward(micro, B, T);
        const DType adt = ops_.traits.act;
        void* gp = dout.data();  // d(block output); becomes d(block input) in place
        Tensor dfc = work({N, 4 * Cl});
        ops_.matmul_gelu_backward(dfc.data(), grad_ptr[10], grad_ptr[11], gp, s[FCG].data(), w(10),
                                  s[FCH].data(), N, 4 * Cl, C, first_write(10));
        Tensor dln = work({N, C});
        ops_.matmul_backward(dln.data(), grad_ptr[8], grad_ptr[9], dfc.data(), s[LN2].data(), w(8),
                             N, C, 4 * Cl, first_write(8));
        dfc = Tensor();
        spec_.tp.all_reduce(dln.data(), dln.numel(), adt);
        ops_.layernorm_backward(gp, grad_ptr[6], grad_ptr[7], dln.data(), s[RES1].data(), w(6),
                                s[M2].f32(), s[R2].f32(), N, C);
        Tensor datty = work({N, Cl});
        ops_.matmul_backward(datty.data(), grad_ptr[4], grad_ptr[5], gp, s[ATTY].data(), w(4), N,
                             Cl, C, first_write(4));
        Tensor dqkv = work({N, 3 * Cl});
        ops_.attention_backward(dqkv.data(), datty.data(), s[QKV].data(), s[ATTY].data(),
                                s[STATS].f32(), B, T, Cl, NHl, NHl);
        datty = Tensor();
        ops_.matmul_backward(dln.data(), grad_ptr[2], grad_ptr[3], dqkv.data(), s[LN1].data(), w(2),
                             N, C, 3 * Cl, first_write(2));
        dqkv = Tensor();
        spec_.tp.all_reduce(dln.data(), dln.numel(), adt);
        ops_.layernorm_backward(gp, grad_ptr[0], grad_ptr[1], dln.data(), s[X].data(), w(0),
                                s[M1].f32(), s[R1].f32(), N, C);
        release(micro);
        return dout;
    }

    // The backward above split in two. B: the same input-gradient chain, the weight gradients
    // left out; it keeps each GEMM's and norm's output gradient (kept in W's order: mlp c_proj,
    // c_fc, ln_2, attn c_proj, c_attn, ln_1) and drops the saved tensors W does not read (the
    // QKV, the attention statistics, the GELU input).
    bool splits_backward() const override { return true; }
    Tensor backward_input(int micro, Tensor dout, const Batch& b) override {
        const int B = b.batch_size, T = b.seq_len, N = B * T;
        const int C = spec_.model.gpt.d_model, Cl = C / spec_.tp.size;
        const int NHl = spec_.model.gpt.n_head / spec_.tp.size;
        std::vector<Tensor>& s = saved_for_backward(micro, B, T);
        const DType adt = ops_.traits.act;
        const int64_t es = dtype_size(adt);
        // W reads d(block output) (mlp c_proj) and d(res1) (attn c_proj), both changed in place
        // on the way down: they keep copies; the input gradient starts as d(block output)
        Tensor dx = act({B, T, C});
        ops_.copy(dx.data(), dout.data(), es * N * C);
        void* gp = dx.data();
        Tensor dfc = act({N, 4 * Cl});
        ops_.matmul_gelu_backward(dfc.data(), nullptr, nullptr, gp, s[FCG].data(), w(10),
                                  s[FCH].data(), N, 4 * Cl, C, false);
        Tensor dln2 = act({N, C});
        ops_.matmul_backward(dln2.data(), nullptr, nullptr, dfc.data(), s[LN2].data(), w(8), N, C,
                             4 * Cl, false);
        spec_.tp.all_reduce(dln2.data(), dln2.numel(), adt);
        ops_.layernorm_backward(gp, nullptr, nullptr, dln2.data(), s[RES1].data(), w(6),
                                s[M2].f32(), s[R2].f32(), N, C);
        Tensor dres1 = act({N, C});
        ops_.copy(dres1.data(), gp, es * N * C);
        Tensor datty = work({N, Cl});
        ops_.matmul_backward(datty.data(), nullptr, nullptr, gp, s[ATTY].data(), w(4), N, Cl, C,
                             false);
        Tensor dqkv = act({N, 3 * Cl});
        ops_.attention_backward(dqkv.data(), datty.data(), s[QKV].data(), s[ATTY].data(),
                                s[STATS].f32(), B, T, Cl, NHl, NHl);
        datty = Tensor();
        Tensor dln1 = act({N, C});
        ops_.matmul_backward(dln1.data(), nullptr, nullptr, dqkv.data(), s[LN1].data(), w(2), N, C,
                             3 * Cl, false);
        spec_.tp.all_reduce(dln1.data(), dln1.numel(), adt);
        ops_.layernorm_backward(gp, nullptr, nullptr, dln1.data(), s[X].data(), w(0), s[M1].f32(),
                                s[R1].f32(), N, C);
        for (int k : {QKV, STATS, FCH}) s[k] = Tensor();  // W reads none of them
        wsaved_[micro] = tensor_list(std::move(dout), std::move(dfc), std::move(dln2),
                                     std::move(dres1), std::move(dqkv), std::move(dln1));
        return dx;
    }
    void backward_weight(int micro, const Batch& b) override {
        const int N = b.batch_size * b.seq_len;
        const int C = spec_.model.gpt.d_model, Cl = C / spec_.tp.size;
        std::vector<Tensor>& s = saved_.at(micro);
        std::vector<Tensor>& d = w_saved_at(micro);  // d out, d fc, d ln_2, d res1, d qkv, d ln_1
        const float* gv = nullptr;                   // W reads no weights
        ops_.matmul_backward(nullptr, grad_ptr[10], grad_ptr[11], d[0].data(), s[FCG].data(), gv, N,
                             4 * Cl, C, first_write(10));
        ops_.matmul_backward(nullptr, grad_ptr[8], grad_ptr[9], d[1].data(), s[LN2].data(), gv, N,
                             C, 4 * Cl, first_write(8));
        ops_.layernorm_backward(nullptr, grad_ptr[6], grad_ptr[7], d[2].data(), s[RES1].data(), gv,
                                s[M2].f32(), s[R2].f32(), N, C);
        ops_.matmul_backward(nullptr, grad_ptr[4], grad_ptr[5], d[3].data(), s[ATTY].data(), gv, N,
                             Cl, C, first_write(4));
        ops_.matmul_backward(nullptr, grad_ptr[2], grad_ptr[3], d[4].data(), s[LN1].data(), gv, N,
                             C, 3 * Cl, first_write(2));
        ops_.layernorm_backward(nullptr, grad_ptr[0], grad_ptr[1], d[5].data(), s[X].data(), gv,
                                s[M1].f32(), s[R1].f32(), N, C);
        release(micro);
    }

  private:
    // micro's saved tensors, the ones the recompute policy dropped computed again (the GELU
    // output the selective one's cheap activation).
    std::vector<Tensor>& saved_for_backward(int micro, int B, int T) {
        const int N = B * T, Cl = spec_.model.gpt.d_model / spec_.tp.size;
        const int NHl = spec_.model.gpt.n_head / spec_.tp.size;
        return saved_recomputed(
            micro, spec_.recompute, [&](Tensor x) { return compute(std::move(x), B, T); }, STATS,
            QKV, {B, T, Cl, NHl, NHl},
            [&](std::vector<Tensor>& s) {
                s[FCG] = act({N, 4 * Cl});
                ops_.gelu_forward(s[FCG].data(), s[FCH].data(), (int64_t)N * 4 * Cl);
            });
    }

    // The block's forward from its input x (B, T, C); returns the saved tensors and, at index
    // kCount, the output. Parameters in table order: ln_1 w/b, c_attn w/b, attn c_proj w/b,
    // ln_2 w/b, c_fc w/b, mlp c_proj w/b.
    std::vector<Tensor> compute(Tensor x, int B, int T) {
        const int N = B * T, C = spec_.model.gpt.d_model, Cl = C / spec_.tp.size;
        const int NHl = spec_.model.gpt.n_head / spec_.tp.size;
        const auto kA = MemCategory::activations;
        std::vector<Tensor> s(kCount + 1);
        s[X] = std::move(x);
        auto D = [&](int k) { return s[k].data(); };
        s[LN1] = act({N, C});
        s[M1] = f32({N}, kA);
        s[R1] = f32({N}, kA);
        ops_.layernorm_forward(D(LN1), s[M1].f32(), s[R1].f32(), D(X), w(0), w(1), N, C);
        s[QKV] = act({N, 3 * Cl});
        ops_.matmul_forward(D(QKV), D(LN1), w(2), w(3), N, C, 3 * Cl);
        s[ATTY] = act({N, Cl});
        s[STATS] = ops_.traits.attention_scores ? f32({B, NHl, T, T}, kA) : f32({B, NHl, T}, kA);
        ops_.attention_forward(D(ATTY), s[STATS].f32(), D(QKV), B, T, Cl, NHl, NHl);
        // row-parallel projection: partial sums, all-reduced, plus bias and residual
        s[RES1] = act({N, C});
        ops_.projection_residual(D(RES1), D(ATTY), w(4), w(5), D(X), N, Cl, C, spec_.tp);
        s[LN2] = act({N, C});
        s[M2] = f32({N}, kA);
        s[R2] = f32({N}, kA);
        ops_.layernorm_forward(D(LN2), s[M2].f32(), s[R2].f32(), D(RES1), w(6), w(7), N, C);
        s[FCH] = act({N, 4 * Cl});
        s[FCG] = act({N, 4 * Cl});
        ops_.matmul_gelu_forward(D(FCG), D(FCH), D(LN2), w(8), w(9), N, C, 4 * Cl);
        s[kCount] = act({B, T, C});
        ops_.projection_residual(D(kCount), D(FCG), w(10), w(11), D(RES1), N, 4 * Cl, C, spec_.tp);
        return s;
    }

    ShardSpec spec_;
};

// ------------------------------------------------------------------------------------------
// Head: final LayerNorm, LM head on the (tied) vocab-parallel embedding, vocab-parallel
// cross-entropy whose gradient is written into the logits during the forward pass

class HeadLayer final : public Layer {
  public:
    // GPT: LayerNorm ln_f, the head on wte (tied, or its copy on the last stage). The Llama
    // family: RMSNorm model.norm, the head on the token embedding (tied, or its copy) or on its
    // own lm_head.
    HeadLayer(const ShardSpec& s, Layer* tied) : Layer(*s.ops), spec_(s) {
        name_ = "head";
        gpt_ = s.model.family == ModelShape::Family::gpt;
        const bool own_head = !gpt_ && !s.model.llama.tie_embeddings;
        tied_ = own_head ? nullptr : tied;
        const ParamTable& global = s.model.param_table();
        const int64_t C = s.model.d_model();
        if (gpt_) {
            add_param(global, "ln_f.weight", {C}, rows(0, C), 0, 1);
            add_param(global, "ln_f.bias", {C}, rows(0, C), 0, 1);
        } else {
            add_param(global, "model.norm.weight", {C}, rows(0, C), 0, 1);
        }
        std::tie(v0_, v1_) = vocab_shard(s.model.vocab(), s.tp.rank, s.tp.size);
        table_name_ = gpt_       ? "wte.weight"
                      : own_head ? "lm_head.weight"
                                 : "model.embed_tokens.weight";
        if (!tied_) add_param(global, table_name_, {v1_ - v0_, C}, rows(v0_, v1_ - v0_), 0, C);
    }
    Layer* tied_embedding() const override { return tied_; }

    Tensor decode(Tensor x, const DecodeStep& st) override {
        const int C = spec_.model.d_model(), rows = st.all_rows ? st.B * st.n : st.B,
                  Vp = padded_vocab();
        TS_CHECK(!gpt_ && spec_.tp.size == 1,
                 "head: cached decoding covers the Llama family on one rank");
        const int64_t es = dtype_size(ops_.traits.act);
        Tensor last;
        if (!st.all_rows) {  // each sequence's last row
            last = work({rows, C});
            ops_.copy_rows(last.data(), C * es,
                           static_cast<char*>(x.data()) + (int64_t)(st.n - 1) * C * es,
                           (int64_t)st.n * C * es, rows, C * es);
        }
        const void* h = st.all_rows ? x.data() : last.data();
        Tensor ln = work({rows, C}), r = f32({rows}, MemCategory::workspace);
        ops_.rmsnorm_forward(ln.data(), r.f32(), h, w(0), rows, C, spec_.model.llama.norm_eps);
        Tensor logits = work({rows, Vp});
        ops_.matmul_forward(logits.data(), ln.data(), wte(), nullptr, rows, C, Vp);
        return logits;
    }

    Tensor forward(int micro, Tensor x, const Batch& b) override {
        const int N = b.batch_size * b.seq_len, C = spec_.model.d_model();
        const int Vl = (int)(v1_ - v0_), Vp = padded_vocab();
        const auto kA = MemCategory::activations, kW = MemCategory::workspace;
        std::vector<Tensor> s(5);
        s[0] = std::move(x);
        s[1] = act({N, C});
        if (gpt_) s[2] = f32({N}, kA);  // the mean (LayerNorm only)
        s[3] = f32({N}, kA);
        if (gpt_) {
            ops_.layernorm_forward(s[1].data(), s[2].f32(), s[3].f32(), s[0].data(), w(0), w(1), N,
                                   C);
        } else {
            ops_.rmsnorm_forward(s[1].data(), s[3].f32(), s[0].data(), w(0), N, C,
                                 spec_.model.llama.norm_eps);
        }
        // logits over the (padded) vocabulary shard; the loss ignores the padding columns
        s[4] = act({N, Vp});
        ops_.matmul_forward(s[4].data(), s[1].data(), wte(), nullptr, N, C, Vp);
        Tensor stats = f32({3, N}, kW);
        const int* tgt = tokens(micro, b, true);
        Tensor losses = f32({N}, kW);
        {
            Tensor gmax = spec_.tp.size > 1 ? f32({N}, kW) : Tensor();  // the combine's scratch
            ops_.cross_entropy(losses.f32(), stats.f32(), gmax.f32(), s[4].data(), tgt, v0_, N, Vl,
                               Vp, spec_.tp, spec_.loss_scale, micro >= 0);
        }
        if (micro >= 0) saved_[micro] = std::move(s);
        return losses;
    }

    Tensor backward(int micro, Tensor, const Batch& b) override {
        const int N = b.batch_size * b.seq_len, C = spec_.model.d_model();
        const int Vl = (int)(v1_ - v0_), Vp = padded_vocab();
        std::vector<Tensor>& s = saved_at(micro);
        Tensor dln = work({N, C});
        {  // padded logits: the gradient over the padded rows first (written whole into a
           // scratch), then its real rows
            Tensor dw = Vp != Vl
                            ? Tensor::empty({Vp, C}, MemCategory::workspace, DType::f32, device)
                            : Tensor();
            ops_.matmul_backward(dln.data(), dw.defined() ? dw.f32() : dwte(), nullptr, s[4].data(),
                                 s[1].data(), wte(), N, C, Vp, dw.defined());
            if (dw.defined()) ops_.accumulate(dwte(), dw.f32(), (int64_t)Vl * C);
        }
        spec_.tp.all_reduce(dln.data(), dln.numel(), ops_.traits.act);
        Tensor dx = Tensor::zeros({b.batch_size, b.seq_len, C}, MemCategory::activations,
                                  ops_.traits.act, device);
        if (gpt_)
            ops_.layernorm_backward(dx.data(), grad_ptr[0], grad_ptr[1], dln.data(), s[0].data(),
                                    w(0), s[2].f32(), s[3].f32(), N, C);
        else
            ops_.rmsnorm_backward(dx.data(), grad_ptr[0], dln.data(), s[0].data(), w(0), s[3].f32(),
                                  N, C);
        release(micro);
        return dx;
    }

    // The backward above split in two: B keeps d(normed input) (N, C) for the norm's W.
    bool splits_backward() const override { return true; }
    Tensor backward_input(int micro, Tensor, const Batch& b) override {
        const int N = b.batch_size * b.seq_len, C = spec_.model.d_model(), Vp = padded_vocab();
        std::vector<Tensor>& s = saved_at(micro);
        Tensor dln = act({N, C});
        ops_.matmul_backward(dln.data(), nullptr, nullptr, s[4].data(), s[1].data(), wte(), N, C,
                             Vp, false);
        spec_.tp.all_reduce(dln.data(), dln.numel(), ops_.traits.act);
        Tensor dx = Tensor::zeros({b.batch_size, b.seq_len, C}, MemCategory::activations,
                                  ops_.traits.act, device);
        if (gpt_)
            ops_.layernorm_backward(dx.data(), nullptr, nullptr, dln.data(), s[0].data(), w(0),
                                    s[2].f32(), s[3].f32(), N, C);
        else
            ops_.rmsnorm_backward(dx.data(), nullptr, dln.data(), s[0].data(), w(0), s[3].f32(), N,
                                  C);
        wsaved_[micro] = tensor_list(std::move(dln));
        return dx;
    }
    void backward_weight(int micro, const Batch& b) override {
        const int N = b.batch_size * b.seq_len, C = spec_.model.d_model();
        const int Vl = (int)(v1_ - v0_), Vp = padded_vocab();
        std::vector<Tensor>& s = saved_.at(micro);
        const void* dln = w_saved_at(micro)[0].data();
        {  // as backward(): the padded rows' gradient first, then its real rows
            Tensor dw = Vp != Vl
                            ? Tensor::empty({Vp, C}, MemCategory::workspace, DType::f32, device)
                            : Tensor();
            ops_.matmul_backward(nullptr, dw.defined() ? dw.f32() : dwte(), nullptr, s[4].data(),
                                 s[1].data(), nullptr, N, C, Vp, dw.defined());
            if (dw.defined()) ops_.accumulate(dwte(), dw.f32(), (int64_t)Vl * C);
        }
        if (gpt_)
            ops_.layernorm_backward(nullptr, grad_ptr[0], grad_ptr[1], dln, s[0].data(), nullptr,
                                    s[2].f32(), s[3].f32(), N, C);
        else
            ops_.rmsnorm_backward(nullptr, grad_ptr[0], dln, s[0].data(), nullptr, s[3].f32(), N,
                                  C);
        release(micro);
    }

  private:
    int padded_vocab() const {
        const int a = ops_.traits.vocab_align;
        return (int)(((v1_ - v0_) + a - 1) / a * a);
    }
    Layer* owner() { return tied_ ? tied_ : this; }
    int wte_index() { return owner()->param_index(table_name_); }
    float* dwte() { return owner()->grad_ptr[wte_index()]; }
    // The (tied) wte shard as the kernels read it: the fp32 masters themselves, or a copy in the
    // activation dtype padded with zero rows to padded_vocab() (params category), refreshed
    // when the parameter version or storage moves.
    const void* wte() {
        const int64_t C = spec_.model.d_model(), Vl = v1_ - v0_, Vp = padded_vocab();
        Layer* o = owner();
        const int wi = wte_index();
        const float* src = o->param_ptr[wi];
        const DType adt = ops_.traits.act;
        if (adt == DType::f32 && Vp == Vl) return src;
        const void* src16 = wi < (int)o->param16_ptr.size() ? o->param16_ptr[wi] : nullptr;
        if (!pad_.defined()) pad_ = Tensor::zeros({Vp, C}, MemCategory::params, adt, device);
        if (pad_version_ != weights_version || pad_src_ != src) {
            if (adt == DType::f32)
                ops_.copy(pad_.data(), src, sizeof(float) * Vl * C);
            else if (src16)
                ops_.copy(pad_.data(), src16, dtype_size(adt) * Vl * C);  // the store's bf16 image
            else
                ops_.cast_weights(pad_.data(), src, Vl * C);
            pad_version_ = weights_version;
            pad_src_ = src;
        }
        return pad_.data();
    }
    ShardSpec spec_;
    bool gpt_ = true;
    Layer* tied_ = nullptr;
    std::string table_name_;  // the vocabulary table the logits are computed with
    int64_t v0_, v1_;
    Tensor pad_;
    uint64_t pad_version_ = 0;
    const float* pad_src_ = nullptr;
};

}  // namespace

std::unique_ptr<Layer> layer_create(const ShardSpec& spec_in, int index, Layer* tied_embedding) {
    spec_in.model.param_table();  // built once: the copy below and every layer share it
    ShardSpec spec = spec_in;
    if (!spec.ops) spec.ops = &layer_ops_cpu();
    if (spec.model.family == ModelShape::Family::mlp) return mlp_layer_create(spec, index);
    const int L = spec.model.n_layers() - 2;
    const int heads = spec.model.family == ModelShape::Family::gpt ? spec.model.gpt.n_head
                                                                   : spec.model.llama.n_head;
    TS_CHECK(heads % spec.tp.size == 0, "n_head ", heads, " not divisible by tp ", spec.tp.size);
    if (index == 0) return std::make_unique<EmbeddingLayer>(spec);
    if (index <= L)
        return spec.model.family == ModelShape::Family::gpt
                   ? std::make_unique<BlockLayer>(spec, index - 1)
                   : llama_block_create(spec, index - 1);
    TS_CHECK(index == L + 1, "layer index ", index, " outside 0..", L + 1);
    spec.ops = &layer_ops_without_fp8(*spec.ops);  // the classifier keeps bf16 (FP8 recipes do)
    return std::make_unique<HeadLayer>(spec, tied_embedding);
}

std::vector<std::unique_ptr<Layer>> layers_create_bound(const ShardSpec& spec, float* params,
                                                        float* grads) {
    TS_CHECK(spec.tp.size == 1, "layers_create_bound: one rank holds the whole model, found tp ",
             spec.tp.size);
    const ParamTable& table = spec.model.param_table();
    std::vector<std::unique_ptr<Layer>> layers;
    for (int i = 0; i < spec.model.n_layers(); ++i) {
        layers.push_back(layer_create(spec, i, layers.empty() ? nullptr : layers[0].get()));
        Layer& l = *layers.back();
        for (const auto& p : l.table().entries()) {
            const int64_t off = table.at(p.name).offset;
            l.param_ptr.push_back(params + off);
            l.grad_ptr.push_back(grads ? grads + off : nullptr);
        }
    }
    return layers;
}

}  // namespace tessera
