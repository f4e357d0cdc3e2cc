// Every parallel plan computes the single-rank training trajectory. Each plan runs through the
// real `tessera train` (launcher + one process per CPU rank, Gloo), 10 steps of a tiny GPT; the
// reference is the single-rank reference trainer (tests/support/reference_train.h: GptModel or
// MlpModel and the flat AdamW, none of the runtime's code) on the same global batch through
// gradient accumulation. `tessera train` on one rank (the runtime's 1x1x1 case) is a plan too.
// Asserted: train/loss of every step within rtol 1e-5, and the final parameters (gathered into
// the checkpoint) within 1e-5 absolute. The learning rate is small (5e-4): Adam's nearly
// sign-like update magnifies float rounding on elements whose gradient is near zero, and those
// differences grow with the learning rate (at 1e-3 the TP plans end 1.05e-5 apart). The MLP's
// plans (data-parallel, ZeRO, offload) are held to the same bounds, plus its validation loss
// (rtol 1e-5) and accuracy (equal) over the whole test set. Plans tagged epoch_ read the data in
// epoch order (data.order: epoch) against a single-rank reference that does too; every plan's
// train/epoch must equal its reference's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/config/config.h"
#include "engine/io/checkpoint.h"
#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "tests/support/commands.h"
#include "tests/support/reference_train.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

const char* kBase = R"(name: equivalence
model: {preset: gpt-tiny, n_layer: 8, n_head: 4, d_model: 32, seq_len: 16}
data: {dataset: brown}
train: {steps: 10, micro_batch: 2, grad_accum: 2, lr: 5.0e-4, min_lr: 5.0e-5, warmup_steps: 2,
        weight_decay: 0.1, grad_clip: 1.0, eval_every: 0, seed: 11}
checkpoint: {dir: ck, every: 0, keep: 1}
log: {db: runs.db, every: 1}
)";

// The MLP classifier on Fashion-MNIST under data-parallel and ZeRO plans (its layers are not
// tensor-split or pipelined); evaluated over the whole test set twice.
const char* kMlpBase = R"(name: equivalence-mlp
model: {preset: mlp, hidden: [64, 32]}
data: {dataset: fashion-mnist}
train: {steps: 10, micro_batch: 16, grad_accum: 2, lr: 5.0e-4, min_lr: 5.0e-5, warmup_steps: 2,
        weight_decay: 0.1, grad_clip: 1.0, eval_every: 5, seed: 11}
checkpoint: {dir: ck, every: 0, keep: 1}
log: {db: runs.db, every: 1}
)";

struct Outcome {
    std::vector<double> losses;                        // train/loss of steps 1..10
    std::vector<double> epochs;                        // train/epoch of steps 1..10
    std::vector<double> val_loss, val_accuracy;        // evaluations (the MLP)
    std::map<std::string, std::vector<float>> params;  // final, gathered
    std::string output;
    int exit_code = -1;
};

// this test process's folder, removed when it exits
const fs::path& work_root() {
    static const tessera::test_support::TempDir root("equiv");
    return root.path();
}

Outcome run_plan(const std::string& tag, const std::vector<std::string>& sets,
                 const char* base = kBase) {
    fs::path dir = work_root() / tag;
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "project.yaml") << base;
    Outcome o;
    test_support::CommandResult r =
        test_support::run_command(test_support::train_command(dir / "project.yaml", sets));
    o.exit_code = r.exit_code;
    o.output = std::move(r.output);
    if (o.exit_code != 0) return o;
    RunStore store = RunStore::open((dir / "runs.db").string(), true);
    auto runs = store.runs_list();
    if (runs.empty()) return o;
    for (const auto& m : store.metrics(runs.back().id, metric::train_loss))
        o.losses.push_back(m.value);
    for (const auto& m : store.metrics(runs.back().id, metric::train_epoch))
        o.epochs.push_back(m.value);
    for (const auto& m : store.metrics(runs.back().id, metric::val_loss))
        o.val_loss.push_back(m.value);
    for (const auto& m : store.metrics(runs.back().id, metric::val_accuracy))
        o.val_accuracy.push_back(m.value);
    Checkpoint ck = checkpoint_load((dir / "ck").string());
    const SafetensorsFile& f = ck.files.at("model");
    for (const auto& e : f.entries()) {
        std::vector<float> v(shape_numel(e.shape));
        f.read_f32(e.name, e.shape, v.data());
        o.params[e.name] = std::move(v);
    }
    return o;
}

