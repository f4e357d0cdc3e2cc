// Hugging Face folders written by transformers itself (tests/model/data/hf, made by
// tests/model/make_hf_fixtures.py on the GPU machine: tiny random LlamaForCausalLM with Llama 3
// rotary scaling and a tied head, MistralForCausalLM untied and sharded over five files,
// Qwen2ForCausalLM with q/k/v biases and one kv head), opened the way a user opens them
// (model.init_from: DIR, config.json read as transformers 5.x writes it), their weights loaded
// into Tessera's layers on the CPU: the loss over the fixture's tokens within 1e-4 of
// transformers' own. Also: the 4.x spelling of the rotary settings, and the errors for an
// unsupported architecture and a misshapen tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/model/hf_import.h"
#include "engine/parallel/tp_layers.h"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

const std::string kData = std::string(TESSERA_TESTS_DIR) + "/model/data/hf/";

RunConfig open_folder(const std::string& dir, int seq_len) {
    return config_parse("model: {init_from: " + dir + ", seq_len: " + std::to_string(seq_len) +
                            "}\ndata: {dataset: brown}\n",
                        "hf.yaml");
}

// Tessera's mean loss over rows of tokens (each row: inputs all but the last, targets shifted).
double tessera_loss(const RunConfig& cfg, const std::vector<std::vector<int>>& rows) {
    ModelShape shape = model_shape(cfg.model, cfg.model.vocab_size);
    const ParamTable& table = shape.param_table();
    std::vector<float> params(table.total_numel()), grads(table.total_numel(), 0.0f);
    llama_load_hf_weights(cfg.model.init_from, shape.llama, params.data());
    Batch b;
    b.batch_size = (int)rows.size();
    b.seq_len = (int)rows[0].size() - 1;
    for (const auto& r : rows)
        for (size_t t = 0; t + 1 < r.size(); ++t) b.inputs.push_back(r[t]), b.targets.push_back(r[t + 1]);
    const int N = b.batch_size * b.seq_len;
    ShardSpec spec{shape, TpGroup{}, Recompute::none, &layer_ops_cpu(), 1.0f / N};
    std::vector<std::unique_ptr<Layer>> layers;
    for (int i = 0; i < shape.n_layers(); ++i) {
        layers.push_back(layer_create(spec, i, layers.empty() ? nullptr : layers[0].get()));
        for (const auto& p : layers.back()->table().entries()) {
            layers.back()->param_ptr.push_back(params.data() + table.at(p.name).offset);
            layers.back()->grad_ptr.push_back(grads.data() + table.at(p.name).offset);
        }
    }
    Tensor x;
    for (auto& l : layers) x = l->forward(-1, std::move(x), b);
    double loss = 0;
    for (int i = 0; i < N; ++i) loss += x.f32()[i];
    return loss / N;
}

class HfFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFixture, LossMatchesTransformers) {
    const std::string dir = kData + GetParam();
    std::ifstream f(dir + "/fixture.json");
    ASSERT_TRUE(f) << dir;
    const nlohmann::json fx = nlohmann::json::parse(f);
    ASSERT_TRUE(fx.contains("produced_by"));
    const auto rows = fx.at("tokens").get<std::vector<std::vector<int>>>();
    RunConfig cfg = open_folder(dir, (int)rows[0].size() - 1);
    EXPECT_TRUE(cfg.model.from_folder);
    EXPECT_EQ(model_family(cfg.model.preset), "llama");
    const double loss = tessera_loss(cfg, rows), ref = fx.at("loss").get<double>();
    std::printf("%-16s tessera %.7f transformers %.7f (%+.1e)\n", GetParam().c_str(), loss, ref, loss - ref);
    EXPECT_NEAR(loss, ref, 1e-4) << GetParam() << " (" << fx.at("architecture") << ")";
}

INSTANTIATE_TEST_SUITE_P(Folders, HfFixture, ::testing::Values("llama3_tied", "mistral_sharded", "qwen2_bias", "qwen3_qknorm"));

