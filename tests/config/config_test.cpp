// Config loader tests: a rejection table (each bad config must give ONE InputError naming the
// key path, line:col and what was expected), acceptance of presets / overrides / relative paths,
// the canonical-YAML round-trip, and the `tessera check` subcommand.
#include "engine/config/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/cli/cli.h"
#include "engine/core/error.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

// A fresh directory with train.bin / val.bin token shards (contents do not matter here).
class ConfigTest : public ::testing::Test {
  protected:
    void SetUp() override {
        touch("train.bin");
        touch("val.bin");
    }

    void touch(const std::string& name) { std::ofstream(dir_ / name) << "x"; }
    std::string write(const std::string& name, const std::string& text) {
        fs::path p = dir_ / name;
        fs::create_directories(p.parent_path());
        std::ofstream(p, std::ios::binary) << text;
        return p.string();
    }
    // Loads `text` from a file and returns the error message ("" if it loaded).
    std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
        std::string path = write("project.yaml", text);
        try {
            config_load(path, overrides);
        } catch (const InputError& e) {
            EXPECT_EQ(e.exit_code(), 2);
            return e.what();
        }
        return "";
    }
    test_support::TempDir scratch_{"config"};
    fs::path dir_ = scratch_.path();
};

const char* kData = "data: {train: train.bin, val: val.bin}\n";

// ----------------------------------------------------------------------------
// rejection table

struct BadCase {
    const char* label;
    std::string yaml;
    const char* where;   // "LINE:COL" after the file name
    const char* key;     // the key path in the message
    const char* phrase;  // a piece of the expected/found text
};

