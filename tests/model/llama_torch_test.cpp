// The Llama family's layers (engine/parallel/llama_layers.cpp with the shared embedding and head,
// on the CPU, one rank) against PyTorch: the loss of one batch and the gradient of every
// parameter, for tiny configs of each variant — tied head with default rotary frequencies;
// Qwen2-style q/k/v biases; an untied head with Llama 3's frequency scaling; linear scaling with
// as many kv heads as heads. The reference is tests/model/torch_llama_ref.py (python3-torch),
// written from the published architecture. Tolerances: the loss within rtol 1e-5; each gradient's
// largest difference within 1e-5 of its largest magnitude (the smallest ones, near zero, within
// 1e-5 absolute).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/io/safetensors.h"
#include "engine/parallel/tp_layers.h"
#include "engine/train/sampler.h"
#include "tests/support/llama_ref_config.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

struct Variant {
    std::string tag;
    LlamaDims d;
};
void PrintTo(const Variant& v, std::ostream* os) {
    *os << v.tag;
}

LlamaDims dims(int heads, int kv, bool bias, bool tied, RopeScaling rs) {
    LlamaDims d;
    d.n_layer = 2, d.n_head = heads, d.n_kv_head = kv, d.head_dim = 8, d.d_model = 32, d.ffn = 48;
    d.seq_len = 12, d.vocab = 61, d.norm_eps = 1e-5f, d.rope_theta = 500.0f;
    d.rope_scaling = rs, d.qkv_bias = bias, d.tie_embeddings = tied;
    return d;
}

class LlamaTorch : public ::testing::TestWithParam<Variant> {};

TEST_P(LlamaTorch, LossAndEveryGradientMatch) {
    const LlamaDims& d = GetParam().d;
    ModelShape shape;
    shape.family = ModelShape::Family::llama;
    shape.llama = d;
    const ParamTable table = shape.param_table();
    std::vector<float> params(table.total_numel()), grads(table.total_numel(), 0.0f);
    params_init(table, 1234, params.data());
    // the biases start at zero and the q/k norms at one: give them values so that their
    // gradients and their effect are exercised
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 0.1f);
    for (const auto& p : table.entries()) {
        const bool bias = p.name.find("bias") != std::string::npos;
        if (bias || p.name.find("_norm.weight") != std::string::npos)
            for (int64_t i = 0; i < p.numel; ++i)
                params[p.offset + i] = (bias ? 0.0f : 1.0f) + nd(rng);
    }

    const int B = 3, T = d.seq_len, N = B * T;
    Batch batch;
    batch.batch_size = B, batch.seq_len = T;
    std::uniform_int_distribution<int> tok(0, d.vocab - 1);
    for (int i = 0; i < N; ++i) batch.inputs.push_back(tok(rng)), batch.targets.push_back(tok(rng));

    // the layers of one rank holding the whole model, their parameters in the flat buffers
    ShardSpec spec{shape, TpGroup{}, Recompute::none, &layer_ops_cpu(), 1.0f / N};
    std::vector<std::unique_ptr<Layer>> layers =
        layers_create_bound(spec, params.data(), grads.data());
    Tensor x;
    for (auto& l : layers) x = l->forward(0, std::move(x), batch);
    double loss = 0;
    for (int i = 0; i < N; ++i) loss += x.f32()[i];
    loss /= N;
    Tensor dx;
    for (size_t i = layers.size(); i-- > 0;) dx = layers[i]->backward(0, std::move(dx), batch);

    // the reference
    const test_support::TempDir scratch("llama_" + GetParam().tag);
    const fs::path& dir = scratch.path();
    std::vector<TensorView> views;
    for (const auto& p : table.entries())
        views.push_back({p.name, DType::f32, p.shape, params.data() + p.offset});
    views.push_back({"inputs", DType::i32, {B, T}, batch.inputs.data()});
    views.push_back({"targets", DType::i32, {B, T}, batch.targets.data()});
    const nlohmann::json cfg = test_support::llama_ref_config(d);
    const std::string in = (dir / "in.safetensors").string(),
                      out = (dir / "out.safetensors").string();
    safetensors_write(in, views, {{"config", cfg.dump()}});
    const std::string cmd = "/usr/bin/python3 " + std::string(TESSERA_TESTS_DIR) +
                            "/model/torch_llama_ref.py " + in + " " + out;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    SafetensorsFile ref = SafetensorsFile::open(out);
    auto get = [&](const std::string& name, Shape shape) {
        std::vector<float> v(shape_numel(shape));
        ref.read_f32(name, shape, v.data());
        return v;
    };
    const double ref_loss = get("loss", {1})[0];
    EXPECT_NEAR(loss, ref_loss, 1e-5 * ref_loss);
    for (const auto& p : table.entries()) {
        const std::vector<float> g = get("grad." + p.name, p.shape);
        double md = 0, mb = 0;
        for (int64_t i = 0; i < p.numel; ++i) {
            md = std::max(md, (double)std::fabs(grads[p.offset + i] - g[i]));
            mb = std::max(mb, (double)std::fabs(g[i]));
        }
        EXPECT_LE(md, std::max(1e-5 * mb, 1e-5))
            << p.name << ": largest difference " << md << " (largest " << mb << ")";
        EXPECT_GT(mb, 0) << p.name << ": a zero reference gradient tests nothing";
    }
}

