// Writing a Hugging Face folder (`tessera export --hf`), in process: the fused q/k/v and gate/up
// rows split into the tensors transformers names, any other parameter under its own name (a
// Qwen3 q_norm included), GPT-2's Conv1D weights transposed, the architecture chosen per model,
// config.json's keys; and the importers reading every value back bit for bit. The CLI round
// trip through training is tests/cli/export_test.cpp; the comparison with folders transformers
// wrote is tests/model/hf_fixture_test.cpp.
#include "engine/model/hf_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/config/hf_config.h"
#include "engine/core/error.h"
#include "engine/model/gpt_import.h"
#include "engine/model/hf_import.h"
#include "engine/parallel/tp_layers.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

RunConfig parse_model(const std::string& model) {
    return config_parse("model: " + model + "\ndata: {dataset: brown}\n", "export.yaml");
}

// Distinct values everywhere (biases and norms included), so a misplaced row shows.
std::vector<float> filled(const ParamTable& t) {
    std::vector<float> v(t.total_numel());
    params_init(t, 99, v.data());
    for (size_t i = 0; i < v.size(); ++i) v[i] += 1e-3f * (float)(i % 977);
    return v;
}

void write_folder(const fs::path& dir, const ModelConfig& m, const ParamTable& t,
                  const std::vector<float>& v, const HfTensorsOf& of) {
    hf_export_weights(t, v.data(), of, (dir / "model.safetensors").string());
    std::ofstream(dir / "config.json") << hf_config_json(m, hf_export_architecture(m)).dump(2);
}

nlohmann::json read_json(const fs::path& p) {
    std::ifstream f(p);
    return nlohmann::json::parse(f);
}

// ------------------------------------------------------------------------------------------

// Qwen2-style (q/k/v biases), grouped-query, untied: every HF tensor holds the rows of its fused
// parameter, and the folder opens as the same model with the same values.
TEST(HfExport, LlamaFamilyFolderReadsBackBitForBit) {
    const RunConfig cfg = parse_model(
        "{preset: llama-tiny, n_layer: 2, n_kv_head: 2, qkv_bias: true, tie_embeddings: false, "
        "seq_len: 32, "
        "rope_scaling: {type: llama3, factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, "
        "original_max_position_embeddings: 16}}");
    const ModelShape shape = model_shape(cfg.model, 0);
    const LlamaDims& d = shape.llama;
    const ParamTable& table = shape.param_table();
    const std::vector<float> v = filled(table);
    const test_support::TempDir dir_tmp("hf_export_llama");
    const fs::path& dir = dir_tmp.path();
    write_folder(dir, cfg.model, table, v,
                 [&](const ParamInfo& p) { return llama_hf_tensors(p, d); });

    SafetensorsFile f = SafetensorsFile::open((dir / "model.safetensors").string());
    EXPECT_EQ(f.metadata().at("format"), "pt");
    const int64_t C = d.d_model, Q = d.q_width(), K = d.kv_width(), F = d.ffn;
    EXPECT_EQ(Q, 64);
    EXPECT_EQ(K, 32);
    // 1 embedding + 2 x (2 norms, q/k/v weights and biases, o, gate, up, down) + norm + lm_head
    EXPECT_EQ(f.entries().size(), 1u + 2u * 12u + 1u + 1u);
    auto expect_rows = [&](const std::string& hf, const Shape& shape, const std::string& fused,
                           int64_t offset) {
        const auto* e = f.find(hf);
        ASSERT_NE(e, nullptr) << hf;
        EXPECT_EQ(e->shape, shape) << hf;
        EXPECT_EQ(e->dtype, DType::f32) << hf;
        const float* src = v.data() + table.at(fused).offset + offset;
        EXPECT_EQ(std::memcmp(e->data, src, e->nbytes), 0) << hf;
    };
    const std::string a = "model.layers.1.self_attn.", m = "model.layers.1.mlp.";
    expect_rows(a + "q_proj.weight", {Q, C}, a + "qkv_proj.weight", 0);
    expect_rows(a + "k_proj.weight", {K, C}, a + "qkv_proj.weight", Q * C);
    expect_rows(a + "v_proj.weight", {K, C}, a + "qkv_proj.weight", (Q + K) * C);
    expect_rows(a + "q_proj.bias", {Q}, a + "qkv_proj.bias", 0);
    expect_rows(a + "k_proj.bias", {K}, a + "qkv_proj.bias", Q);
    expect_rows(a + "v_proj.bias", {K}, a + "qkv_proj.bias", Q + K);
    expect_rows(m + "gate_proj.weight", {F, C}, m + "gate_up_proj.weight", 0);
    expect_rows(m + "up_proj.weight", {F, C}, m + "gate_up_proj.weight", F * C);
    expect_rows(a + "o_proj.weight", {C, Q}, a + "o_proj.weight", 0);
    expect_rows("lm_head.weight", {d.vocab, C}, "lm_head.weight", 0);
    EXPECT_EQ(f.find(a + "qkv_proj.weight"), nullptr);
    EXPECT_EQ(f.find(m + "gate_up_proj.weight"), nullptr);

    const nlohmann::json j = read_json(dir / "config.json");
    EXPECT_EQ(j["architectures"], nlohmann::json::array({"Qwen2ForCausalLM"}));
    EXPECT_EQ(j["model_type"], "qwen2");
    EXPECT_EQ(j["num_key_value_heads"], 2);
    EXPECT_EQ(j["head_dim"], 16);
    EXPECT_EQ(j["max_position_embeddings"], 32);
    EXPECT_EQ(j["tie_word_embeddings"], false);
    EXPECT_FALSE(j.contains("attention_bias"));  // implicit in Qwen2
    EXPECT_EQ(j["rope_scaling"]["rope_type"], "llama3");
    EXPECT_FALSE(j["rope_scaling"].contains("rope_theta"));
    EXPECT_EQ(j["rope_parameters"]["rope_theta"], 10000.0);
    EXPECT_EQ(j["rope_parameters"]["original_max_position_embeddings"], 16);

    // the folder as a user opens it: the same model, every value back
    const RunConfig back = parse_model("{init_from: " + dir.string() + "}");
    ModelConfig expect = cfg.model;
    expect.preset = "llama", expect.init_from = back.model.init_from, expect.from_folder = true;
    expect.hf_architecture = "Qwen2ForCausalLM";
    EXPECT_EQ(back.model, expect);
    std::vector<float> read(table.total_numel(), -1.0f);
    llama_load_hf_weights(dir.string(), model_shape(back.model, 0).llama, read.data());
    EXPECT_EQ(std::memcmp(read.data(), v.data(), v.size() * sizeof(float)), 0);
}