std::vector<BadCase> bad_cases() {
    std::string d = kData;
    return {
        {"unknown top key", "name: a\nmodle:\n  preset: gpt2\n" + d, "2:1", "modle",
         "did you mean 'model'?"},
        {"unknown nested key", d + "train:\n  stpes: 5\n", "3:3", "train.stpes",
         "did you mean 'steps'?"},
        {"unknown key, nothing close", d + "train:\n  banana: 5\n", "3:3", "train.banana",
         "found unknown key 'banana'"},
        {"duplicate key", d + "train:\n  steps: 5\n  lr: 0.1\n  steps: 6\n", "5:3", "train.steps",
         "again (first at line 3, column 3)"},
        {"duplicate section", d + "name: a\nname: b\n", "3:1", "name", "expected each key once"},
        {"word for integer", d + "train:\n  steps: ten\n", "3:10", "train.steps",
         "expected an integer >= 1, found 'ten'"},
        {"list for number", d + "train:\n  lr: [1]\n", "3:7", "train.lr", "found a sequence"},
        {"map for scalar", d + "train:\n  steps: {a: 1}\n", "3:10", "train.steps", "found a map"},
        {"quoted number", d + "train:\n  steps: \"5\"\n", "3:10", "train.steps",
         "found the quoted string \"5\""},
        {"scalar for section", d + "model: 5\n", "2:8", "model",
         "expected a map of keys, found '5'"},
        {"steps zero", d + "train:\n  steps: 0\n", "3:10", "train.steps", "found 0"},
        {"lr zero", d + "train:\n  lr: 0\n", "3:7", "train.lr", "expected a number > 0"},
        {"lr nan", d + "train:\n  lr: .nan\n", "3:7", "train.lr", "found '.nan'"},
        {"negative weight decay", d + "train:\n  weight_decay: -0.1\n", "3:17",
         "train.weight_decay", "expected a number >= 0"},
        {"beta2 one", d + "train:\n  beta2: 1.0\n", "3:10", "train.beta2", "< 1, found 1.0"},
        {"micro_batch zero", d + "train:\n  micro_batch: 0\n", "3:16", "train.micro_batch",
         "expected an integer in [1, 1048576]"},
        {"min_lr above lr", "train:\n  lr: 0.001\n  min_lr: 0.01\n" + d, "3:11", "train.min_lr",
         "min_lr <= lr"},
        {"bad bool", d + "parallel:\n  offload_optimizer: maybe\n", "3:22",
         "parallel.offload_optimizer", "expected true or false"},
        {"zero out of range", d + "parallel:\n  zero: 4\n", "3:9", "parallel.zero",
         "expected an integer in [0, 3], found 4"},
        {"device enum", d + "runtime:\n  device: gpu\n", "3:11", "runtime.device",
         "expected one of cpu|cuda, found 'gpu' (did you mean 'cpu'?)"},
        {"preset enum", "model:\n  preset: gpt3\n" + d, "2:11", "model.preset",
         "did you mean 'gpt2'?"},
        {"vocab enum", "model:\n  vocab: utf8\n" + d, "2:10", "model.vocab",
         "bytes or gpt2 for a GPT preset"},
        {"schedule enum", d + "parallel:\n  schedule: zigzag\n", "3:13", "parallel.schedule",
         "one of gpipe|1f1b|interleaved|zb-h1"},
        {"dataset enum", "data:\n  dataset: mnist\n", "2:12", "data.dataset",
         "one of brown|fashion-mnist"},
        {"order enum", "data:\n  dataset: brown\n  order: epochs\n", "3:10", "data.order",
         "expected one of random|epoch, found 'epochs' (did you mean 'epoch'?)"},
        {"order not a string", "data:\n  dataset: brown\n  order: [epoch]\n", "3:10", "data.order",
         "found a sequence"},
        {"d_model vs n_head", "model:\n  d_model: 100\n  n_head: 3\n" + d, "2:12", "model.d_model",
         "divisible by n_head (3)"},
        {"tp vs n_head", d + "parallel:\n  tp: 3\n", "3:7", "parallel.tp",
         "tp dividing model.n_head (4)"},
        {"pp above n_layer", d + "parallel:\n  pp: 8\n", "3:7", "parallel.pp",
         "pp at most model.n_layer (4)"},
        {"stages count", d + "parallel:\n  pp: 2\n  stages: [4]\n", "4:11", "parallel.stages",
         "pp x virtual_stages = 2 entries, found 1 entries"},
        {"stages sum", d + "parallel:\n  pp: 2\n  stages: [2, 3]\n", "4:11", "parallel.stages",
         "summing to model.n_layer (4), found sum 5"},
        {"stage of zero layers", d + "parallel:\n  pp: 2\n  stages: [4, 0]\n", "4:15",
         "parallel.stages[1]", "expected an integer in [1, "},
        {"virtual stages without interleaved", d + "parallel:\n  pp: 2\n  virtual_stages: 2\n",
         "4:19", "parallel.virtual_stages", "unless schedule is interleaved"},
        {"interleaved without virtual stages", d + "parallel:\n  pp: 2\n  schedule: interleaved\n",
         "4:13", "parallel.schedule", "virtual_stages >= 2"},
        {"interleaved indivisible",
         "model: {n_layer: 6}\n" + d +
             "parallel:\n  pp: 2\n  schedule: interleaved\n  virtual_stages: 2\n",
         "6:19", "parallel.virtual_stages", "divisible by pp x virtual_stages (4)"},
        {"recompute length", d + "parallel:\n  pp: 2\n  recompute: [none, full, full]\n", "4:14",
         "parallel.recompute", "one value or pp (2) values, found 3 values"},
        {"recompute enum", d + "parallel:\n  recompute: [none, partial]\n", "3:21",
         "parallel.recompute[1]", "one of none|selective|full"},
        {"zero 3 with pp", d + "parallel:\n  pp: 2\n  zero: 3\n", "4:9", "parallel.zero", "ZeRO-3"},
        {"zb-h1 with virtual stages",
         d + "parallel:\n  pp: 2\n  schedule: zb-h1\n  virtual_stages: 2\n", "5:19",
         "parallel.virtual_stages", "virtual_stages 1 unless schedule is interleaved"},
        {"zb-h1 with zero 3", d + "parallel:\n  schedule: zb-h1\n  zero: 3\n", "3:13",
         "parallel.schedule", "zero <= 2 with schedule zb-h1, found zero 3"},
        {"zb-h1 with offloaded activations",
         d + "parallel:\n  pp: 2\n  schedule: zb-h1\n  offload_activations: true\n", "4:13",
         "parallel.schedule", "offload_activations false with schedule zb-h1"},
        {"mlp with tp", "model: {preset: mlp}\ndata: {dataset: fashion-mnist}\nparallel: {tp: 2}\n",
         "3:16", "parallel.tp", "tp 1 with preset mlp"},
        {"mlp on cuda",
         "model: {preset: mlp}\ndata: {dataset: fashion-mnist}\nruntime: {device: cuda}\n", "3:19",
         "runtime.device", "device cpu with preset mlp"},
        {"mlp with recompute",
         "model: {preset: mlp}\ndata: {dataset: fashion-mnist}\nparallel: {dp: 2, recompute: "
         "[full]}\n",
         "3:30", "parallel.recompute", "recompute none with preset mlp"},
        {"mlp with n_layer", "model: {preset: mlp, n_layer: 4}\ndata: {dataset: fashion-mnist}\n",
         "1:31", "model.n_layer", "no n_layer with preset mlp"},
        {"hidden with gpt", "model: {hidden: [64]}\n" + d, "1:17", "model.hidden",
         "hidden is for preset mlp"},
        {"data both", "data:\n  dataset: brown\n  train: train.bin\n", "3:10", "data.train",
         "not both"},
        {"data neither", "name: x\ndata: {}\n", "2:7", "data", "found neither"},
        {"no data section", "name: x\n", "1:1", "data", "expected a data section"},
        {"val without train", "data:\n  val: val.bin\n", "2:8", "data.val", "data.train alongside"},
        {"missing shard", "data:\n  train: nope.bin\n", "2:10", "data.train", "no file at"},
        {"fashion-mnist with gpt", "data: {dataset: fashion-mnist}\n", "1:17", "data.dataset",
         "fashion-mnist is for preset mlp"},
        {"brown with mlp", "model: {preset: mlp}\ndata: {dataset: brown}\n", "2:17", "data.dataset",
         "brown is text for GPT presets"},
        {"bf16 on cpu", d + "runtime:\n  precision: bf16\n", "3:14", "runtime.precision",
         "bf16 needs device cuda"},
        {"fp8 on cpu", d + "runtime:\n  precision: fp8\n", "3:14", "runtime.precision",
         "fp8 needs device cuda"},
        {"unknown precision", d + "runtime:\n  precision: fp16\n", "3:14", "runtime.precision",
         "fp8"},
        {"keep zero", d + "checkpoint:\n  keep: 0\n", "3:9", "checkpoint.keep", "found 0"},
        {"empty log db", d + "log:\n  db: \"\"\n", "3:7", "log.db", "a non-empty string"},
        {"empty file", "", "1:1", "(document)", "found an empty document"},
        {"comment-only file", "# nothing\n", "1:1", "(document)", "found an empty document"},
        {"top-level list", "- a\n- b\n", "1:1", "(document)", "found a sequence"},
        {"syntax error", d + "train: [1, 2\n", "3:1", "(document)", "expected valid YAML"},
        {"alias", "data: &d {dataset: brown}\nname: *d\n", "2:7", "(document)", "aliases"},
        {"two documents", d + "---\nname: b\n", "2:1", "(document)", "found a second one"},
        {"deep flow nesting", "name: " + std::string(10000, '[') + std::string(10000, ']'), "1:70",
         "(document)", "nesting at most 64 levels deep"},
    };
}