fs::path scratch(const std::string& tag) {
    fs::path d = fs::temp_directory_path() / ("tessera_hf_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

// transformers 4.x writes rope_theta and rope_scaling at the top level
TEST(HfConfig, ReadsTheOlderRopeSpellingAndRefusesOtherArchitectures) {
    fs::path d = scratch("v4");
    std::ofstream(d / "config.json") << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 300, "rms_norm_eps": 1e-6, "max_position_embeddings": 4096, "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192}, "tie_word_embeddings": false})";
    RunConfig c = open_folder(d.string(), 128);
    EXPECT_EQ(c.model.n_layer, 2);
    EXPECT_EQ(c.model.n_kv_head, 2);
    EXPECT_EQ(c.model.head_dim, 16);
    EXPECT_EQ(c.model.rope_theta, 500000.0);
    EXPECT_EQ(c.model.rope_scaling.type, "llama3");
    EXPECT_EQ(c.model.rope_scaling.factor, 32.0);
    EXPECT_FALSE(c.model.tie_embeddings);
    EXPECT_EQ(c.model.seq_len, 128);
    // the canonical YAML keeps only the folder and what may be set beside it
    const std::string yaml = config_to_yaml(c);
    EXPECT_NE(yaml.find("init_from"), std::string::npos);
    EXPECT_EQ(yaml.find("n_layer"), std::string::npos) << yaml;
    // a longer sequence than the folder's positions, a key beside the folder, another architecture
    try {
        open_folder(d.string(), 8192);
        FAIL() << "seq_len beyond max_position_embeddings accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("max_position_embeddings 4096"), std::string::npos) << e.what();
    }
    EXPECT_THROW(config_parse("model: {init_from: " + d.string() + ", n_layer: 3}\ndata: {dataset: brown}\n", "x.yaml"),
                 InputError);
    // tie_word_embeddings absent: untied, as transformers' Qwen2Config defaults it
    std::ofstream(d / "config.json") << R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300,
        "rms_norm_eps": 1e-6, "max_position_embeddings": 4096})";
    RunConfig q = open_folder(d.string(), 128);
    EXPECT_FALSE(q.model.tie_embeddings);
    EXPECT_TRUE(q.model.qkv_bias);
    EXPECT_EQ(q.model.n_kv_head, 4);
    std::ofstream(d / "config.json") << R"({"architectures": ["GemmaForCausalLM"]})";
    try {
        open_folder(d.string(), 16);
        FAIL() << "Gemma accepted";
    } catch (const InputError& e) {
        const std::string w = e.what();
        EXPECT_NE(w.find("GemmaForCausalLM"), std::string::npos) << w;
        EXPECT_NE(w.find("LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM"), std::string::npos) << w;
    }
    fs::remove_all(d);
}

// a tensor of the wrong shape is named with what was expected and found
TEST(HfConfig, MisshapenTensorIsNamed) {
    fs::path d = scratch("shape");
    for (const auto& e : fs::directory_iterator(kData + "llama3_tied")) fs::copy(e.path(), d / e.path().filename());
    RunConfig c = open_folder(d.string(), 16);
    ModelShape shape = model_shape(c.model, c.model.vocab_size);
    shape.llama.ffn = 40;  // the folder holds 48
    std::vector<float> buf(llama_param_table(shape.llama).total_numel());
    try {
        llama_load_hf_weights(d.string(), shape.llama, buf.data());
        FAIL() << "misshapen tensor accepted";
    } catch (const InputError& e) {
        const std::string w = e.what();
        EXPECT_NE(w.find("gate_proj.weight"), std::string::npos) << w;
        EXPECT_NE(w.find("40"), std::string::npos) << w;
        EXPECT_NE(w.find("48"), std::string::npos) << w;
    }
    fs::remove_all(d);
}

}  // namespace