// Cached decoding (tessera sample) computes what the training forward computes: the logits of
// every position fed at once give the forward's per-token losses (which the test above holds to
// PyTorch), and feeding a prompt then one token at a time through the key/value cache gives each
// position's logits again. rtol 1e-5 of the largest magnitude.
TEST_P(LlamaTorch, CachedDecodingMatchesTheForward) {
    const LlamaDims& d = GetParam().d;
    ModelShape shape;
    shape.family = ModelShape::Family::llama;
    shape.llama = d;
    const ParamTable& table = shape.param_table();
    std::vector<float> params(table.total_numel());
    params_init(table, 99, params.data());
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 0.1f);
    for (const auto& p : table.entries())
        if (p.name.find("bias") != std::string::npos ||
            p.name.find("_norm.weight") != std::string::npos)
            for (int64_t i = 0; i < p.numel; ++i) params[p.offset + i] += nd(rng);
    const int T = d.seq_len, V = d.vocab;
    Batch batch;
    batch.batch_size = 1, batch.seq_len = T;
    std::uniform_int_distribution<int> tok(0, V - 1);
    for (int i = 0; i < T; ++i) batch.inputs.push_back(tok(rng)), batch.targets.push_back(tok(rng));

    // the training forward's per-token losses (evaluation: nothing kept)
    std::vector<float> grads(table.total_numel(), 0.0f);
    ShardSpec spec{shape, TpGroup{}, Recompute::none, &layer_ops_cpu(), 1.0f};
    std::vector<std::unique_ptr<Layer>> layers =
        layers_create_bound(spec, params.data(), grads.data());
    Tensor x;
    for (auto& l : layers) x = l->forward(-1, std::move(x), batch);
    const std::vector<float> losses(x.f32(), x.f32() + T);

    LayerDecoder dec(shape, layer_ops_cpu(), params);
    const std::vector<float> all = dec.feed(batch.inputs, 0, true);
    ASSERT_EQ(all.size(), (size_t)T * V);
    double worst = 0, scale = 0;
    for (int t = 0; t < T; ++t) {
        const float* row = all.data() + (size_t)t * V;
        const double m = *std::max_element(row, row + V);
        double sum = 0;
        for (int v = 0; v < V; ++v) sum += std::exp(row[v] - m);
        const double ce = m + std::log(sum) - row[batch.targets[t]];
        worst = std::max(worst, std::fabs(ce - losses[t]));
        scale = std::max(scale, (double)std::fabs(losses[t]));
    }
    EXPECT_LE(worst, 1e-5 * scale) << "all-rows decoding vs the forward's per-token losses";

    // a prompt of 5, then one token per call through the cache
    const int P = 5;
    std::vector<float> step = dec.feed({batch.inputs.begin(), batch.inputs.begin() + P}, 0);
    double max_abs = 0;
    for (float v : all) max_abs = std::max(max_abs, (double)std::fabs(v));
    for (int t = P - 1; t < T; ++t) {
        for (int v = 0; v < V; ++v)
            ASSERT_NEAR(step[v], all[(size_t)t * V + v], 1e-5 * max_abs)
                << "position " << t << " id " << v;
        if (t + 1 < T) step = dec.feed({batch.inputs[t + 1]}, t + 1);
    }
    EXPECT_THROW(dec.feed({1}, T), Error);  // past the cache
}

INSTANTIATE_TEST_SUITE_P(
    Variants, LlamaTorch,
    ::testing::Values(Variant{"tied_gqa", dims(4, 2, false, true, {})},
                      Variant{"qwen2_bias", dims(4, 1, true, true, {})},
                      Variant{"untied_llama3",
                              dims(4, 2, false, false, {"llama3", 8.0, 1.0, 4.0, 6})},
                      Variant{"linear_mha", dims(2, 2, false, true, {"linear", 2.0})},
                      Variant{"qwen3_qk_norm",
                              [] {
                                  LlamaDims d = dims(4, 2, false, true, {});
                                  d.qk_norm = true;
                                  return d;
                              }()}),
    [](const auto& info) { return info.param.tag; });

}  // namespace
