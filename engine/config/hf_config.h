// A Hugging Face model folder's JSON files: reading them (config.json, through hf_config_apply in
// config.h; model.safetensors.index.json) and writing config.json for `tessera export --hf`.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "engine/config/config.h"

namespace tessera {

// The parsed file; InputError naming the path when it is missing or not JSON (`missing` says
// what the caller expected to find there).
nlohmann::json hf_read_json(const std::string& path, const std::string& missing);

// The transformers class a model exports as: GPT2LMHeadModel for a GPT; in the Llama family
// Qwen3ForCausalLM when it has per-head q/k norms (model.qk_norm), Qwen2ForCausalLM when it has
// q/k/v biases (Llama's and Mistral's attention_bias would put a bias on o_proj too),
// MistralForCausalLM for a Mistral preset or folder, else LlamaForCausalLM. InputError for an MLP
// or for q/k norms with q/k/v biases (no transformers class has both without an o_proj bias).
std::string hf_export_architecture(const ModelConfig& m);

// The config.json that makes transformers build the model `m` describes (sizes resolved, as
// config_parse leaves them) as `architecture` (hf_export_architecture); fp32 weights.
// hf_config_apply reads it back to the same model. Rotary settings in both spellings: top-level
// rope_theta / rope_scaling (4.x) and rope_parameters (5.x).
nlohmann::json hf_config_json(const ModelConfig& m, const std::string& architecture);

}  // namespace tessera
