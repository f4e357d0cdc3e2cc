// The split backward zb-h1 runs (engine/parallel/tp_layers.h): a layer's B (input gradient) then
// W (weight gradients) must leave every gradient buffer bit for bit as its backward() does on the
// CPU, for two micro-batches whose B's both run before their W's (the schedule's deferral), with
// the head sharing the embedding's vocabulary table (pp = 1: two layers add into one buffer) and
// under each recompute policy, for GPT and the Llama family. The input gradients B returns must
// equal backward()'s too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/parallel/tp_layers.h"

using namespace tessera;

namespace {

struct Grads {
    std::vector<float> grads;
    std::vector<std::vector<float>> dinputs;  // per micro-batch and layer, as returned
};

ModelShape gpt_shape() {
    ModelShape shape;
    shape.gpt = GptDims{2, 2, 16, 8, 61};
    return shape;
}

// The Llama family: grouped KV heads, a QKV bias, tied embeddings.
ModelShape llama_shape() {
    ModelShape shape;
    shape.family = ModelShape::Family::llama;
    shape.llama.n_layer = 2, shape.llama.n_head = 4, shape.llama.n_kv_head = 2,
    shape.llama.d_model = 16;
    shape.llama.head_dim = 4, shape.llama.ffn = 24, shape.llama.seq_len = 8, shape.llama.vocab = 61;
    shape.llama.qkv_bias = true;
    return shape;
}

Grads run(const ModelShape& shape, Recompute rc, bool split) {
    const ParamTable& table = shape.param_table();
    std::vector<float> weights(table.total_numel()), grads(table.total_numel(), 0.0f);
    for (size_t i = 0; i < weights.size(); ++i)
        weights[i] = 0.05f * std::sin(0.37f * (float)i) + 0.01f;
    ShardSpec spec{shape, TpGroup{}, rc, &layer_ops_cpu(), 1.0f / 16};
    std::vector<std::unique_ptr<Layer>> layers =
        layers_create_bound(spec, weights.data(), grads.data());
    std::vector<Batch> batches(2);
    for (int m = 0; m < 2; ++m) {
        batches[m].batch_size = 2;
        batches[m].seq_len = 8;
        for (int i = 0; i < 16; ++i) {
            batches[m].inputs.push_back((i * 7 + m * 13) % 61);
            batches[m].targets.push_back((i * 11 + m * 5 + 3) % 61);
        }
    }
    for (int m = 0; m < 2; ++m) {
        Tensor x;
        for (auto& l : layers) x = l->forward(m, std::move(x), batches[m]);
    }
    Grads r;
    auto keep = [&](const Tensor& t) {
        r.dinputs.emplace_back(t.defined() ? std::vector<float>(t.f32(), t.f32() + t.numel())
                                           : std::vector<float>{});
    };
    for (int m = 0; m < 2; ++m) {
        Tensor d;
        for (size_t i = layers.size(); i-- > 0;) {
            Layer* l = layers[i].get();
            EXPECT_TRUE(l->splits_backward()) << l->name();
            d = split ? l->backward_input(m, std::move(d), batches[m])
                      : l->backward(m, std::move(d), batches[m]);
            keep(d);
        }
    }
    if (split) {
        for (size_t i = 0; i < grads.size(); ++i)
            EXPECT_EQ(grads[i], 0.0f) << "B wrote gradient element " << i;
        for (int m = 0; m < 2; ++m)
            for (size_t i = layers.size(); i-- > 0;) layers[i]->backward_weight(m, batches[m]);
    }
    r.grads = grads;
    return r;
}

}  // namespace

TEST(SplitBackward, BThenWGivesBackwardsBits) {
    for (const ModelShape& shape : {gpt_shape(), llama_shape()})
        for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
            Grads whole = run(shape, rc, false), split = run(shape, rc, true);
            ASSERT_EQ(whole.grads.size(), split.grads.size());
            double norm = 0;
            for (float g : whole.grads) norm += (double)g * g;
            EXPECT_GT(norm, 0.0);  // the comparison compares something
            EXPECT_EQ(std::memcmp(whole.grads.data(), split.grads.data(),
                                  sizeof(float) * whole.grads.size()),
                      0)
                << "recompute " << (int)rc;
            ASSERT_EQ(whole.dinputs.size(), split.dinputs.size());
            for (size_t i = 0; i < whole.dinputs.size(); ++i)
                EXPECT_EQ(whole.dinputs[i], split.dinputs[i])
                    << "input gradient " << i << ", recompute " << (int)rc;
        }
}
