// Hugging Face folders written by transformers itself (tests/model/data/hf, made by
// tests/model/make_hf_fixtures.py on the GPU machine: tiny random LlamaForCausalLM with Llama 3
// rotary scaling and a tied head, MistralForCausalLM untied and sharded over five files,
// Qwen2ForCausalLM with q/k/v biases and one kv head), opened the way a user opens them
// (model.init_from: DIR, config.json read as transformers 5.x writes it), their weights loaded
// into Tessera's layers on the CPU: the loss over the fixture's tokens within 1e-4 of
// transformers' own. Exported again (tessera export --hf), the same tensors and config keys
// transformers wrote. Also: the 4.x spelling of the rotary settings, and the errors for an
// unsupported architecture and a misshapen tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/config/config.h"
#include "engine/config/hf_config.h"
#include "engine/core/error.h"
#include "engine/io/safetensors.h"
#include "engine/model/hf_export.h"
#include "engine/model/hf_import.h"
#include "engine/parallel/tp_layers.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"
#include "tests/support/token_loss.h"

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
    std::vector<float> params(shape.param_table().total_numel());
    llama_load_hf_weights(cfg.model.init_from, shape.llama, params.data());
    return test_support::model_token_loss(shape, params, rows);
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
    std::printf("%-16s tessera %.7f transformers %.7f (%+.1e)\n", GetParam().c_str(), loss, ref,
                loss - ref);
    EXPECT_NEAR(loss, ref, 1e-4) << GetParam() << " (" << fx.at("architecture") << ")";
}

// Each tensor file of a folder (the single file, or the shards its index lists), opened.
std::vector<SafetensorsFile> folder_files(const std::string& dir) {
    std::vector<SafetensorsFile> files;
    if (!fs::exists(dir + "/model.safetensors.index.json")) {
        files.push_back(SafetensorsFile::open(dir + "/model.safetensors"));
        return files;
    }
    std::ifstream f(dir + "/model.safetensors.index.json");
    std::set<std::string> shards;
    const nlohmann::json index = nlohmann::json::parse(f);
    for (const auto& [name, file] : index.at("weight_map").items())
        shards.insert(file.get<std::string>());
    for (const auto& s : shards) files.push_back(SafetensorsFile::open(dir + "/" + s));
    return files;
}

