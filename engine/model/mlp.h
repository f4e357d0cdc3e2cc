// MLP classifier (Fashion-MNIST): Linear -> ReLU -> ... -> Linear -> softmax cross-entropy.
// Parameters "fc.<i>.weight" (out, in) and "fc.<i>.bias".
#pragma once
#include <vector>

#include "engine/model/model.h"

namespace tessera {

// The layer widths a model config asks for: 784, the hidden sizes (default 256), 10 classes.
std::vector<int> mlp_sizes(const ModelConfig& m);
// The parameters of those widths: fc.<i>.weight (out, in), fc.<i>.bias (out).
ParamTable mlp_param_table(const std::vector<int>& sizes);
// Per-layer specs (parameters, saved activation bytes, forward FLOPs) for those widths.
std::vector<LayerSpec> mlp_layer_specs(const std::vector<int>& sizes);

class MlpModel final : public Model {
  public:
    // sizes: input, hidden..., classes (e.g. {784, 256, 10})
    explicit MlpModel(std::vector<int> sizes);
    StepResult forward_backward(const Batch& batch, float loss_scale) override;
    StepResult evaluate(const Batch& batch) override;
    std::vector<LayerSpec> layer_specs() const override;
    int targets_per_sample() const override { return 1; }
    double train_flops_per_target() const override;
    std::string describe() const override;
    const std::vector<int>& sizes() const { return sizes_; }

  private:
    void forward(const Batch& batch);
    std::vector<int> sizes_;
    int acts_B_ = 0;
    std::vector<Tensor> pre_, post_;  // per layer: pre-activation (B, out), post-ReLU (B, out)
    Tensor losses_, dcur_, dnext_;
};

}  // namespace tessera
