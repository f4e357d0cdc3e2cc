// Weights from a Hugging Face model folder (model.safetensors, or the shards its
// model.safetensors.index.json maps), fp32, bf16 or fp16, into Tessera's parameter layouts.
#pragma once
#include <string>

#include "engine/model/llama.h"

namespace tessera {

// The folder's single weights file (model.safetensors): GPT-2 folders.
std::string hf_weights_file(const std::string& dir);
// Fills dst (laid out as llama_param_table(d)) from the folder, each parameter from the tensors
// llama_hf_tensors names (q/k/v into qkv_proj, gate/up into gate_up_proj). InputError naming the
// file and tensor for a missing tensor, or its expected and found shape.
void llama_load_hf_weights(const std::string& dir, const LlamaDims& d, float* dst);

}  // namespace tessera