// A parameter the fused rule does not know (Qwen3's per-head q/k norms) is written under its own
// name, unchanged; with q/k norms (model.qk_norm) the model is Qwen3.
TEST(HfExport, UnfusedParameterKeepsItsNameAndQkNormIsQwen3) {
    const RunConfig cfg = parse_model("{preset: llama-tiny, n_layer: 1, qk_norm: true}");
    const LlamaDims d = model_shape(cfg.model, 0).llama;
    const ParamTable t = llama_param_table(d);
    ASSERT_NE(t.find("model.layers.0.self_attn.q_norm.weight"), nullptr);
    ASSERT_NE(t.find("model.layers.0.self_attn.k_norm.weight"), nullptr);
    const std::vector<float> v = filled(t);
    const test_support::TempDir dir_tmp("hf_export_qwen3");
    const fs::path& dir = dir_tmp.path();
    write_folder(dir, cfg.model, t, v, [&](const ParamInfo& p) { return llama_hf_tensors(p, d); });
    SafetensorsFile f = SafetensorsFile::open((dir / "model.safetensors").string());
    for (const char* n :
         {"model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight"}) {
        const auto* e = f.find(n);
        ASSERT_NE(e, nullptr) << n;
        EXPECT_EQ(e->shape, Shape{d.head_dim});
        EXPECT_EQ(std::memcmp(e->data, v.data() + t.at(n).offset, e->nbytes), 0) << n;
    }
    const nlohmann::json j = read_json(dir / "config.json");
    EXPECT_EQ(j["architectures"][0], "Qwen3ForCausalLM");
    EXPECT_EQ(j["model_type"], "qwen3");
    EXPECT_EQ(j["attention_bias"], false);
    EXPECT_EQ(j["use_sliding_window"], false);
    ModelConfig biased = cfg.model;
    biased.qkv_bias = true;
    EXPECT_THROW(hf_export_architecture(biased), InputError);
}

// A rule that leaves part of a parameter unwritten is caught before anything is written.
TEST(HfExport, TensorsMustCoverTheirParameter) {
    ParamTable t;
    t.add("w", {4, 3}, true, InitKind::zeros);
    std::vector<float> v(12, 1.0f);
    const test_support::TempDir dir_tmp("hf_export_cover");
    const fs::path& dir = dir_tmp.path();
    auto half = [](const ParamInfo&) { return std::vector<HfTensor>{{"w.top", {2, 3}, 0}}; };
    EXPECT_ANY_THROW(hf_export_weights(t, v.data(), half, (dir / "model.safetensors").string()));
    EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
}