// The reference trainer's outcome for `base` with --set style overrides (in this process).
Outcome reference_run(const std::string& tag, const std::vector<std::string>& sets,
                      const char* base) {
    fs::path dir = work_root() / tag;
    fs::remove_all(dir);
    fs::create_directories(dir);
    Outcome o;
    try {
        RunConfig cfg = config_parse(base, (dir / "project.yaml").string(), sets);
        test_support::ReferenceRun r = test_support::reference_train(cfg);
        o.losses = std::move(r.losses);
        o.epochs = std::move(r.epochs);
        o.val_loss = std::move(r.val_loss);
        o.val_accuracy = std::move(r.val_accuracy);
        o.params = std::move(r.params);
        o.exit_code = 0;
    } catch (const std::exception& e) {
        o.output = e.what();
        o.exit_code = 1;
    }
    return o;
}

// The single-rank reference for a global batch of `accum` micro-batches of 2 samples.
const Outcome& reference(int accum, const std::vector<std::string>& extra = {}) {
    static std::map<std::string, Outcome> cache;
    std::string key = std::to_string(accum);
    for (auto& e : extra) key += "," + e;
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    std::vector<std::string> sets{"train.grad_accum=" + std::to_string(accum)};
    sets.insert(sets.end(), extra.begin(), extra.end());
    return cache.emplace(key, reference_run("ref_" + std::to_string(cache.size()), sets, kBase))
        .first->second;
}

void expect_same_trajectory(const Outcome& ref, const Outcome& got, const std::string& plan) {
    ASSERT_EQ(ref.exit_code, 0) << "reference failed:\n" << ref.output;
    ASSERT_EQ(got.exit_code, 0) << plan << " failed:\n" << got.output;
    ASSERT_EQ(ref.losses.size(), 10u) << ref.output;
    ASSERT_EQ(got.losses.size(), 10u) << plan << "\n" << got.output;
    for (size_t i = 0; i < ref.losses.size(); ++i)
        EXPECT_NEAR(got.losses[i], ref.losses[i], 1e-5 * std::fabs(ref.losses[i]))
            << plan << " step " << i + 1;
    ASSERT_EQ(ref.epochs.size(), 10u) << ref.output;
    EXPECT_EQ(got.epochs, ref.epochs) << plan << ": train/epoch differs";
    ASSERT_EQ(got.params.size(), ref.params.size()) << plan;
    double worst = 0;
    std::string worst_name;
    for (const auto& [name, r] : ref.params) {
        const auto& g = got.params.at(name);
        ASSERT_EQ(g.size(), r.size()) << plan << " " << name;
        for (size_t i = 0; i < r.size(); ++i) {
            double d = std::fabs((double)g[i] - r[i]);
            if (d > worst) worst = d, worst_name = name;
        }
    }
    EXPECT_LE(worst, 1e-5) << plan << ": parameters differ by " << worst << " in " << worst_name;
    ASSERT_EQ(got.val_loss.size(), ref.val_loss.size()) << plan;
    for (size_t i = 0; i < ref.val_loss.size(); ++i)
        EXPECT_NEAR(got.val_loss[i], ref.val_loss[i], 1e-5 * ref.val_loss[i])
            << plan << " evaluation " << i;
    EXPECT_EQ(got.val_accuracy, ref.val_accuracy) << plan;
}

struct Plan {
    std::string tag;
    std::vector<std::string> sets;
    int dp = 1, accum = 2;
};
// gtest prints the parameter in test listings (and CTest's names): the plan's tag, not its bytes
void PrintTo(const Plan& p, std::ostream* os) {
    *os << p.tag;
}

class Equivalence : public ::testing::TestWithParam<Plan> {};

TEST_P(Equivalence, MatchesSingleRank) {
    const Plan& p = GetParam();
    std::vector<std::string> sets = p.sets, data_sets;  // data.* keys: the reference's too
    for (const auto& s : p.sets)
        if (s.rfind("data.", 0) == 0) data_sets.push_back(s);
    sets.push_back("train.grad_accum=" + std::to_string(p.accum));
    Outcome got = run_plan(p.tag, sets);
    expect_same_trajectory(reference(p.accum * p.dp, data_sets), got, p.tag);
}

