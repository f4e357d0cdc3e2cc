#include "engine/model/hf_names.h"

namespace tessera {

namespace {

const std::string kGptPrefix = "transformer.";

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<HfTensor> llama_hf_tensors(const ParamInfo& p, const LlamaDims& d) {
    const int64_t C = d.d_model, Q = d.q_width(), K = d.kv_width(), F = d.ffn;
    const std::string& n = p.name;
    // "model.layers.i.self_attn." / "model.layers.i.mlp."
    auto base = [&](const std::string& fused) { return n.substr(0, n.size() - fused.size()); };
    if (ends_with(n, "self_attn.qkv_proj.weight")) {
        const std::string b = base("qkv_proj.weight");
        return {{b + "q_proj.weight", {Q, C}, 0},
                {b + "k_proj.weight", {K, C}, Q * C},
                {b + "v_proj.weight", {K, C}, (Q + K) * C}};
    }
    if (ends_with(n, "self_attn.qkv_proj.bias")) {
        const std::string b = base("qkv_proj.bias");
        return {{b + "q_proj.bias", {Q}, 0},
                {b + "k_proj.bias", {K}, Q},
                {b + "v_proj.bias", {K}, Q + K}};
    }
    if (ends_with(n, "mlp.gate_up_proj.weight")) {
        const std::string b = base("gate_up_proj.weight");
        return {{b + "gate_proj.weight", {F, C}, 0}, {b + "up_proj.weight", {F, C}, F * C}};
    }
    return {{n, p.shape, 0}};
}

std::string gpt_hf_name(const std::string& tessera_name) {
    return kGptPrefix + tessera_name;
}

std::string gpt_tessera_name(const std::string& hf_name) {
    return hf_name.rfind(kGptPrefix, 0) == 0 ? hf_name.substr(kGptPrefix.size()) : hf_name;
}

HfTensor gpt_hf_tensor(const ParamInfo& p) {
    const bool conv1d =
        ends_with(p.name, "attn.c_attn.weight") || ends_with(p.name, "attn.c_proj.weight") ||
        ends_with(p.name, "mlp.c_fc.weight") || ends_with(p.name, "mlp.c_proj.weight");
    if (!conv1d) return {gpt_hf_name(p.name), p.shape, 0, false};
    return {gpt_hf_name(p.name), {p.shape[1], p.shape[0]}, 0, true};
}

void hf_transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
}

}  // namespace tessera