// Imported and exported again (what `tessera export --hf` writes), the folder transformers wrote
// comes back: every tensor under its name with its shape and bytes, none added, the config keys
// that make the model equal, and the same loss.
TEST_P(HfFixture, ExportWritesWhatTransformersWrote) {
    const std::string dir = kData + GetParam();
    std::ifstream fx_file(dir + "/fixture.json");
    const nlohmann::json fx = nlohmann::json::parse(fx_file);
    const auto rows = fx.at("tokens").get<std::vector<std::vector<int>>>();
    const RunConfig cfg =
        config_parse("model: {init_from: " + dir + "}\ndata: {dataset: brown}\n", "hf.yaml");
    const ModelShape shape = model_shape(cfg.model, cfg.model.vocab_size);
    std::vector<float> params(shape.param_table().total_numel());
    llama_load_hf_weights(dir, shape.llama, params.data());
    const test_support::TempDir out_tmp(std::string("hf_export_") + GetParam());
    const fs::path& out = out_tmp.path();
    hf_export_weights(
        shape.param_table(), params.data(),
        [&](const ParamInfo& p) { return llama_hf_tensors(p, shape.llama); },
        (out / "model.safetensors").string());
    const nlohmann::json written = hf_config_json(cfg.model, hf_export_architecture(cfg.model));
    std::ofstream(out / "config.json") << written.dump(2);

    const SafetensorsFile exported = SafetensorsFile::open((out / "model.safetensors").string());
    size_t n = 0;
    for (const SafetensorsFile& f : folder_files(dir))
        for (const auto& e : f.entries()) {
            ++n;
            const auto* x = exported.find(e.name);
            ASSERT_NE(x, nullptr) << e.name;
            EXPECT_EQ(x->shape, e.shape) << e.name;
            ASSERT_EQ(e.dtype, DType::f32) << e.name;  // the fixtures are fp32: the bytes compare
            EXPECT_EQ(x->nbytes, e.nbytes) << e.name;
            EXPECT_EQ(std::memcmp(x->data, e.data, e.nbytes), 0) << e.name;
        }
    EXPECT_EQ(exported.entries().size(), n);

    std::ifstream orig_file(dir + "/config.json");
    const nlohmann::json orig = nlohmann::json::parse(orig_file);
    for (const char* key :
         {"architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
          "num_attention_heads", "num_key_value_heads", "rms_norm_eps", "vocab_size",
          "max_position_embeddings", "tie_word_embeddings", "rope_parameters", "hidden_act"})
        EXPECT_EQ(written.at(key), orig.at(key)) << key;
    for (const char* key :
         {"head_dim", "attention_bias", "mlp_bias", "sliding_window", "use_sliding_window"})
        if (orig.contains(key)) EXPECT_EQ(written.at(key), orig.at(key)) << key;

    const RunConfig back = open_folder(out.string(), (int)rows[0].size() - 1);
    const double loss = tessera_loss(back, rows), ref = fx.at("loss").get<double>();
    EXPECT_EQ(loss, tessera_loss(open_folder(dir, (int)rows[0].size() - 1), rows));
    EXPECT_NEAR(loss, ref, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Folders, HfFixture,
                         ::testing::Values("llama3_tied", "mistral_sharded", "qwen2_bias",
                                           "qwen3_qknorm"));

// transformers 4.x writes rope_theta and rope_scaling at the top level
TEST(HfConfig, ReadsTheOlderRopeSpellingAndRefusesOtherArchitectures) {
    const test_support::TempDir d_tmp("hf_v4");
    const fs::path& d = d_tmp.path();
    std::ofstream(d / "config.json")
        << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
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
        EXPECT_NE(std::string(e.what()).find("max_position_embeddings 4096"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(
        config_parse("model: {init_from: " + d.string() + ", n_layer: 3}\ndata: {dataset: brown}\n",
                     "x.yaml"),
        InputError);
    // tie_word_embeddings absent: untied, as transformers' Qwen2Config defaults it
    std::ofstream(d / "config.json")
        << R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300,
        "rms_norm_eps": 1e-6, "max_position_embeddings": 4096})";
    RunConfig q = open_folder(d.string(), 128);
    EXPECT_FALSE(q.model.tie_embeddings);
    EXPECT_TRUE(q.model.qkv_bias);
    EXPECT_EQ(q.model.n_kv_head, 4);
    // Llama's attention_bias also biases o_proj, which the block lacks: refused, not dropped
    std::ofstream(d / "config.json")
        << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300,
        "rms_norm_eps": 1e-6, "max_position_embeddings": 4096, "attention_bias": true})";
    try {
        open_folder(d.string(), 16);
        FAIL() << "attention_bias accepted for LlamaForCausalLM";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("attention_bias: true is not supported"),
                  std::string::npos)
            << e.what();
    }
    std::ofstream(d / "config.json") << R"({"architectures": ["GemmaForCausalLM"]})";
    try {
        open_folder(d.string(), 16);
        FAIL() << "Gemma accepted";
    } catch (const InputError& e) {
        const std::string w = e.what();
        EXPECT_NE(w.find("GemmaForCausalLM"), std::string::npos) << w;
        EXPECT_NE(w.find("LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM"),
                  std::string::npos)
            << w;
    }
}

// a tensor of the wrong shape is named with what was expected and found
TEST(HfConfig, MisshapenTensorIsNamed) {
    const test_support::TempDir d_tmp("hf_shape");
    const fs::path& d = d_tmp.path();
    for (const auto& e : fs::directory_iterator(kData + "llama3_tied"))
        fs::copy(e.path(), d / e.path().filename());
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
}

}  // namespace