TEST_F(ConfigTest, RejectionTable) {
    auto cases = bad_cases();
    ASSERT_GE(cases.size(), 20u);
    for (const auto& c : cases) {
        SCOPED_TRACE(c.label);
        std::string err = error_of(c.yaml);
        std::string file = (dir_ / "project.yaml").string();
        EXPECT_EQ(err.rfind(file + ":" + c.where + ": " + c.key + ": expected ", 0), 0u) << err;
        EXPECT_NE(err.find(c.phrase), std::string::npos) << err;
    }
}

TEST_F(ConfigTest, DeepUnclosedNestingRejected) {
    std::string err = error_of("name: " + std::string(10000, '['));
    EXPECT_NE(err.find("(document): expected nesting at most 64 levels deep"), std::string::npos)
        << err;
    err = error_of(std::string(kData), {"name=" + std::string(10000, '{')});
    EXPECT_NE(err.find("--set name={{{"), std::string::npos) << err;
    EXPECT_NE(err.find("expected nesting at most 64 levels deep"), std::string::npos) << err;
}

TEST_F(ConfigTest, BinaryGarbageGivesOneReadableError) {
    std::string junk;
    uint32_t x = 12345;
    for (int i = 0; i < 200000; ++i) junk += (char)((x = x * 1664525u + 1013904223u) >> 24);
    std::string err = error_of(junk);
    ASSERT_FALSE(err.empty());
    for (char c : err) EXPECT_TRUE((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f) << err;
}

TEST_F(ConfigTest, DeepBlockNestingRejected) {
    std::string text;
    for (int i = 0; i < 200; ++i) text += std::string(2 * i, ' ') + "k:\n";
    std::string err = error_of(text);
    EXPECT_NE(err.find("nesting at most 64 levels deep"), std::string::npos) << err;
}

TEST_F(ConfigTest, MissingFileAndDirectory) {
    try {
        config_load((dir_ / "absent.yaml").string());
        FAIL() << "loaded a missing file";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(
                      "absent.yaml: (file): expected a config file, found no such file"),
                  std::string::npos);
    }
    EXPECT_THROW(config_load(dir_.string()), InputError);
}