std::vector<Plan> plans() {
    auto P = [](std::string tag, std::vector<std::string> s, int dp, int accum = 2) {
        return Plan{std::move(tag), std::move(s), dp, accum};
    };
    return {
        P("world1", {}, 1),  // `tessera train` on one rank: the runtime at 1x1x1
        P("world1_epoch", {"data.order=epoch"}, 1),
        P("dp2", {"parallel.dp=2"}, 2),
        P("dp4", {"parallel.dp=4"}, 4),
        P("tp2", {"parallel.tp=2"}, 1),
        P("tp4", {"parallel.tp=4"}, 1),
        P("pp2", {"parallel.pp=2"}, 1),
        P("pp4", {"parallel.pp=4"}, 1, 4),
        P("dp2_tp2", {"parallel.dp=2", "parallel.tp=2"}, 2),
        P("dp2_pp2", {"parallel.dp=2", "parallel.pp=2"}, 2),
        P("tp2_pp2", {"parallel.tp=2", "parallel.pp=2"}, 1),
        P("dp2_tp2_pp2", {"parallel.dp=2", "parallel.tp=2", "parallel.pp=2"}, 2),
        P("zero1_dp2", {"parallel.dp=2", "parallel.zero=1"}, 2),
        P("zero2_dp2", {"parallel.dp=2", "parallel.zero=2"}, 2),
        P("zero3_dp2", {"parallel.dp=2", "parallel.zero=3"}, 2),
        P("zero1_dp4", {"parallel.dp=4", "parallel.zero=1"}, 4),
        P("zero2_dp4", {"parallel.dp=4", "parallel.zero=2"}, 4),
        P("zero3_dp4", {"parallel.dp=4", "parallel.zero=3"}, 4),
        P("gpipe_pp2", {"parallel.pp=2", "parallel.schedule=gpipe"}, 1, 4),
        P("gpipe_pp4", {"parallel.pp=4", "parallel.schedule=gpipe"}, 1, 4),
        P("1f1b_pp2", {"parallel.pp=2", "parallel.schedule=1f1b"}, 1, 4),
        P("1f1b_pp4", {"parallel.pp=4", "parallel.schedule=1f1b"}, 1, 8),
        P("interleaved_pp2",
          {"parallel.pp=2", "parallel.schedule=interleaved", "parallel.virtual_stages=2"}, 1, 4),
        P("interleaved_pp4",
          {"parallel.pp=4", "parallel.schedule=interleaved", "parallel.virtual_stages=2"}, 1, 4),
        // zb-h1: each backward split into B and W; m >= pp, m < pp, with DP (ZeRO 0-2) and TP
        P("zb_h1_pp2", {"parallel.pp=2", "parallel.schedule=zb-h1"}, 1, 4),
        P("zb_h1_pp4", {"parallel.pp=4", "parallel.schedule=zb-h1"}, 1, 8),
        P("zb_h1_pp4_accum2", {"parallel.pp=4", "parallel.schedule=zb-h1"}, 1, 2),
        P("zb_h1_dp2_pp2", {"parallel.dp=2", "parallel.pp=2", "parallel.schedule=zb-h1"}, 2, 4),
        P("zb_h1_tp2_pp2", {"parallel.tp=2", "parallel.pp=2", "parallel.schedule=zb-h1"}, 1, 4),
        P("zb_h1_dp2_tp2_pp2",
          {"parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "parallel.schedule=zb-h1"}, 2),
        P("zb_h1_zero1_dp2_pp2",
          {"parallel.dp=2", "parallel.zero=1", "parallel.pp=2", "parallel.schedule=zb-h1"}, 2, 4),
        P("zb_h1_zero2_dp2_pp2",
          {"parallel.dp=2", "parallel.zero=2", "parallel.pp=2", "parallel.schedule=zb-h1"}, 2, 4),
        P("zb_h1_recompute_selective",
          {"parallel.pp=2", "parallel.schedule=zb-h1", "parallel.recompute=selective"}, 1),
        P("zb_h1_recompute_full",
          {"parallel.pp=2", "parallel.schedule=zb-h1", "parallel.recompute=full"}, 1),
        P("zb_h1_dp2_pp1", {"parallel.dp=2", "parallel.schedule=zb-h1"}, 2),
        P("recompute_none", {"parallel.dp=2", "parallel.recompute=none"}, 2),
        P("recompute_selective", {"parallel.pp=2", "parallel.recompute=selective"}, 1),
        P("recompute_full", {"parallel.tp=2", "parallel.recompute=full"}, 1),
        P("offload_activations", {"parallel.pp=2", "parallel.offload_activations=true"}, 1),
        P("offload_optimizer",
          {"parallel.dp=2", "parallel.zero=1", "parallel.offload_optimizer=true"}, 2),
        // without DP: the gradients split (ParamStore::split_grads), each stage's own
        P("offload_optimizer_tp2_pp2",
          {"parallel.tp=2", "parallel.pp=2", "parallel.offload_optimizer=true"}, 1),
        P("dp2_accum1", {"parallel.dp=2"}, 2, 1),
        P("dp2_accum4", {"parallel.dp=2"}, 2, 4),
        // epoch order: the windows of a step split over ranks and micro-batches as the
        // reference's single rank reads them through accumulation
        P("epoch_dp2", {"data.order=epoch", "parallel.dp=2"}, 2),
        P("epoch_dp4_accum1", {"data.order=epoch", "parallel.dp=4"}, 4, 1),
        P("epoch_zero2_dp2", {"data.order=epoch", "parallel.dp=2", "parallel.zero=2"}, 2),
        P("epoch_zero3_dp2", {"data.order=epoch", "parallel.dp=2", "parallel.zero=3"}, 2),
        P("epoch_tp2", {"data.order=epoch", "parallel.tp=2"}, 1),
        P("epoch_1f1b_pp2", {"data.order=epoch", "parallel.pp=2", "parallel.schedule=1f1b"}, 1, 4),
        P("epoch_dp2_pp2_accum4", {"data.order=epoch", "parallel.dp=2", "parallel.pp=2"}, 2, 4),
    };
}

INSTANTIATE_TEST_SUITE_P(Plans, Equivalence, ::testing::ValuesIn(plans()),
                         [](const auto& info) { return info.param.tag; });

class MlpEquivalence : public ::testing::TestWithParam<Plan> {};

TEST_P(MlpEquivalence, MatchesSingleRank) {
    const Plan& p = GetParam();
    static std::map<std::string, Outcome> refs;  // by the plan's data.* keys
    std::vector<std::string> ref_sets{"train.grad_accum=4"};
    for (const auto& s : p.sets)
        if (s.rfind("data.", 0) == 0) ref_sets.push_back(s);
    std::string key;
    for (const auto& s : ref_sets) key += s + ";";
    if (!refs.count(key))
        refs[key] = reference_run("mlp_ref_" + std::to_string(refs.size()), ref_sets, kMlpBase);
    const Outcome& ref = refs[key];
    ASSERT_EQ(ref.val_accuracy.size(), 3u) << ref.output;  // steps 0, 5 and 10
    std::vector<std::string> sets = p.sets;
    sets.push_back("train.grad_accum=" + std::to_string(p.accum));
    Outcome got = run_plan(p.tag, sets, kMlpBase);
    expect_same_trajectory(ref, got, p.tag);
}

INSTANTIATE_TEST_SUITE_P(
    Plans, MlpEquivalence,
    ::testing::Values(
        Plan{"mlp_world1", {}, 1, 4},  // `tessera train` on one rank
        Plan{"mlp_dp2", {"parallel.dp=2"}, 2, 2}, Plan{"mlp_dp4_accum1", {"parallel.dp=4"}, 4, 1},
        Plan{"mlp_zero1_dp2", {"parallel.dp=2", "parallel.zero=1"}, 2, 2},
        Plan{"mlp_zero2_dp2", {"parallel.dp=2", "parallel.zero=2"}, 2, 2},
        Plan{"mlp_zero3_dp2", {"parallel.dp=2", "parallel.zero=3"}, 2, 2},
        Plan{"mlp_offload",
             {"parallel.dp=2", "parallel.zero=1", "parallel.offload_optimizer=true",
              "parallel.offload_activations=true"},
             2,
             2},
        Plan{
            "mlp_epoch_zero2_dp2", {"data.order=epoch", "parallel.dp=2", "parallel.zero=2"}, 2, 2}),
    [](const auto& info) { return info.param.tag; });

// The Llama family (llama-tiny with 4 query heads over 2 key/value heads, untied head, Llama 3's
// rotary scaling): every kind of plan against its own single rank (the runtime at world 1, which
// tests/model/llama_torch_test holds to PyTorch).
const char* kLlamaBase = R"(name: equivalence-llama
model: {preset: llama-tiny, n_layer: 4, seq_len: 16, tie_embeddings: false,
        rope_scaling: {type: llama3, factor: 8, low_freq_factor: 1, high_freq_factor: 4,
                       original_max_position_embeddings: 8}}
data: {dataset: brown}
train: {steps: 10, micro_batch: 2, grad_accum: 2, lr: 5.0e-4, min_lr: 5.0e-5, warmup_steps: 2,
        weight_decay: 0.1, grad_clip: 1.0, eval_every: 5, eval_steps: 2, seed: 11}
checkpoint: {dir: ck, every: 0, keep: 1}
log: {db: runs.db, every: 1}
)";

class LlamaEquivalence : public ::testing::TestWithParam<Plan> {};

TEST_P(LlamaEquivalence, MatchesSingleRank) {
    const Plan& p = GetParam();
    // the reference: the same model (the plan's model.* keys) on one rank, the same global batch
    static std::map<std::string, Outcome> refs;
    std::vector<std::string> ref_sets{"train.grad_accum=" + std::to_string(p.accum * p.dp)};
    for (const auto& s : p.sets)
        if (s.rfind("model.", 0) == 0 || s.rfind("data.", 0) == 0) ref_sets.push_back(s);
    std::string key;
    for (const auto& s : ref_sets) key += s + ";";
    if (!refs.count(key))
        refs[key] = run_plan("llama_ref_" + std::to_string(refs.size()), ref_sets, kLlamaBase);
    std::vector<std::string> sets = p.sets;
    sets.push_back("train.grad_accum=" + std::to_string(p.accum));
    Outcome got = run_plan(p.tag, sets, kLlamaBase);
    expect_same_trajectory(refs[key], got, p.tag);
}

INSTANTIATE_TEST_SUITE_P(
    Plans, LlamaEquivalence,
    ::testing::Values(
        Plan{"llama_dp2", {"parallel.dp=2"}, 2, 2}, Plan{"llama_tp2", {"parallel.tp=2"}, 1, 2},
        Plan{"llama_pp2", {"parallel.pp=2"}, 1, 4},
        Plan{"llama_pp2_tied", {"parallel.pp=2", "model.tie_embeddings=true"}, 1, 4},
        Plan{"llama_zb_h1_pp2_tied",
             {"parallel.pp=2", "parallel.schedule=zb-h1", "model.tie_embeddings=true"},
             1,
             4},
        Plan{"llama_zb_h1_tp2_pp2",
             {"parallel.tp=2", "parallel.pp=2", "parallel.schedule=zb-h1"},
             1,
             4},
        Plan{"llama_interleaved",
             {"parallel.pp=2", "parallel.schedule=interleaved", "parallel.virtual_stages=2"},
             1,
             4},
        Plan{"llama_zero1_dp2", {"parallel.dp=2", "parallel.zero=1"}, 2, 2},
        Plan{"llama_zero2_dp2", {"parallel.dp=2", "parallel.zero=2"}, 2, 2},
        Plan{"llama_zero3_dp2", {"parallel.dp=2", "parallel.zero=3"}, 2, 2},
        Plan{"llama_dp2_tp2", {"parallel.dp=2", "parallel.tp=2"}, 2, 2},
        Plan{"llama_recompute_full", {"parallel.tp=2", "parallel.recompute=full"}, 1, 2},
        Plan{"llama_recompute_selective", {"parallel.pp=2", "parallel.recompute=selective"}, 1, 2},
        Plan{"llama_offload",
             {"parallel.dp=2", "parallel.zero=1", "parallel.offload_optimizer=true",
              "parallel.offload_activations=true"},
             2,
             2},
        // Qwen3's q/k norm: its weights' gradients summed over the TP group
        Plan{"qwen3_tp2", {"model.qk_norm=true", "parallel.tp=2"}, 1, 2},
        Plan{"qwen3_zero3_dp2_recompute",
             {"model.qk_norm=true", "parallel.dp=2", "parallel.zero=3", "parallel.recompute=full"},
             2,
             2},
        Plan{"llama_epoch_dp2", {"data.order=epoch", "parallel.dp=2"}, 2, 2},
        Plan{"llama_epoch_zero3_dp2",
             {"data.order=epoch", "parallel.dp=2", "parallel.zero=3"},
             2,
             2},
        Plan{"llama_epoch_tp2", {"data.order=epoch", "parallel.tp=2"}, 1, 2},
        Plan{"llama_epoch_1f1b_pp2", {"data.order=epoch", "parallel.pp=2"}, 1, 4}),
    [](const auto& info) { return info.param.tag; });

// A CPU rank runs its data-parallel collectives on its main thread when it waits for them
// (ZeroOptions::comm_in_place); GPU ranks, and CPU ranks under TESSERA_COMM_THREAD=1, on a comm
// thread beside it. Both ways give the same bits, under plain DP (bucketed all-reduces) and
// ZeRO-3 (gathers ahead of each layer, reduce-scatters behind it). TESSERA_COMM_THREAD forces
// either in the ranks this test starts.
TEST(CommThread, OnTheThreadAndInPlaceGiveTheSameBits) {
    struct Env {
        explicit Env(const char* v) { ::setenv("TESSERA_COMM_THREAD", v, 1); }
        ~Env() { ::unsetenv("TESSERA_COMM_THREAD"); }
    };
    for (const char* zero : {"parallel.zero=0", "parallel.zero=3"}) {
        const std::vector<std::string> sets{"parallel.dp=2", zero};
        Outcome threaded, in_place;
        {
            Env on("1");
            threaded = run_plan("comm_thread", sets);
        }
        {
            Env off("0");
            in_place = run_plan("comm_in_place", sets);
        }
        ASSERT_EQ(threaded.exit_code, 0) << threaded.output;
        ASSERT_EQ(in_place.exit_code, 0) << in_place.output;
        ASSERT_EQ(threaded.losses.size(), 10u) << threaded.output;
        EXPECT_EQ(threaded.losses, in_place.losses) << zero;
        EXPECT_EQ(threaded.params, in_place.params) << zero;
        expect_same_trajectory(reference(4), in_place, zero);
    }
}

// A checkpoint written under one plan resumes under another on the same loss curve:
// 5 steps as dp4 (zero 3), then 5 more as tp2 x pp2, against 10 single-rank steps.
TEST(Resharding, Dp4Zero3ToTp2Pp2ContinuesTheCurve) {
    const Outcome& ref = reference(4);
    Outcome first =
        run_plan("reshard", {"parallel.dp=4", "parallel.zero=3", "train.grad_accum=1",
                             "train.steps=10", "checkpoint.every=5", "checkpoint.keep=2"});
    ASSERT_EQ(first.exit_code, 0) << first.output;
    // resume from step 5 (drop the step-10 checkpoint) under another plan
    fs::path ck = work_root() / "reshard" / "ck";
    fs::remove_all(ck / "step_00000010");
    fs::remove(ck / "latest");
    auto [rc, out] = test_support::run_command(test_support::train_command(
        work_root() / "reshard" / "project.yaml",
        {"parallel.tp=2", "parallel.pp=2", "train.grad_accum=4", "checkpoint.every=5"},
        "--resume"));
    ASSERT_EQ(rc, 0) << out;
    RunStore store = RunStore::open((work_root() / "reshard" / "runs.db").string(), true);
    auto runs = store.runs_list();
    ASSERT_EQ(runs.size(), 2u);
    auto resumed = store.metrics(runs.back().id, metric::train_loss);
    ASSERT_EQ(resumed.size(), 5u) << out;
    for (size_t i = 0; i < resumed.size(); ++i) {
        EXPECT_EQ(resumed[i].step, (int64_t)(6 + i));
        EXPECT_NEAR(resumed[i].value, ref.losses[5 + i], 1e-5 * ref.losses[5 + i])
            << "step " << 6 + i;
    }
}

}  // namespace
