// Tessera's parameters as Hugging Face tensors: the one rule that import (hf_import.cpp,
// gpt_import.cpp) and export (hf_export.cpp) both follow.
//
//   Llama family: `self_attn.qkv_proj` holds q_proj, k_proj, v_proj as bands of rows (weight
//   and bias); `mlp.gate_up_proj` holds gate_proj then up_proj. Every other parameter has its
//   Hugging Face name and shape (a parameter added later, such as Qwen3's q_norm, included).
//   GPT-2: Hugging Face prefixes `transformer.`; the Conv1D weights (attn.c_attn, attn.c_proj,
//   mlp.c_fc, mlp.c_proj) are stored [in, out] where Tessera keeps [out, in] like nn.Linear.
#pragma once
#include <string>
#include <vector>

#include "engine/model/llama.h"
#include "engine/model/params.h"

namespace tessera {

// One Hugging Face tensor held in a Tessera parameter: numel(shape) elements from `offset`
// (a band of rows), or, `transposed`, the whole [out, in] parameter stored as [in, out].
struct HfTensor {
    std::string name;
    Shape shape;              // as Hugging Face stores it
    int64_t offset = 0;       // elements into the Tessera parameter
    bool transposed = false;  // GPT-2 Conv1D
};

// The Hugging Face tensors of Llama-family parameter `p` (of llama_param_table(d)), in row order;
// together they cover the parameter exactly.
std::vector<HfTensor> llama_hf_tensors(const ParamInfo& p, const LlamaDims& d);

// The Hugging Face tensor of GPT-2 parameter `p` (of gpt_param_table).
HfTensor gpt_hf_tensor(const ParamInfo& p);
// "transformer." + name: Hugging Face's name of a GPT-2 parameter; the inverse returns the
// Tessera name of a Hugging Face one (the name itself when it has no prefix).
std::string gpt_hf_name(const std::string& tessera_name);
std::string gpt_tessera_name(const std::string& hf_name);

// dst (cols, rows) = src (rows, cols) transposed.
void hf_transpose(const float* src, int64_t rows, int64_t cols, float* dst);

}  // namespace tessera
