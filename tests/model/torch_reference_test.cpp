// GPT, the MLP and the Llama family (the parallel runtime's layers on one CPU rank) against
// PyTorch (python3-torch, CPU, fp32, same weights): the loss and every parameter gradient of one
// batch, then 10 AdamW steps (clipping, warmup + cosine) — losses and final parameters. The
// reference is tests/model/torch_ref.py, run with /usr/bin/python3.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/core/error.h"
#include "engine/io/safetensors.h"
#include "engine/model/gpt.h"
#include "engine/model/gpt_import.h"
#include "engine/model/mlp.h"
#include "engine/optim/optimizer.h"
#include "engine/parallel/tp_layers.h"
#include "tests/support/llama_ref_config.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

struct Case {
    std::unique_ptr<Model> model;
    std::vector<Batch> batches;
    nlohmann::json hyper;
    std::string kind;
};

OptimizerConfig opt_config(const nlohmann::json& h) {
    OptimizerConfig c;
    c.lr = h["lr"];
    c.min_lr = h["min_lr"];
    c.warmup_steps = h["warmup_steps"];
    c.total_steps = h["steps"];
    c.beta1 = h["beta1"];
    c.beta2 = h["beta2"];
    c.eps = h["eps"];
    c.weight_decay = h["weight_decay"];
    c.grad_clip = h["grad_clip"];
    return c;
}

nlohmann::json base_hyper() {
    return {{"lr", 3e-3},  {"min_lr", 3e-4},      {"warmup_steps", 3},
            {"steps", 10}, {"beta1", 0.9},        {"beta2", 0.95},
            {"eps", 1e-8}, {"weight_decay", 0.1}, {"grad_clip", 1.0}};
}

// Runs torch_ref.py on the case; returns the reference outputs.
SafetensorsFile run_reference(Case& c, const fs::path& dir) {
    std::vector<TensorView> views;
    nlohmann::json names = nlohmann::json::array(), decay = nlohmann::json::array();
    for (const auto& p : c.model->param_table().entries()) {
        views.push_back({p.name, DType::f32, p.shape, c.model->params().f32() + p.offset});
        names.push_back(p.name);
        if (p.decay) decay.push_back(p.name);
    }
    for (size_t k = 0; k < c.batches.size(); ++k) {
        const Batch& b = c.batches[k];
        if (c.kind != "mlp") {
            views.push_back({"inputs." + std::to_string(k),
                             DType::i32,
                             {b.batch_size, b.seq_len},
                             b.inputs.data()});
            views.push_back({"targets." + std::to_string(k),
                             DType::i32,
                             {b.batch_size, b.seq_len},
                             b.targets.data()});
        } else {
            views.push_back({"features." + std::to_string(k),
                             DType::f32,
                             {b.batch_size, (int64_t)(b.features.size() / b.batch_size)},
                             b.features.data()});
            views.push_back(
                {"targets." + std::to_string(k), DType::i32, {b.batch_size}, b.targets.data()});
        }
    }
    fs::create_directories(dir);
    std::string in = (dir / "in.safetensors").string(), out = (dir / "out.safetensors").string();
    safetensors_write(
        in, views, {{"hyper", c.hyper.dump()}, {"params", names.dump()}, {"decay", decay.dump()}});
    std::string cmd = "/usr/bin/python3 " + std::string(TESSERA_TESTS_DIR) +
                      "/model/torch_ref.py " + c.kind + " " + in + " " + out;
    int rc = std::system(cmd.c_str());
    if (rc != 0) throw std::runtime_error("reference failed: " + cmd);
    return SafetensorsFile::open(out);
}

std::vector<float> read_all(const SafetensorsFile& f, const std::string& name) {
    const auto* e = f.find(name);
    if (!e) throw std::runtime_error("reference lacks " + name);
    std::vector<float> v(shape_numel(e->shape));
    f.read_f32(name, e->shape, v.data());
    return v;
}

// 10 batches of 3 sequences of uniform random token ids (inputs and targets), seeded.
std::vector<Batch> random_token_batches(int seq_len, int vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<Batch> batches;
    for (int k = 0; k < 10; ++k) {
        Batch b;
        b.batch_size = 3;
        b.seq_len = seq_len;
        for (int i = 0; i < b.batch_size * b.seq_len; ++i) {
            b.inputs.push_back(rng() % vocab);
            b.targets.push_back(rng() % vocab);
        }
        batches.push_back(std::move(b));
    }
    return batches;
}

