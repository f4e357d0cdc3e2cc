// GPT-2: token + position embedding, pre-LN blocks (causal multi-head attention, 4x GELU(tanh)
// MLP), final LayerNorm, LM head tied to the token embedding, cross-entropy. Explicit forward and
// backward per layer on the CPU kernels. Parameter names follow HF GPT-2 without the
// "transformer." prefix; linear weights are stored (out, in) like nn.Linear.
#pragma once
#include <vector>

#include "engine/model/model.h"

namespace tessera {

struct GptDims {
    int n_layer = 4, n_head = 4, d_model = 128, seq_len = 128, vocab = 256;
};

ParamTable gpt_param_table(const GptDims& d);
std::vector<LayerSpec> gpt_layer_specs(const GptDims& d);

class GptModel final : public Model {
  public:
    explicit GptModel(const GptDims& dims);
    const GptDims& dims() const { return dims_; }

    StepResult forward_backward(const Batch& batch, float loss_scale) override;
    StepResult evaluate(const Batch& batch) override;
    std::vector<LayerSpec> layer_specs() const override { return gpt_layer_specs(dims_); }
    int targets_per_sample() const override { return dims_.seq_len; }
    double train_flops_per_target() const override;
    std::string describe() const override;

    // Forward only; returns the logits (B, T, V) of the last call (valid until the next call).
    // inputs is (B, T) with T <= seq_len.
    const float* forward_logits(const int32_t* inputs, int B, int T);

  private:
    struct BlockActs {
        Tensor ln1, ln1_mean, ln1_rstd, qkv, att, atty, res1, ln2, ln2_mean, ln2_rstd, fch,
            fch_gelu, out;
    };
    void ensure_acts(int B, int T);
    // Runs the forward pass; with targets, fills losses and leaves probabilities in logits_.
    void forward(const int32_t* inputs, const int32_t* targets, int B, int T);
    void backward(const int32_t* inputs, const int32_t* targets, int B, int T, float dloss);
    StepResult collect(const int32_t* targets, int B, int T) const;

    GptDims dims_;
    int acts_B_ = 0, acts_T_ = 0;
    Tensor encoded_, lnf_, lnf_mean_, lnf_rstd_, logits_, losses_;
    std::vector<BlockActs> blocks_;
    Tensor dresidual_, dln_, dqkv_, datty_, dfch_, dfch_gelu_;  // backward scratch
};

}  // namespace tessera