// ----------------------------------------------------------------------------
// overrides

TEST_F(ConfigTest, OverridesApplyBeforeValidation) {
    std::string path =
        write("project.yaml", std::string("name: base\n") + kData + "train:\n  steps: 100\n");
    RunConfig c = config_load(path, {"train.steps=5", "parallel.pp=2", "parallel.stages=[1,3]",
                                     "name=foo", "runtime={device: cpu}"});
    EXPECT_EQ(c.train.steps, 5);
    EXPECT_EQ(c.parallel.pp, 2);
    EXPECT_EQ(c.parallel.stages, (std::vector<int>{1, 3}));
    EXPECT_EQ(c.name, "foo");
    // source_text is what ran: it parses back to the same config.
    EXPECT_NE(c.source_text.find("foo"), std::string::npos);
    RunConfig again = config_parse(c.source_text, path);
    EXPECT_EQ(again.train, c.train);
    EXPECT_EQ(again.parallel, c.parallel);
    EXPECT_EQ(again.name, "foo");
}

TEST_F(ConfigTest, OverrideErrorsNameTheOverride) {
    std::string text = std::string(kData);
    EXPECT_EQ(error_of(text, {"train.steps=abc"}),
              "--set train.steps=abc: train.steps: expected an integer >= 1, found 'abc'");
    std::string err = error_of(text, {"train.step=5"});
    EXPECT_EQ(
        err.rfind(
            "--set train.step=5: train.step: expected a known key of train (did you mean 'steps'?)",
            0),
        0u)
        << err;
    err = error_of(text, {"parralel.tp=2"});
    EXPECT_NE(err.find("did you mean 'parallel'?"), std::string::npos) << err;
    err = error_of(text, {"parallel.tp=3"});  // cross-field rule blamed on the override
    EXPECT_EQ(err.rfind("--set parallel.tp=3: parallel.tp: expected tp dividing", 0), 0u) << err;
    err = error_of(text, {"parallel.stages=[2,"});
    EXPECT_EQ(err.rfind("--set parallel.stages=[2,: parallel.stages: expected valid YAML", 0), 0u)
        << err;
    err = error_of(text, {"train.steps"});
    EXPECT_NE(err.find("expected key.path=value"), std::string::npos) << err;
    err = error_of(text, {"train.steps.x=1"});
    EXPECT_NE(err.find("at most two deep"), std::string::npos) << err;
    err = error_of(text + "train: 5\n", {"train.steps=1"});
    EXPECT_NE(err.find(":2:8: train: expected a map of keys (to apply --set train.steps=1)"),
              std::string::npos)
        << err;
}

