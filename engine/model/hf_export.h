// A model's weights as a Hugging Face folder's model.safetensors (`tessera export --hf`; the
// config.json beside it is engine/config's hf_config_json): fp32, each parameter written as the
// Hugging Face tensors hf_names.h maps it to, so that hf_import reads the folder back bit for bit.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/model/hf_names.h"
#include "engine/model/params.h"

namespace tessera {

// What a parameter is on the Hugging Face side: llama_hf_tensors or gpt_hf_tensor.
using HfTensorsOf = std::function<std::vector<HfTensor>(const ParamInfo&)>;

// Writes `path` atomically: every parameter of `table` (values in `params`, laid out as the table)
// as the tensors `hf_tensors` names, in table order, with safetensors' {"format": "pt"}
// metadata that transformers asks for. TS_CHECK that the tensors cover each parameter exactly.
void hf_export_weights(const ParamTable& table, const float* params, const HfTensorsOf& hf_tensors,
                       const std::string& path);

}  // namespace tessera
