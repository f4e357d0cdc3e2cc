// The Llama family (Llama 3, SmolLM, TinyLlama, Mistral, Qwen2/2.5, Qwen3): token embedding,
// pre-norm blocks of RMSNorm, grouped-query attention with rotary embeddings (optional q/k/v
// biases, Qwen2; optional per-head RMSNorm of q and k before the rotation, Qwen3) and
// a SwiGLU MLP, a final RMSNorm and a head tied to the embedding or its own. Sizes and the
// parameter table; the layers are the parallel runtime's (engine/parallel/llama_layers.cpp), the
// reference is PyTorch (tests/model). Parameter names follow Hugging Face's, except that q/k/v
// are one fused `qkv_proj` (rows: q, then k, then v) and gate/up one `gate_up_proj` (rows: gate,
// then up), as the GEMMs compute them; import and export split them.
#pragma once
#include <vector>

#include "engine/core/rope_scaling.h"
#include "engine/model/model.h"

namespace tessera {

struct LlamaDims {
    int n_layer = 4, n_head = 4, n_kv_head = 2, d_model = 64, head_dim = 16, ffn = 128,
        seq_len = 64;
    int vocab = 256;
    float norm_eps = 1e-5f;
    float rope_theta = 1e4f;
    RopeScaling rope_scaling;
    bool qkv_bias = false, tie_embeddings = true, qk_norm = false;
    int q_width() const { return n_head * head_dim; }
    int kv_width() const { return n_kv_head * head_dim; }
};

ParamTable llama_param_table(const LlamaDims& d);
std::vector<LayerSpec> llama_layer_specs(const LlamaDims& d);

}  // namespace tessera