// ----------------------------------------------------------------------------
// acceptance

TEST_F(ConfigTest, DefaultsAndTinyPreset) {
    std::string text = std::string("name: quickstart\n") + kData;
    RunConfig c = config_load(write("project.yaml", text));
    EXPECT_EQ(c.name, "quickstart");
    EXPECT_EQ(c.model.preset, "gpt-tiny");
    EXPECT_EQ(c.model.n_layer, 4);
    EXPECT_EQ(c.model.n_head, 4);
    EXPECT_EQ(c.model.d_model, 128);
    EXPECT_EQ(c.model.seq_len, 128);
    EXPECT_EQ(c.model.vocab, "bytes");
    EXPECT_EQ(c.parallel.recompute, (std::vector<std::string>{"none"}));
    EXPECT_EQ(c.train.steps, 100);
    EXPECT_EQ(c.data.order, "random");
    // the writer leaves the default order out (an existing project's YAML stays as it was) and
    // writes the other one
    EXPECT_EQ(config_to_yaml(c).find("order"), std::string::npos);
    c.data.order = "epoch";
    EXPECT_NE(config_to_yaml(c).find("order: epoch"), std::string::npos) << config_to_yaml(c);
    c.data.order = "random";
    EXPECT_EQ(c.source_text, text);  // no overrides: the file's exact text, comments included
    EXPECT_EQ(fs::path(c.base_dir), fs::path(dir_.string()).lexically_normal());
}

TEST_F(ConfigTest, PresetsResolveAndExplicitKeysWin) {
    struct P {
        const char* preset;
        int n_layer, n_head, d_model, seq_len;
        const char* vocab;
    };
    for (P p :
         {P{"gpt2", 12, 12, 768, 1024, "gpt2"}, P{"gpt2-medium", 24, 16, 1024, 1024, "gpt2"},
          P{"gpt2-large", 36, 20, 1280, 1024, "gpt2"}, P{"gpt2-xl", 48, 25, 1600, 1024, "gpt2"}}) {
        SCOPED_TRACE(p.preset);
        RunConfig c = config_load(
            write("p.yaml", std::string("model: {preset: ") + p.preset + "}\n" + kData));
        EXPECT_EQ(c.model.n_layer, p.n_layer);
        EXPECT_EQ(c.model.n_head, p.n_head);
        EXPECT_EQ(c.model.d_model, p.d_model);
        EXPECT_EQ(c.model.seq_len, p.seq_len);
        EXPECT_EQ(c.model.vocab, p.vocab);
    }
    RunConfig c = config_load(write(
        "p.yaml",
        std::string("model: {preset: gpt2, n_layer: 2, seq_len: 64, vocab: bytes}\n") + kData));
    EXPECT_EQ(c.model.n_layer, 2);
    EXPECT_EQ(c.model.seq_len, 64);
    EXPECT_EQ(c.model.n_head, 12);
    EXPECT_EQ(c.model.vocab, "bytes");

    RunConfig m =
        config_load(write("m.yaml", "model: {preset: mlp}\ndata: {dataset: fashion-mnist}\n"));
    EXPECT_EQ(m.model.hidden, (std::vector<int>{256}));
    EXPECT_EQ(m.model.n_layer, 0);
}

