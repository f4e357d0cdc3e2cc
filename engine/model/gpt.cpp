#include "engine/model/gpt.h"

#include <cmath>

#include "engine/core/error.h"
#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/cross_entropy.h"
#include "engine/kernels/cpu/elementwise.h"
#include "engine/kernels/cpu/embedding.h"
#include "engine/kernels/cpu/gelu.h"
#include "engine/kernels/cpu/layernorm.h"
#include "engine/kernels/cpu/matmul.h"

namespace tessera {

// ------------------------------------------------------------------------------------------
// Parameters and layer specs

ParamTable gpt_param_table(const GptDims& d) {
    const int64_t C = d.d_model, L = d.n_layer;
    const float std = 0.02f, proj_std = 0.02f / std::sqrt(2.0f * L);
    ParamTable t;
    t.add("wte.weight", {d.vocab, C}, true, InitKind::normal, std);
    t.add("wpe.weight", {d.seq_len, C}, true, InitKind::normal, std);
    for (int l = 0; l < L; ++l) {
        std::string p = "h." + std::to_string(l) + ".";
        t.add(p + "ln_1.weight", {C}, false, InitKind::ones);
        t.add(p + "ln_1.bias", {C}, false, InitKind::zeros);
        t.add(p + "attn.c_attn.weight", {3 * C, C}, true, InitKind::normal, std);
        t.add(p + "attn.c_attn.bias", {3 * C}, false, InitKind::zeros);
        t.add(p + "attn.c_proj.weight", {C, C}, true, InitKind::normal, proj_std);
        t.add(p + "attn.c_proj.bias", {C}, false, InitKind::zeros);
        t.add(p + "ln_2.weight", {C}, false, InitKind::ones);
        t.add(p + "ln_2.bias", {C}, false, InitKind::zeros);
        t.add(p + "mlp.c_fc.weight", {4 * C, C}, true, InitKind::normal, std);
        t.add(p + "mlp.c_fc.bias", {4 * C}, false, InitKind::zeros);
        t.add(p + "mlp.c_proj.weight", {C, 4 * C}, true, InitKind::normal, proj_std);
        t.add(p + "mlp.c_proj.bias", {C}, false, InitKind::zeros);
    }
    t.add("ln_f.weight", {C}, false, InitKind::ones);
    t.add("ln_f.bias", {C}, false, InitKind::zeros);
    return t;
}

std::vector<LayerSpec> gpt_layer_specs(const GptDims& d) {
    const int64_t C = d.d_model, T = d.seq_len, V = d.vocab, NH = d.n_head;
    const int64_t f = 4;  // bytes per fp32
    std::vector<LayerSpec> specs;
    LayerSpec emb{"embedding", "embedding", V * C + T * C, T * C * f, T * C * f, T * C * f, 0.0};
    specs.push_back(emb);
    for (int l = 0; l < d.n_layer; ++l) {
        LayerSpec b;
        b.name = "block." + std::to_string(l);
        b.kind = "block";
        b.params = 12 * C * C + 13 * C;
        // saved per token: ln1, qkv(3C), atty, res1, ln2, fch(4C), fch_gelu(4C), out = 16C, plus
        // 4 LN stats, plus attention probabilities NH*T per token.
        int64_t per_tok = 16 * C + 4;
        b.activation_bytes = (per_tok * T + NH * T * T) * f;
        b.activation_bytes_full = C * T * f;  // block input only
        // selective: drop attention probabilities and the GELU output (recomputed)
        b.activation_bytes_selective = (per_tok - 4 * C) * T * f;
        b.flops_per_token = 2.0 * 12 * C * C + 2.0 * 2 * T * C;
        specs.push_back(b);
    }
    LayerSpec head{
        "head",     "head", 2 * C, (C + 2 + V) * T * f, (C + 2 + V) * T * f, (C + 2 + V) * T * f,
        2.0 * C * V};
    specs.push_back(head);
    return specs;
}

// ------------------------------------------------------------------------------------------
// Lifecycle

GptModel::GptModel(const GptDims& dims) : dims_(dims) {
    TS_CHECK(dims.d_model % dims.n_head == 0, "d_model ", dims.d_model, " not divisible by n_head ",
             dims.n_head);
    allocate(gpt_param_table(dims));
}

double GptModel::train_flops_per_target() const {
    double f = 0;
    for (const auto& s : layer_specs()) f += s.flops_per_token;
    return 3.0 * f;
}

std::string GptModel::describe() const {
    return str_cat("GPT ", dims_.n_layer, " layers, ", dims_.n_head, " heads, d_model ",
                   dims_.d_model, ", seq ", dims_.seq_len, ", vocab ", dims_.vocab, ", ",
                   param_table().total_numel(), " parameters");
}

void GptModel::ensure_acts(int B, int T) {
    if (B == acts_B_ && T == acts_T_) return;
    const int64_t C = dims_.d_model, V = dims_.vocab, NH = dims_.n_head, BT = (int64_t)B * T;
    const auto A = MemCategory::activations, W = MemCategory::workspace;
    blocks_.clear();
    blocks_.resize(dims_.n_layer);
    encoded_ = Tensor::empty({B, T, C}, A);
    for (auto& b : blocks_) {
        b.ln1 = Tensor::empty({BT, C}, A);
        b.ln1_mean = Tensor::empty({BT}, A);
        b.ln1_rstd = Tensor::empty({BT}, A);
        b.qkv = Tensor::empty({BT, 3 * C}, A);
        b.att = Tensor::empty({B, NH, T, T}, A);
        b.atty = Tensor::empty({BT, C}, A);
        b.res1 = Tensor::empty({BT, C}, A);
        b.ln2 = Tensor::empty({BT, C}, A);
        b.ln2_mean = Tensor::empty({BT}, A);
        b.ln2_rstd = Tensor::empty({BT}, A);
        b.fch = Tensor::empty({BT, 4 * C}, A);
        b.fch_gelu = Tensor::empty({BT, 4 * C}, A);
        b.out = Tensor::empty({BT, C}, A);
    }
    lnf_ = Tensor::empty({BT, C}, A);
    lnf_mean_ = Tensor::empty({BT}, A);
    lnf_rstd_ = Tensor::empty({BT}, A);
    logits_ = Tensor::empty({BT, V}, A);
    losses_ = Tensor::empty({BT}, A);
    dresidual_ = Tensor::empty({BT, C}, W);
    dln_ = Tensor::empty({BT, C}, W);
    dqkv_ = Tensor::empty({BT, 3 * C}, W);
    datty_ = Tensor::empty({BT, C}, W);
    dfch_ = Tensor::empty({BT, 4 * C}, W);
    dfch_gelu_ = Tensor::empty({BT, 4 * C}, W);
    acts_B_ = B;
    acts_T_ = T;
}

// ------------------------------------------------------------------------------------------
// Forward

void GptModel::forward(const int32_t* inputs, const int32_t* targets, int B, int T) {
    TS_CHECK(T >= 1 && T <= dims_.seq_len, "sequence length ", T, " outside 1..", dims_.seq_len);
    ensure_acts(B, T);
    const int C = dims_.d_model, NH = dims_.n_head, V = dims_.vocab, N = B * T;
    for (int i = 0; i < N; ++i)
        TS_CHECK(inputs[i] >= 0 && inputs[i] < V, "token id ", inputs[i], " outside vocab ", V);
    embedding_forward(encoded_.f32(), inputs, param("wte.weight"), param("wpe.weight"), B, T, C);
    const float* x = encoded_.f32();
    for (int l = 0; l < dims_.n_layer; ++l) {
        BlockActs& a = blocks_[l];
        std::string p = "h." + std::to_string(l) + ".";
        layernorm_forward(a.ln1.f32(), a.ln1_mean.f32(), a.ln1_rstd.f32(), x,
                          param(p + "ln_1.weight"), param(p + "ln_1.bias"), N, C);
        matmul_forward(a.qkv.f32(), a.ln1.f32(), param(p + "attn.c_attn.weight"),
                       param(p + "attn.c_attn.bias"), N, C, 3 * C);
        attention_forward(a.atty.f32(), a.att.f32(), a.qkv.f32(), B, T, C, NH);
        matmul_forward(a.res1.f32(), a.atty.f32(), param(p + "attn.c_proj.weight"),
                       param(p + "attn.c_proj.bias"), N, C, C);
        accumulate(a.res1.f32(), x, (int64_t)N * C);
        layernorm_forward(a.ln2.f32(), a.ln2_mean.f32(), a.ln2_rstd.f32(), a.res1.f32(),
                          param(p + "ln_2.weight"), param(p + "ln_2.bias"), N, C);
        matmul_forward(a.fch.f32(), a.ln2.f32(), param(p + "mlp.c_fc.weight"),
                       param(p + "mlp.c_fc.bias"), N, C, 4 * C);
        gelu_forward(a.fch_gelu.f32(), a.fch.f32(), (int64_t)N * 4 * C);
        matmul_forward(a.out.f32(), a.fch_gelu.f32(), param(p + "mlp.c_proj.weight"),
                       param(p + "mlp.c_proj.bias"), N, 4 * C, C);
        accumulate(a.out.f32(), a.res1.f32(), (int64_t)N * C);
        x = a.out.f32();
    }
    layernorm_forward(lnf_.f32(), lnf_mean_.f32(), lnf_rstd_.f32(), x, param("ln_f.weight"),
                      param("ln_f.bias"), N, C);
    matmul_forward(logits_.f32(), lnf_.f32(), param("wte.weight"), nullptr, N, C, V);
    if (targets) {
        for (int i = 0; i < N; ++i)
            TS_CHECK(targets[i] < V, "target id ", targets[i], " outside vocab ", V);
        cross_entropy_forward(losses_.f32(), logits_.f32(), targets, N, V);
    }
}

StepResult GptModel::collect(const int32_t* targets, int B, int T) const {
    StepResult r;
    const int N = B * T, V = dims_.vocab;
    for (int i = 0; i < N; ++i) {
        if (targets[i] < 0) continue;
        r.loss_sum += losses_.f32()[i];
        r.count += 1;
        const float* row = logits_.f32() + (int64_t)i * V;
        int best = 0;
        for (int v = 1; v < V; ++v)
            if (row[v] > row[best]) best = v;
        r.correct += best == targets[i];
    }
    return r;
}

const float* GptModel::forward_logits(const int32_t* inputs, int B, int T) {
    forward(inputs, nullptr, B, T);
    return logits_.f32();
}

StepResult GptModel::evaluate(const Batch& batch) {
    forward(batch.inputs.data(), batch.targets.data(), batch.batch_size, batch.seq_len);
    return collect(batch.targets.data(), batch.batch_size, batch.seq_len);
}

// ------------------------------------------------------------------------------------------
// Backward

void GptModel::backward(const int32_t* inputs, const int32_t* targets, int B, int T, float dloss) {
    const int C = dims_.d_model, NH = dims_.n_head, V = dims_.vocab, N = B * T;
    // head: logits_ holds probabilities; turn them into dlogits in place
    cross_entropy_backward(logits_.f32(), targets, dloss, N, V);
    dln_.zero();
    matmul_backward(dln_.f32(), grad("wte.weight"), nullptr, logits_.f32(), lnf_.f32(),
                    param("wte.weight"), N, C, V);
    dresidual_.zero();
    const float* xL = dims_.n_layer ? blocks_.back().out.f32() : encoded_.f32();
    layernorm_backward(dresidual_.f32(), grad("ln_f.weight"), grad("ln_f.bias"), dln_.f32(), xL,
                       param("ln_f.weight"), lnf_mean_.f32(), lnf_rstd_.f32(), N, C);
    // blocks, last to first; dresidual_ is d(block output) on entry and d(block input) on exit
    for (int l = dims_.n_layer - 1; l >= 0; --l) {
        BlockActs& a = blocks_[l];
        std::string p = "h." + std::to_string(l) + ".";
        const float* x = l ? blocks_[l - 1].out.f32() : encoded_.f32();
        float* g = dresidual_.f32();
        dfch_gelu_.zero();
        matmul_backward(dfch_gelu_.f32(), grad(p + "mlp.c_proj.weight"),
                        grad(p + "mlp.c_proj.bias"), g, a.fch_gelu.f32(),
                        param(p + "mlp.c_proj.weight"), N, 4 * C, C);
        dfch_.zero();
        gelu_backward(dfch_.f32(), a.fch.f32(), dfch_gelu_.f32(), (int64_t)N * 4 * C);
        dln_.zero();
        matmul_backward(dln_.f32(), grad(p + "mlp.c_fc.weight"), grad(p + "mlp.c_fc.bias"),
                        dfch_.f32(), a.ln2.f32(), param(p + "mlp.c_fc.weight"), N, C, 4 * C);
        layernorm_backward(g, grad(p + "ln_2.weight"), grad(p + "ln_2.bias"), dln_.f32(),
                           a.res1.f32(), param(p + "ln_2.weight"), a.ln2_mean.f32(),
                           a.ln2_rstd.f32(), N, C);
        datty_.zero();
        matmul_backward(datty_.f32(), grad(p + "attn.c_proj.weight"), grad(p + "attn.c_proj.bias"),
                        g, a.atty.f32(), param(p + "attn.c_proj.weight"), N, C, C);
        dqkv_.zero();
        attention_backward(dqkv_.f32(), datty_.f32(), a.qkv.f32(), a.att.f32(), B, T, C, NH);
        dln_.zero();
        matmul_backward(dln_.f32(), grad(p + "attn.c_attn.weight"), grad(p + "attn.c_attn.bias"),
                        dqkv_.f32(), a.ln1.f32(), param(p + "attn.c_attn.weight"), N, C, 3 * C);
        layernorm_backward(g, grad(p + "ln_1.weight"), grad(p + "ln_1.bias"), dln_.f32(), x,
                           param(p + "ln_1.weight"), a.ln1_mean.f32(), a.ln1_rstd.f32(), N, C);
    }
    embedding_backward(grad("wte.weight"), grad("wpe.weight"), dresidual_.f32(), inputs, B, T, C);
}

StepResult GptModel::forward_backward(const Batch& batch, float loss_scale) {
    const int B = batch.batch_size, T = batch.seq_len;
    TS_CHECK((int64_t)batch.inputs.size() == (int64_t)B * T, "batch inputs size mismatch");
    forward(batch.inputs.data(), batch.targets.data(), B, T);
    StepResult r;
    for (int i = 0; i < B * T; ++i)
        if (batch.targets[i] >= 0) {
            r.loss_sum += losses_.f32()[i];
            r.count += 1;
        }
    backward(batch.inputs.data(), batch.targets.data(), B, T, loss_scale);
    return r;
}

}  // namespace tessera
