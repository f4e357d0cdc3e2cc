// The model interface the training loop drives: a flat parameter buffer described by a
// ParamTable, forward+backward over one micro-batch accumulating into a flat gradient buffer,
// evaluation, and the per-layer specs the planner/estimator uses.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/core/tensor.h"
#include "engine/model/params.h"

namespace tessera {

// One micro-batch. GPT: inputs/targets are (batch, seq_len) token ids. MLP: features are
// (batch, n_features) and targets (batch) class ids.
struct Batch {
    int batch_size = 0;
    int seq_len = 1;
    std::vector<int32_t> inputs;
    std::vector<int32_t> targets;
    std::vector<float> features;
};

struct StepResult {
    double loss_sum = 0.0;  // sum of per-target losses
    int64_t count = 0;      // number of targets
    int64_t correct = 0;    // argmax == target (classification accuracy)
};

// What the planner needs to know of one layer (per sample of seq_len tokens where that applies).
struct LayerSpec {
    std::string name;  // "embedding", "block.3", "head"
    std::string kind;  // embedding | block | head | linear
    int64_t params = 0;
    int64_t activation_bytes = 0;            // saved for backward, per sample, fp32, no recompute
    int64_t activation_bytes_full = 0;       // with full recompute (block input only), per sample
    int64_t activation_bytes_selective = 0;  // with selective recompute, per sample
    double flops_per_token = 0.0;            // forward; training ≈ 3x
};

class Model {
  public:
    virtual ~Model() = default;
    const ParamTable& param_table() const { return table_; }
    Tensor& params() { return params_; }
    Tensor& grads() { return grads_; }
    const Tensor& params() const { return params_; }
    float* param(const std::string& name) { return params_.f32() + table_.at(name).offset; }
    float* grad(const std::string& name) { return grads_.f32() + table_.at(name).offset; }
    void init_params(uint64_t seed) { params_init(table_, seed, params_.f32()); }
    void zero_grads() { grads_.zero(); }

    // grads += d(loss_scale * sum of losses)/d params. Returns the loss sum and count.
    virtual StepResult forward_backward(const Batch& batch, float loss_scale) = 0;
    virtual StepResult evaluate(const Batch& batch) = 0;
    virtual std::vector<LayerSpec> layer_specs() const = 0;
    virtual int targets_per_sample() const = 0;  // seq_len for GPT, 1 for the MLP
    // Training FLOPs per target (forward + backward), for MFU / GFLOP/s figures.
    virtual double train_flops_per_target() const = 0;
    virtual std::string describe() const = 0;

  protected:
    void allocate(ParamTable table);
    ParamTable table_;
    Tensor params_, grads_;
};

// Builds the model a config describes (vocab size from the tokenizer for GPT presets).
std::unique_ptr<Model> model_create(const ModelConfig& cfg, int vocab_size);

}  // namespace tessera
