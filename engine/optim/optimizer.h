// AdamW over a model's flat parameter buffer: decoupled weight decay on matrices and embeddings
// only (per the ParamTable), global-norm gradient clipping (torch.nn.utils.clip_grad_norm_
// semantics), and the warmup + cosine learning-rate schedule.
#pragma once
#include <cstdint>

#include "engine/config/config.h"
#include "engine/core/tensor.h"
#include "engine/kernels/cpu/adamw.h"
#include "engine/model/params.h"

namespace tessera {

struct OptimizerConfig {
    double lr = 1e-3, min_lr = 1e-4;
    int64_t warmup_steps = 0, total_steps = 1;
    double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.0, grad_clip = 0.0;
};

// clip_scale (the gradient-clipping factor) is in engine/kernels/cpu/adamw.h, shared with the
// CUDA AdamW kernel.

// The optimizer settings of a run (train.lr, min_lr, warmup_steps, steps, betas, eps, ...).
OptimizerConfig optimizer_config(const TrainConfig& t);

// Learning rate at 0-based `step`: linear warmup from lr/warmup to lr over warmup_steps, then
// cosine decay to min_lr at total_steps.
double lr_at_step(const OptimizerConfig& c, int64_t step);

class AdamW {
  public:
    AdamW(const ParamTable& table, const OptimizerConfig& cfg);
    // Applies one update for 0-based `step` with the gradient norm already known (global over all
    // ranks). Returns the learning rate used.
    double step(float* params, const float* grads, int64_t step, double grad_norm);
    Tensor& m() { return m_; }
    Tensor& v() { return v_; }
    int64_t steps_taken() const { return t_; }
    void set_steps_taken(int64_t t) { t_ = t; }
    const OptimizerConfig& config() const { return cfg_; }

  private:
    const ParamTable& table_;
    OptimizerConfig cfg_;
    Tensor m_, v_;
    int64_t t_ = 0;
};

// sqrt(sum of squares) of the flat gradient, accumulated in double.
double grad_global_norm(const float* grads, int64_t n);

}  // namespace tessera
