#include "engine/model/mlp.h"

#include <cmath>

#include "engine/core/error.h"
#include "engine/core/str_join.h"
#include "engine/kernels/cpu/cross_entropy.h"
#include "engine/kernels/cpu/elementwise.h"
#include "engine/kernels/cpu/matmul.h"

namespace tessera {

ParamTable mlp_param_table(const std::vector<int>& sizes) {
    ParamTable t;
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
        std::string p = "fc." + std::to_string(i) + ".";
        t.add(p + "weight", {sizes[i + 1], sizes[i]}, true, InitKind::normal,
              std::sqrt(2.0f / sizes[i]));
        t.add(p + "bias", {sizes[i + 1]}, false, InitKind::zeros);
    }
    return t;
}

MlpModel::MlpModel(std::vector<int> sizes) : sizes_(std::move(sizes)) {
    TS_CHECK(sizes_.size() >= 2, "an MLP needs at least input and output sizes");
    allocate(mlp_param_table(sizes_));
}

std::string MlpModel::describe() const {
    return str_cat("MLP ", str_join(sizes_, "-", [](int n) { return std::to_string(n); }), ", ",
                   param_table().total_numel(), " parameters");
}

std::vector<int> mlp_sizes(const ModelConfig& m) {
    std::vector<int> sizes{784};
    for (int h : m.hidden) sizes.push_back(h);
    if (m.hidden.empty()) sizes.push_back(256);
    sizes.push_back(10);
    return sizes;
}

std::vector<LayerSpec> mlp_layer_specs(const std::vector<int>& sizes) {
    std::vector<LayerSpec> specs;
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
        LayerSpec s;
        s.name = "fc." + std::to_string(i);
        s.kind = "linear";
        s.params = (int64_t)sizes[i] * sizes[i + 1] + sizes[i + 1];
        s.activation_bytes = 2 * (int64_t)sizes[i + 1] * 4;
        s.activation_bytes_full = s.activation_bytes_selective = s.activation_bytes;
        s.flops_per_token = 2.0 * sizes[i] * sizes[i + 1];
        specs.push_back(s);
    }
    return specs;
}

std::vector<LayerSpec> MlpModel::layer_specs() const {
    return mlp_layer_specs(sizes_);
}

double MlpModel::train_flops_per_target() const {
    double f = 0;
    for (const auto& s : layer_specs()) f += s.flops_per_token;
    return 3.0 * f;
}

void MlpModel::forward(const Batch& batch) {
    const int B = batch.batch_size;
    TS_CHECK((int64_t)batch.features.size() == (int64_t)B * sizes_[0], "MLP batch has ",
             batch.features.size(), " features, expected ", (int64_t)B * sizes_[0]);
    const size_t L = sizes_.size() - 1;
    if (acts_B_ != B) {
        pre_.clear();
        post_.clear();
        for (size_t i = 0; i < L; ++i) {
            pre_.push_back(Tensor::empty({B, sizes_[i + 1]}, MemCategory::activations));
            post_.push_back(Tensor::empty({B, sizes_[i + 1]}, MemCategory::activations));
        }
        losses_ = Tensor::empty({B}, MemCategory::activations);
        int widest = 0;
        for (int s : sizes_) widest = std::max(widest, s);
        dcur_ = Tensor::empty({B, widest}, MemCategory::workspace);
        dnext_ = Tensor::empty({B, widest}, MemCategory::workspace);
        acts_B_ = B;
    }
    const float* x = batch.features.data();
    for (size_t i = 0; i < L; ++i) {
        std::string p = "fc." + std::to_string(i) + ".";
        matmul_forward(pre_[i].f32(), x, param(p + "weight"), param(p + "bias"), B, sizes_[i],
                       sizes_[i + 1]);
        if (i + 1 < L) {
            relu_forward(post_[i].f32(), pre_[i].f32(), (int64_t)B * sizes_[i + 1]);
            x = post_[i].f32();
        }
    }
    // last layer: logits in pre_[L-1] become probabilities
    cross_entropy_forward(losses_.f32(), pre_[L - 1].f32(), batch.targets.data(), B, sizes_.back());
}

StepResult MlpModel::evaluate(const Batch& batch) {
    forward(batch);
    StepResult r;
    for (int b = 0; b < batch.batch_size; ++b) r.loss_sum += losses_.f32()[b];
    r.count = batch.batch_size;
    r.correct =
        count_correct(pre_.back().f32(), batch.targets.data(), batch.batch_size, sizes_.back());
    return r;
}

StepResult MlpModel::forward_backward(const Batch& batch, float loss_scale) {
    StepResult r = evaluate(batch);
    const int B = batch.batch_size;
    const size_t L = sizes_.size() - 1;
    float* dlogits = pre_[L - 1].f32();
    cross_entropy_backward(dlogits, batch.targets.data(), loss_scale, B, sizes_.back());
    const float* dout = dlogits;
    for (size_t i = L; i-- > 0;) {
        std::string p = "fc." + std::to_string(i) + ".";
        const float* inp = i ? post_[i - 1].f32() : batch.features.data();
        float* dinp = nullptr;
        if (i) {
            dnext_.zero();
            dinp = dnext_.f32();
        }
        matmul_backward(dinp, grad(p + "weight"), grad(p + "bias"), dout, inp, param(p + "weight"),
                        B, sizes_[i], sizes_[i + 1]);
        if (i) {
            // through the ReLU of layer i-1
            dcur_.zero();
            relu_backward(dcur_.f32(), pre_[i - 1].f32(), dnext_.f32(), (int64_t)B * sizes_[i]);
            dout = dcur_.f32();
        }
    }
    return r;
}

}  // namespace tessera