TEST_F(ConfigTest, EveryPresetBelongsToOneSeriesInTableOrder) {
    // the studio's family picker lists these, in this order, from the preset table alone
    std::vector<std::string> series;
    for (const auto& p : config_preset_names()) {
        const std::string s = config_preset_series(p);
        EXPECT_FALSE(s.empty()) << p;
        if (std::find(series.begin(), series.end(), s) == series.end()) series.push_back(s);
    }
    EXPECT_EQ(series, (std::vector<std::string>{"GPT-2", "Llama 3", "SmolLM", "Qwen2.5", "Qwen3",
                                                "TinyLlama", "Mistral", "MLP"}));
    EXPECT_EQ(config_preset_series("gpt2-xl"), "GPT-2");
    EXPECT_EQ(config_preset_series("smollm2-360m"), "SmolLM");
    EXPECT_EQ(config_preset_series("qwen2.5-7b"), "Qwen2.5");
    EXPECT_EQ(config_preset_series("llama-3.1-8b"), "Llama 3");
    EXPECT_EQ(model_family("mistral-7b"),
              "llama");  // the series names the line, not the architecture
}

TEST_F(ConfigTest, ParallelLayouts) {
    std::string text = std::string("model: {n_layer: 8}\n") + kData +
                       "parallel:\n  dp: 2\n  tp: 2\n  pp: 2\n  zero: 2\n  schedule: interleaved\n"
                       "  virtual_stages: 2\n  recompute: [selective, full]\n"
                       "  offload_activations: true\n";
    RunConfig c = config_load(write("project.yaml", text));
    EXPECT_EQ(c.parallel.dp * c.parallel.tp * c.parallel.pp, 8);
    EXPECT_EQ(c.parallel.schedule, "interleaved");
    EXPECT_EQ(c.parallel.recompute, (std::vector<std::string>{"selective", "full"}));
    EXPECT_TRUE(c.parallel.offload_activations);
    // ZeRO with dp 1 is allowed (a no-op).
    EXPECT_NO_THROW(config_load(write("z.yaml", std::string(kData) + "parallel: {zero: 3}\n")));
}

TEST_F(ConfigTest, RelativePathsResolveAgainstConfigDir) {
    write("sub/shards/a.bin", "x");
    std::string path =
        write("sub/project.yaml", "data: {train: shards/a.bin}\ncheckpoint: {dir: ckpt}\n");
    RunConfig c = config_load(path);
    EXPECT_EQ(c.data.train, "shards/a.bin");  // kept as written
    EXPECT_EQ(config_resolve_path(c, c.data.train),
              (dir_ / "sub/shards/a.bin").lexically_normal().string());
    EXPECT_EQ(config_resolve_path(c, c.checkpoint.dir),
              (dir_ / "sub/ckpt").lexically_normal().string());
    EXPECT_EQ(config_resolve_path(c, "/abs/x.db"), "/abs/x.db");
    EXPECT_EQ(config_resolve_path(c, ""), "");
    // The shard is looked up next to the config, not in the working directory.
    std::string err = error_of("data: {train: shards/a.bin}\n");
    EXPECT_NE(err.find("no file at " + (dir_ / "shards/a.bin").string()), std::string::npos) << err;
}

