// What the Model page shows, computed without Qt: the layer specs a ModelConfig builds (the same
// gpt_layer_specs / MLP specs the planner uses), totals, memory at each precision, the engine's
// own validation of a config, and preset switching. Widgets only format and display these.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/model/model.h"

namespace tessera {

// Layer specs of the model a config describes (GPT: vocab from the tokenizer; MLP: 784 inputs,
// hidden..., 10 classes). Empty when the shape is not buildable (see model_check_config).
std::vector<LayerSpec> model_layer_specs(const ModelConfig& m);

struct LayerTotals {
    int64_t params = 0;
    int64_t activation_bytes = 0;  // per sample, fp32, no recompute
    double flops_per_token = 0;    // forward
};
LayerTotals model_layer_totals(const std::vector<LayerSpec>& specs);

// Bytes for `params` parameters. fp32 training: weights + grads + AdamW m, v = 16 B/param;
// bf16 mixed training: bf16 weights + bf16 grads + fp32 master + m, v = 16 B/param.
struct ModelMemory {
    int64_t fp32_weights = 0, bf16_weights = 0;
    int64_t fp32_weights_grads = 0, bf16_weights_grads = 0;
    int64_t fp32_training = 0, bf16_training = 0;
};
ModelMemory model_memory(int64_t params);

// "" when the engine accepts the config, else its one error (file:line:col: key: expected, found)
// with cfg.source_path (else `name`) standing for the file, so relative paths resolve as on load.
std::string model_check_config(const RunConfig& cfg, const std::string& name = "project.yaml");

// Switches cfg to `preset`: its dimensions and vocabulary, and the fields that must follow the
// model family (MLP: fashion-mnist and no tp/pp; GPT: brown). Clears model.init_from.
void model_apply_preset(RunConfig& cfg, const std::string& preset);
const std::vector<std::string>& model_preset_names();

// The family picker: the series of the engine's preset table in its order (GPT-2, Llama 3,
// SmolLM, ...; config_preset_series), and the presets of one series.
std::vector<std::string> model_series_names();
std::vector<std::string> model_series_presets(const std::string& series);

// A Hugging Face model folder, read by the engine's own reader (hf_config_apply).
struct ModelFolder {
    ModelConfig model;         // sizes from config.json; init_from = the folder as given
    std::string architecture;  // config.json's architectures[0], e.g. "LlamaForCausalLM"
};
// Reads `dir` as model.init_from would name it (relative paths resolve against cfg.base_dir, as
// config_resolve_path does). InputError with the engine's message when it is not a folder, has
// no config.json, is not JSON, names an unsupported architecture or has no safetensors weights.
ModelFolder model_read_folder(const RunConfig& cfg, const std::string& dir);
// The architecture of cfg's folder; "" when the model is not read from a folder.
std::string model_folder_architecture(const RunConfig& cfg);
// Switches cfg to a folder's model (model_read_folder) and the fields that follow the family.
void model_apply_folder(RunConfig& cfg, const ModelConfig& folder_model);

// What one layer is made of: "RMSNorm · attention 9 heads / 3 kv, head_dim 64 · RMSNorm · SwiGLU
// ffn 1536", and one line per part with its parameters (the table's tooltip).
struct LayerStructure {
    std::string text;
    std::string detail;
};
// One per spec of model_layer_specs(m), in order.
std::vector<LayerStructure> model_layer_structure(const ModelConfig& m,
                                                  const std::vector<LayerSpec>& specs);

// "124.4 M", "1.50 GiB", "2.3 GFLOP"; format_number: 576, 10000, 1e6 (shortest, no "e+06").
std::string format_count(double n);
std::string format_number(double v);
std::string format_bytes(double bytes);
std::string format_flops(double flops);

}  // namespace tessera