// max |a - b| relative to max |b| of the tensor (an all-zero reference demands exact zeros).
double rel_max_err(const float* a, const std::vector<float>& b) {
    double md = 0, mb = 0;
    for (size_t i = 0; i < b.size(); ++i) {
        md = std::max(md, (double)std::fabs(a[i] - b[i]));
        mb = std::max(mb, (double)std::fabs(b[i]));
    }
    return mb > 0 ? md / mb : md;
}

void check_against_torch(Case& c, const std::string& tag) {
    const test_support::TempDir scratch("torch_" + tag);
    const fs::path& dir = scratch.path();
    SafetensorsFile ref = run_reference(c, dir);
    Model& m = *c.model;
    const auto& table = m.param_table();

    // one batch: loss and every gradient
    const Batch& b0 = c.batches[0];
    int64_t targets = (int64_t)b0.batch_size * m.targets_per_sample();
    m.zero_grads();
    StepResult r = m.forward_backward(b0, 1.0f / targets);
    double loss0 = r.loss_sum / r.count;
    double ref_loss0 = read_all(ref, "loss0")[0];
    EXPECT_NEAR(loss0, ref_loss0, 1e-5 * std::fabs(ref_loss0)) << tag << " loss";
    for (const auto& p : table.entries()) {
        auto g = read_all(ref, "grad." + p.name);
        EXPECT_LE(rel_max_err(m.grads().f32() + p.offset, g), 1e-5) << tag << " grad " << p.name;
    }

    // 10 AdamW steps, one batch each
    OptimizerConfig oc = opt_config(c.hyper);
    AdamW opt(table, oc);
    auto ref_losses = read_all(ref, "losses");
    for (int s = 0; s < (int)c.batches.size(); ++s) {
        m.zero_grads();
        StepResult sr = m.forward_backward(c.batches[s], 1.0f / targets);
        double loss = sr.loss_sum / sr.count;
        EXPECT_NEAR(loss, ref_losses[s], 1e-5 * std::fabs(ref_losses[s])) << tag << " step " << s;
        double norm = grad_global_norm(m.grads().f32(), table.total_numel());
        opt.step(m.params().f32(), m.grads().f32(), s, norm);
    }
    for (const auto& p : table.entries()) {
        auto f = read_all(ref, "final." + p.name);
        double md = 0;
        for (int64_t i = 0; i < p.numel; ++i)
            md = std::max(md, (double)std::fabs(m.params().f32()[p.offset + i] - f[i]));
        // Adam divides by sqrt(v): elements whose gradient is near zero amplify float rounding
        // differences, so after 10 steps of lr 3e-3 (up to 3e-2 of movement) we allow 5e-5.
        EXPECT_LE(md, 5e-5) << tag << " final param " << p.name;
    }
}

}  // namespace

TEST(TorchReference, GptLossGradientsAndTenAdamWSteps) {
    GptDims d;
    d.n_layer = 2;
    d.n_head = 4;
    d.d_model = 64;
    d.seq_len = 32;
    d.vocab = 96;
    Case c;
    c.kind = "gpt";
    c.model = std::make_unique<GptModel>(d);
    c.model->init_params(42);
    c.hyper = base_hyper();
    c.hyper["d_model"] = d.d_model;
    c.hyper["n_head"] = d.n_head;
    c.hyper["n_layer"] = d.n_layer;
    c.batches = random_token_batches(d.seq_len, d.vocab, 7);
    check_against_torch(c, "gpt");
}

// The Llama family's layers (engine/parallel/llama_layers.cpp) on one CPU rank as a Model: the
// runtime's own forward and backward over the whole model.
class LlamaLayers final : public Model {
  public:
    explicit LlamaLayers(const LlamaDims& d) {
        shape_.family = ModelShape::Family::llama;
        shape_.llama = d;
        allocate(shape_.param_table());
    }
    StepResult forward_backward(const Batch& b, float loss_scale) override {
        if (loss_scale != scale_) build(loss_scale);   // the head makes d(loss_scale · Σ losses)
        for (auto& l : layers_) ++l->weights_version;  // the optimizer moved the weights
        Tensor x;
        for (auto& l : layers_) x = l->forward(0, std::move(x), b);
        StepResult r;
        r.count = (int64_t)b.batch_size * b.seq_len;
        for (int64_t i = 0; i < r.count; ++i) r.loss_sum += x.f32()[i];
        Tensor dx;
        for (size_t i = layers_.size(); i-- > 0;) dx = layers_[i]->backward(0, std::move(dx), b);
        return r;
    }
    StepResult evaluate(const Batch&) override { throw Error("LlamaLayers: training steps only"); }
    std::vector<LayerSpec> layer_specs() const override { return shape_.layer_specs(); }
    int targets_per_sample() const override { return shape_.llama.seq_len; }
    double train_flops_per_target() const override { return 0.0; }
    std::string describe() const override { return "llama layers"; }

