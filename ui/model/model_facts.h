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

// "124.4 M", "1.50 GiB", "2.3 GFLOP".
std::string format_count(double n);
std::string format_bytes(double bytes);
std::string format_flops(double flops);

}  // namespace tessera