// Files a config names need to exist to train, not to plan, open or read back a stored run:
// ConfigFiles::may_be_missing parses the same config (every other rule still applies), and
// resolves its paths the same way.
TEST_F(ConfigTest, FilesMayBeMissingWhereNothingReadsThem) {
    const std::string text =
        "model: {preset: llama-tiny, vocab: tok/tokenizer.json}\n"
        "data: {train: data/train.bin, val: data/val.bin}\n";
    const std::string path = write("p.yaml", text);
    std::string err;
    try {
        config_load(path);
    } catch (const InputError& e) {
        err = e.what();
    }
    EXPECT_NE(err.find("data.train: expected an existing file"), std::string::npos) << err;
    const RunConfig c = config_load(path, {}, ConfigFiles::may_be_missing);
    EXPECT_EQ(config_resolve_path(c, c.data.train),
              (dir_ / "data/train.bin").lexically_normal().string());
    EXPECT_EQ(config_tokenizer(c), (dir_ / "tok/tokenizer.json").lexically_normal().string());
    const RunConfig stored =
        config_parse(text, "run #1", {}, dir_.string(), ConfigFiles::may_be_missing);
    EXPECT_EQ(config_resolve_path(stored, stored.data.val),
              (dir_ / "data/val.bin").lexically_normal().string());
    // the other rules are not relaxed
    err.clear();
    try {
        config_parse(text + "train: {min_lr: 1.0, lr: 0.1}\n", "run #1", {}, dir_.string(),
                     ConfigFiles::may_be_missing);
    } catch (const InputError& e) {
        err = e.what();
    }
    EXPECT_NE(err.find("min_lr"), std::string::npos) << err;
}

TEST_F(ConfigTest, CanonicalYamlRoundTrips) {
    std::vector<std::string> texts = {
        std::string(kData),
        "name: full\nmodel: {preset: gpt2, n_layer: 4, seq_len: 256}\n" + std::string(kData) +
            "train: {steps: 7, lr: 3.0e-4, min_lr: 1e-5, weight_decay: 0.01, grad_clip: 0.5,"
            " seed: 18446744073709551615, beta2: 0.999, eps: 1e-6, threads: 3, restarts: 2}\n"
            "runtime: {device: cuda, precision: bf16}\n"
            "parallel: {dp: 2, tp: 4, pp: 2, stages: [1, 3], recompute: [full, none],"
            " offload_optimizer: true}\n"
            "checkpoint: {dir: ckpt, every: 10, keep: 2}\nlog: {db: my.db, every: 5}\n",
        "name: mlp\nmodel: {preset: mlp, hidden: [64, 32]}\ndata: {dataset: fashion-mnist}\n",
        "name: epoch\ndata: {train: train.bin, order: epoch}\n",
    };
    for (const auto& text : texts) {
        RunConfig a = config_load(write("a.yaml", text));
        std::string yaml = config_to_yaml(a);
        RunConfig b = config_parse(yaml, (dir_ / "b.yaml").string());
        SCOPED_TRACE(yaml);
        b.source_path = a.source_path;
        b.source_text = a.source_text;
        EXPECT_EQ(a, b);
        EXPECT_EQ(config_to_yaml(b), yaml);  // canonical: a fixed point
    }
}

// ----------------------------------------------------------------------------
// tessera check

TEST_F(ConfigTest, CheckCommand) {
    std::string path = write("project.yaml", std::string(kData));
    testing::internal::CaptureStdout();
    int rc = cli_check({path});
    std::string out = testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(out, "ok: " + path +
                       " (model gpt-tiny: 4 layers, d_model 128; world 1 = dp1 x tp1 x pp1)\n");

    testing::internal::CaptureStdout();
    rc = cli_check({path, "--set", "parallel.dp=2", "--set=model.preset=gpt2"});
    out = testing::internal::GetCapturedStdout();
    EXPECT_EQ(out,
              "ok: " + path + " (model gpt2: 12 layers, d_model 768; world 2 = dp2 x tp1 x pp1)\n");

    try {
        cli_check({path, "--set", "train.steps=abc"});
        FAIL() << "accepted a bad override";
    } catch (const InputError& e) {
        EXPECT_EQ(e.exit_code(), 2);
        EXPECT_NE(std::string(e.what()).find("--set train.steps=abc"), std::string::npos);
    }
    EXPECT_THROW(cli_check({}), InputError);
    EXPECT_THROW(cli_check({path, "--bogus"}), InputError);
    EXPECT_THROW(cli_check({path, "--set"}), InputError);

    testing::internal::CaptureStdout();
    EXPECT_EQ(cli_check({"--help"}), 0);
    EXPECT_NE(testing::internal::GetCapturedStdout().find("usage: tessera check CONFIG"),
              std::string::npos);
}

}  // namespace