  private:
    void build(float loss_scale) {
        scale_ = loss_scale;
        layers_.clear();
        layers_ = layers_create_bound(
            ShardSpec{shape_, TpGroup{}, Recompute::none, &layer_ops_cpu(), loss_scale},
            params_.f32(), grads_.f32());
    }
    ModelShape shape_;
    float scale_ = 0.0f;
    std::vector<std::unique_ptr<Layer>> layers_;
};

// Grouped-query attention, Qwen3's q/k norm, Llama 3's rotary scaling and an untied head.
TEST(TorchReference, LlamaLossGradientsAndTenAdamWSteps) {
    LlamaDims d;
    d.n_layer = 2, d.n_head = 4, d.n_kv_head = 2, d.head_dim = 8, d.d_model = 32, d.ffn = 48;
    d.seq_len = 16, d.vocab = 61, d.norm_eps = 1e-5f, d.rope_theta = 500.0f;
    d.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 8};
    d.tie_embeddings = false, d.qk_norm = true;
    Case c;
    c.kind = "llama";
    c.model = std::make_unique<LlamaLayers>(d);
    c.model->init_params(5);
    c.hyper = base_hyper();
    c.hyper.update(test_support::llama_ref_config(d));
    c.batches = random_token_batches(d.seq_len, d.vocab, 13);
    check_against_torch(c, "llama");
}

TEST(TorchReference, MlpLossGradientsAndTenAdamWSteps) {
    Case c;
    c.kind = "mlp";
    c.model = std::make_unique<MlpModel>(std::vector<int>{784, 64, 32, 10});
    c.model->init_params(3);
    c.hyper = base_hyper();
    c.hyper["n_linear"] = 3;
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (int k = 0; k < 10; ++k) {
        Batch b;
        b.batch_size = 16;
        for (int i = 0; i < b.batch_size * 784; ++i) b.features.push_back(u(rng));
        for (int i = 0; i < b.batch_size; ++i) b.targets.push_back(rng() % 10);
        c.batches.push_back(std::move(b));
    }
    check_against_torch(c, "mlp");
}

// Hugging Face GPT-2 layout (transformer.* names, Conv1D weights transposed, tied lm_head,
// mask buffers) written by Python from our weights: the architecture is read back from the
// shapes and every parameter loads bit for bit.
TEST(HfImport, Gpt2LayoutLoadsExactly) {
    GptDims d;
    d.n_layer = 3;
    d.n_head = 2;
    d.d_model = 32;
    d.seq_len = 16;
    d.vocab = 50;
    Case c;
    c.kind = "hf-export";
    c.model = std::make_unique<GptModel>(d);
    c.model->init_params(5);
    c.hyper = base_hyper();
    c.hyper["n_layer"] = d.n_layer;
    c.hyper["n_head"] = d.n_head;
    const test_support::TempDir scratch("hf");
    const fs::path& dir = scratch.path();
    SafetensorsFile hf = run_reference(c, dir);
    GptDims got = gpt_dims_from_safetensors(hf);
    EXPECT_EQ(got.n_layer, d.n_layer);
    EXPECT_EQ(got.n_head, d.n_head);
    EXPECT_EQ(got.d_model, d.d_model);
    EXPECT_EQ(got.seq_len, d.seq_len);
    EXPECT_EQ(got.vocab, d.vocab);
    GptModel loaded(got);
    gpt_load_weights(loaded, hf);
    ASSERT_EQ(loaded.param_table().total_numel(), c.model->param_table().total_numel());
    EXPECT_EQ(0, std::memcmp(loaded.params().f32(), c.model->params().f32(),
                             sizeof(float) * loaded.param_table().total_numel()));
    // a model with one more layer than the file: the missing tensor is named
    GptDims bigger = d;
    bigger.n_layer = 4;
    GptModel too_big(bigger);
    try {
        gpt_load_weights(too_big, hf);
        ADD_FAILURE() << "expected an error for the missing layer";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("h.3.ln_1.weight"), std::string::npos) << e.what();
    }
}
