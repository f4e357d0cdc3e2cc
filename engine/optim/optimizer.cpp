#include "engine/optim/optimizer.h"

#include <cmath>

#include "engine/kernels/cpu/adamw.h"
#include "engine/kernels/cpu/elementwise.h"

namespace tessera {

double lr_at_step(const OptimizerConfig& c, int64_t step) {
    if (step < c.warmup_steps) return c.lr * (double)(step + 1) / (double)c.warmup_steps;
    int64_t decay_steps = c.total_steps - c.warmup_steps;
    if (decay_steps <= 0) return c.lr;
    double ratio = (double)(step - c.warmup_steps) / (double)decay_steps;
    if (ratio > 1.0) ratio = 1.0;
    double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
    return c.min_lr + coeff * (c.lr - c.min_lr);
}

double grad_global_norm(const float* grads, int64_t n) {
    return std::sqrt(sum_squares(grads, n));
}

AdamW::AdamW(const ParamTable& table, const OptimizerConfig& cfg)
    : table_(table),
      cfg_(cfg),
      m_(Tensor::zeros({table.total_numel()}, MemCategory::optimizer)),
      v_(Tensor::zeros({table.total_numel()}, MemCategory::optimizer)) {}

OptimizerConfig optimizer_config(const TrainConfig& t) {
    OptimizerConfig c;
    c.lr = t.lr;
    c.min_lr = t.min_lr;
    c.warmup_steps = t.warmup_steps;
    c.total_steps = t.steps;
    c.beta1 = t.beta1;
    c.beta2 = t.beta2;
    c.eps = t.eps;
    c.weight_decay = t.weight_decay;
    c.grad_clip = t.grad_clip;
    return c;
}

double AdamW::step(float* params, const float* grads, int64_t step, double grad_norm) {
    double lr = lr_at_step(cfg_, step);
    const float scale = clip_scale(cfg_.grad_clip, grad_norm);
    ++t_;
    for (const ParamInfo& p : table_.entries()) {
        AdamWHyper h{static_cast<float>(lr),
                     static_cast<float>(cfg_.beta1),
                     static_cast<float>(cfg_.beta2),
                     static_cast<float>(cfg_.eps),
                     p.decay ? static_cast<float>(cfg_.weight_decay) : 0.0f,
                     t_};
        adamw_update(params + p.offset, grads + p.offset, m_.f32() + p.offset, v_.f32() + p.offset,
                     p.numel, h, scale);
    }
    return lr;
}

}  // namespace tessera
