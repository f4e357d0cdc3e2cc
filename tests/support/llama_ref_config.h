// Test helper: a Llama-family shape's settings as the PyTorch reference scripts read them
// (tests/model/torch_llama_ref.py and torch_ref.py, run with Debian's python3-torch): the keys of
// the JSON both CPU reference tests hand over beside the weights. Header-only.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/model/llama.h"

namespace tessera::test_support {

// rope_scaling is an empty object when the shape has none.
inline nlohmann::json llama_ref_config(const LlamaDims& d) {
    nlohmann::json rs = nlohmann::json::object();
    if (!d.rope_scaling.type.empty())
        rs = {
            {"type", d.rope_scaling.type},
            {"factor", d.rope_scaling.factor},
            {"low_freq_factor", d.rope_scaling.low_freq_factor},
            {"high_freq_factor", d.rope_scaling.high_freq_factor},
            {"original_max_position_embeddings", d.rope_scaling.original_max_position_embeddings}};
    return {{"n_layer", d.n_layer},
            {"n_head", d.n_head},
            {"n_kv_head", d.n_kv_head},
            {"head_dim", d.head_dim},
            {"ffn", d.ffn},
            {"norm_eps", d.norm_eps},
            {"rope_theta", d.rope_theta},
            {"rope_scaling", rs},
            {"qkv_bias", d.qkv_bias},
            {"qk_norm", d.qk_norm},
            {"tie_embeddings", d.tie_embeddings}};
}

}  // namespace tessera::test_support
