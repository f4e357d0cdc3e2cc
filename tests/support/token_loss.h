// Test helper: a model's mean next-token loss over rows of tokens, through the runtime's own
// layers on the CPU at one rank (engine/parallel, as `tessera train` computes it): each row's
// inputs are all its tokens but the last, its targets the same shifted by one. What the
// Hugging Face tests compare with transformers' loss over the same rows
// (tests/model/check_hf_export.py, tests/model/make_hf_fixtures.py). Header-only; link
// tessera_parallel.
#pragma once
#include <memory>
#include <vector>

#include "engine/parallel/tp_layers.h"

namespace tessera::test_support {

// `params` laid out as shape.param_table().
inline double model_token_loss(const ModelShape& shape, const std::vector<float>& params,
                               const std::vector<std::vector<int>>& rows) {
    const ParamTable& table = shape.param_table();
    std::vector<float> weights = params, grads(table.total_numel(), 0.0f);
    Batch b;
    b.batch_size = (int)rows.size();
    b.seq_len = (int)rows[0].size() - 1;
    for (const auto& r : rows)
        for (size_t t = 0; t + 1 < r.size(); ++t)
            b.inputs.push_back(r[t]), b.targets.push_back(r[t + 1]);
    const int N = b.batch_size * b.seq_len;
    ShardSpec spec{shape, TpGroup{}, Recompute::none, &layer_ops_cpu(), 1.0f / N};
    std::vector<std::unique_ptr<Layer>> layers =
        layers_create_bound(spec, weights.data(), grads.data());
    Tensor x;
    for (auto& l : layers) x = l->forward(-1, std::move(x), b);
    double loss = 0;
    for (int i = 0; i < N; ++i) loss += x.f32()[i];
    return loss / N;
}

}  // namespace tessera::test_support