// ----------------------------------------------------------------------------
// model.vocab: built-in tokenizers, a tokenizer.json, a Hugging Face folder's own
TEST_F(ConfigTest, TokenizerJsonPathsResolveAndAreChecked) {
    write("tok/tokenizer.json", "{}");
    RunConfig c = config_load(
        write("p.yaml", std::string("model: {preset: llama-tiny, vocab: tok}\n") + kData));
    EXPECT_EQ(c.model.vocab, "tok");  // kept as written
    EXPECT_EQ(config_tokenizer(c), (dir_ / "tok").lexically_normal().string());
    c = config_load(write(
        "q.yaml", std::string("model: {preset: llama-tiny, vocab: tok/tokenizer.json}\n") + kData));
    EXPECT_EQ(config_tokenizer(c), (dir_ / "tok/tokenizer.json").lexically_normal().string());
    EXPECT_EQ(config_tokenizer(config_load(
                  write("r.yaml", std::string("model: {preset: llama-tiny}\n") + kData))),
              "bytes");

    std::string err =
        error_of(std::string("model: {preset: llama-tiny, vocab: nowhere.json}\n") + kData);
    EXPECT_NE(err.find("model.vocab"), std::string::npos) << err;
    EXPECT_NE(err.find("no file at " + (dir_ / "nowhere.json").string()), std::string::npos) << err;
    write("empty/readme.txt", "x");
    err = error_of(std::string("model: {preset: llama-tiny, vocab: empty}\n") + kData);
    EXPECT_NE(err.find("no tokenizer.json in " + (dir_ / "empty").string()), std::string::npos)
        << err;
    err = error_of(std::string("model: {preset: gpt-tiny, vocab: tok}\n") + kData);
    EXPECT_NE(err.find("bytes or gpt2 for a GPT preset"), std::string::npos) << err;
    // names of the data cache's tokenizers stay names
    c = config_load(
        write("s.yaml", std::string("model: {preset: llama-tiny, vocab: qwen3}\n") + kData));
    EXPECT_EQ(config_tokenizer(c), "qwen3");
    err = error_of(std::string("model: {preset: gpt-tiny, vocab: llama3}\n") + kData);
    EXPECT_NE(err.find("bytes or gpt2 for a GPT preset"), std::string::npos) << err;
}

TEST_F(ConfigTest, HuggingFaceFolderUsesItsOwnTokenizer) {
    const std::string src =
        std::string(TESSERA_TESTS_DIR) + "/model/data/hf/qwen3_qknorm/config.json";
    fs::create_directories(dir_ / "qwen");
    fs::copy_file(src, dir_ / "qwen/config.json");
    // no tokenizer in the folder: bytes, as before
    RunConfig c = config_load(write("p.yaml", std::string("model: {init_from: qwen}\n") + kData));
    EXPECT_EQ(c.model.vocab, "bytes");
    write("qwen/tokenizer.json", "{}");
    c = config_load(write("p.yaml", std::string("model: {init_from: qwen}\n") + kData));
    EXPECT_EQ(c.model.vocab, "qwen");
    EXPECT_EQ(config_tokenizer(c), (dir_ / "qwen").lexically_normal().string());
    // an explicit tokenizer wins
    c = config_load(
        write("p.yaml", std::string("model: {init_from: qwen, vocab: bytes}\n") + kData));
    EXPECT_EQ(c.model.vocab, "bytes");
}