// GPT-2: "transformer." names, Conv1D weights stored [in, out]; the importer reads them back.
TEST(HfExport, GptFolderTransposesConv1dAndReadsBack) {
    const RunConfig cfg =
        parse_model("{preset: gpt-tiny, n_layer: 2, d_model: 32, n_head: 2, seq_len: 16}");
    const ModelShape shape = model_shape(cfg.model, config_tokenizer_vocab_size(cfg.model.vocab));
    const ParamTable& table = shape.param_table();
    const std::vector<float> v = filled(table);
    const test_support::TempDir dir_tmp("hf_export_gpt");
    const fs::path& dir = dir_tmp.path();
    write_folder(dir, cfg.model, table, v,
                 [](const ParamInfo& p) { return std::vector<HfTensor>{gpt_hf_tensor(p)}; });
    SafetensorsFile f = SafetensorsFile::open((dir / "model.safetensors").string());
    EXPECT_EQ(f.entries().size(), table.entries().size());  // no lm_head: tied
    const int64_t C = 32;
    const auto* fc = f.find("transformer.h.1.mlp.c_fc.weight");
    ASSERT_NE(fc, nullptr);
    EXPECT_EQ(fc->shape, (Shape{C, 4 * C}));
    const float* tessera = v.data() + table.at("h.1.mlp.c_fc.weight").offset;  // [4C, C]
    const float* hf = reinterpret_cast<const float*>(fc->data);                // [C, 4C]
    for (int64_t i : {0, 5, 31})
        for (int64_t o : {0, 7, 127})
            EXPECT_EQ(hf[i * 4 * C + o], tessera[o * C + i]) << i << "," << o;
    const auto* bias = f.find("transformer.h.1.mlp.c_fc.bias");
    ASSERT_NE(bias, nullptr);
    EXPECT_EQ(bias->shape, Shape{4 * C});
    EXPECT_NE(f.find("transformer.wpe.weight"), nullptr);
    EXPECT_EQ(f.find("lm_head.weight"), nullptr);

    const nlohmann::json j = read_json(dir / "config.json");
    EXPECT_EQ(j["architectures"][0], "GPT2LMHeadModel");
    EXPECT_EQ(j["vocab_size"], 256);
    EXPECT_EQ(j["n_positions"], 16);
    EXPECT_EQ(j["activation_function"], "gelu_new");
    EXPECT_TRUE(j["eos_token_id"].is_null());  // bytes: no end-of-text token

    const RunConfig back = parse_model("{init_from: " + dir.string() + "}");
    EXPECT_EQ(back.model.preset, "gpt2");
    EXPECT_EQ(back.model.vocab, "bytes");
    EXPECT_EQ(back.model.n_layer, 2);
    EXPECT_EQ(back.model.seq_len, 16);
    GptModel model(shape.gpt);
    gpt_load_weights(model, f);
    EXPECT_EQ(std::memcmp(model.params().f32(), v.data(), v.size() * sizeof(float)), 0);
}

// Which class each model exports as, and the keys that keep transformers from adding what
// Tessera's model has not (an o_proj bias, a sliding window).
TEST(HfExport, ArchitecturePerModel) {
    auto arch = [](const std::string& model) {
        return hf_export_architecture(parse_model(model).model);
    };
    EXPECT_EQ(arch("{preset: llama-tiny}"), "LlamaForCausalLM");
    EXPECT_EQ(arch("{preset: llama-3.2-1b}"), "LlamaForCausalLM");
    EXPECT_EQ(arch("{preset: mistral-7b}"), "MistralForCausalLM");
    EXPECT_EQ(arch("{preset: qwen2.5-0.5b}"), "Qwen2ForCausalLM");
    EXPECT_EQ(arch("{preset: llama-tiny, qkv_bias: true}"), "Qwen2ForCausalLM");
    EXPECT_EQ(arch("{preset: gpt2}"), "GPT2LMHeadModel");
    EXPECT_THROW(arch("{preset: mlp}"), InputError);

    const RunConfig mistral = parse_model("{preset: mistral-7b}");
    const nlohmann::json j = hf_config_json(mistral.model, "MistralForCausalLM");
    EXPECT_EQ(j["model_type"], "mistral");
    EXPECT_TRUE(j["sliding_window"].is_null());
    EXPECT_EQ(j["attention_bias"], false);
    EXPECT_TRUE(j["rope_scaling"].is_null());
    EXPECT_EQ(j["rope_parameters"],
              (nlohmann::json{{"rope_type", "default"}, {"rope_theta", 10000.0}}));
    EXPECT_EQ(j["num_key_value_heads"], 8);
    EXPECT_EQ(j["head_dim"], 128);
    EXPECT_EQ(j["tie_word_embeddings"], false);
    EXPECT_EQ(j["dtype"], "float32");

    const nlohmann::json g =
        hf_config_json(parse_model("{preset: gpt2, n_layer: 2}").model, "GPT2LMHeadModel");
    EXPECT_EQ(g["vocab_size"], 50257);
    EXPECT_EQ(g["eos_token_id"], 50256);
    EXPECT_EQ(g["n_layer"], 2);
    EXPECT_EQ(g["n_embd"], 768);
}

}  // namespace
