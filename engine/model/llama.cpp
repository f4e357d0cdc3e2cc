#include "engine/model/llama.h"

#include <string>

namespace tessera {

ParamTable llama_param_table(const LlamaDims& d) {
    const int64_t C = d.d_model, Q = d.q_width(), K = d.kv_width(), F = d.ffn, V = d.vocab;
    const float s = 0.02f;  // transformers' initializer_range
    ParamTable t;
    t.add("model.embed_tokens.weight", {V, C}, true, InitKind::normal, s);
    for (int l = 0; l < d.n_layer; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        t.add(p + "input_layernorm.weight", {C}, false, InitKind::ones);
        t.add(p + "self_attn.qkv_proj.weight", {Q + 2 * K, C}, true, InitKind::normal, s);
        if (d.qkv_bias) t.add(p + "self_attn.qkv_proj.bias", {Q + 2 * K}, false, InitKind::zeros);
        if (d.qk_norm) {
            t.add(p + "self_attn.q_norm.weight", {d.head_dim}, false, InitKind::ones);
            t.add(p + "self_attn.k_norm.weight", {d.head_dim}, false, InitKind::ones);
        }
        t.add(p + "self_attn.o_proj.weight", {C, Q}, true, InitKind::normal, s);
        t.add(p + "post_attention_layernorm.weight", {C}, false, InitKind::ones);
        t.add(p + "mlp.gate_up_proj.weight", {2 * F, C}, true, InitKind::normal, s);
        t.add(p + "mlp.down_proj.weight", {C, F}, true, InitKind::normal, s);
    }
    t.add("model.norm.weight", {C}, false, InitKind::ones);
    if (!d.tie_embeddings) t.add("lm_head.weight", {V, C}, true, InitKind::normal, s);
    return t;
}

std::vector<LayerSpec> llama_layer_specs(const LlamaDims& d) {
    const int64_t C = d.d_model, Q = d.q_width(), K = d.kv_width(), F = d.ffn, V = d.vocab,
                  T = d.seq_len;
    const int64_t f = 4;  // bytes per fp32
    std::vector<LayerSpec> specs;
    specs.push_back({"embedding", "embedding", V * C, T * C * f, T * C * f, T * C * f, 0.0});
    for (int l = 0; l < d.n_layer; ++l) {
        LayerSpec b;
        b.name = "block." + std::to_string(l);
        b.kind = "block";
        b.params = 2 * C + (Q + 2 * K) * C + (d.qkv_bias ? Q + 2 * K : 0) +
                   (d.qk_norm ? 2 * d.head_dim : 0) + Q * C + 3 * F * C;
        // saved per token: input, norm 1, qkv, attention output, residual, norm 2, gate+up, SwiGLU
        // output, 2 RMS statistics; plus the attention probabilities (CPU) n_head·T per token
        // (Qwen3's q/k norm also keeps q, k, v before it, and a statistic per q and k head)
        const int64_t per_tok = 3 * C + (Q + 2 * K) + Q + 3 * F + 2 +
                                (d.qk_norm ? Q + 2 * K + d.n_head + d.n_kv_head : 0);
        b.activation_bytes = (per_tok * T + (int64_t)d.n_head * T * T) * f;
        b.activation_bytes_full = C * T * f;
        b.activation_bytes_selective = (per_tok - F) * T * f;
        b.flops_per_token = 2.0 * C * (Q + 2 * K) + 2.0 * Q * C + 2.0 * C * 3 * F + 2.0 * 2 * T * Q;
        specs.push_back(b);
    }
    specs.push_back({"head", "head", C + (d.tie_embeddings ? 0 : V * C), (C + 1 + V) * T * f,
                     (C + 1 + V) * T * f, (C + 1 + V) * T * f, 2.0 * C * V});
    return specs;
}

}  // namespace tessera
