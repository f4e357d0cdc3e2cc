// The estimator against the runtime: every plan of the equivalence matrix (tests/equivalence)
// runs 3 steps through the real `tessera train` (CPU ranks, Gloo), and each rank's measured peak
// mem/total_bytes (max over steps) must be within ±10% of estimate_plan's prediction. Each
// category is printed next to its prediction (the table in the report), and the big ones
// (params, grads, optimizer, activations, host) are held to ±10% too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/config/config.h"
#include "engine/plan/estimator.h"
#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "tests/support/commands.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

const char* kBase = R"(name: plan_measured
model: {preset: gpt-tiny, n_layer: 8, n_head: 4, d_model: 32, seq_len: 16}
data: {dataset: brown}
train: {steps: 3, micro_batch: 2, grad_accum: 2, lr: 5.0e-4, min_lr: 5.0e-5, warmup_steps: 2,
        weight_decay: 0.1, grad_clip: 1.0, eval_every: 0, seed: 11}
log: {db: runs.db, every: 1}
)";

// The MLP classifier (data-parallel, ZeRO and offload plans; its single rank is MlpModel).
const char* kMlpBase = R"(name: plan_measured_mlp
model: {preset: mlp, hidden: [256, 128]}
data: {dataset: fashion-mnist}
train: {steps: 3, micro_batch: 32, grad_accum: 2, lr: 5.0e-4, min_lr: 5.0e-5, warmup_steps: 2,
        weight_decay: 0.1, grad_clip: 1.0, eval_every: 0, seed: 11}
log: {db: runs.db, every: 1}
)";

// The Llama family (llama-tiny: 4 query heads over 2 key/value heads; the runtime even on one
// rank).
const char* kLlamaBase = R"(name: plan_measured_llama
model: {preset: llama-tiny, seq_len: 16, tie_embeddings: false}
data: {dataset: brown}
train: {steps: 3, micro_batch: 2, grad_accum: 2, lr: 5.0e-4, min_lr: 5.0e-5, warmup_steps: 2,
        weight_decay: 0.1, grad_clip: 1.0, eval_every: 0, seed: 11}
log: {db: runs.db, every: 1}
)";

struct Plan {
    std::string tag;
    std::vector<std::string> sets;
    int accum = 2;
    const char* base = kBase;
};
// gtest prints the parameter in test listings (and CTest's names): the plan's tag, not its bytes
void PrintTo(const Plan& p, std::ostream* os) {
    *os << p.tag;
}

std::vector<Plan> plans() {
    return {
        {"single", {}},
        {"dp2", {"parallel.dp=2"}},
        {"dp4", {"parallel.dp=4"}},
        {"tp2", {"parallel.tp=2"}},
        {"tp4", {"parallel.tp=4"}},
        {"pp2", {"parallel.pp=2"}},
        {"pp4", {"parallel.pp=4"}, 4},
        {"dp2_tp2", {"parallel.dp=2", "parallel.tp=2"}},
        {"dp2_pp2", {"parallel.dp=2", "parallel.pp=2"}},
        {"tp2_pp2", {"parallel.tp=2", "parallel.pp=2"}},
        {"dp2_tp2_pp2", {"parallel.dp=2", "parallel.tp=2", "parallel.pp=2"}},
        {"zero1_dp2", {"parallel.dp=2", "parallel.zero=1"}},
        {"zero2_dp2", {"parallel.dp=2", "parallel.zero=2"}},
        {"zero3_dp2", {"parallel.dp=2", "parallel.zero=3"}},
        {"zero1_dp4", {"parallel.dp=4", "parallel.zero=1"}},
        {"zero2_dp4", {"parallel.dp=4", "parallel.zero=2"}},
        {"zero3_dp4", {"parallel.dp=4", "parallel.zero=3"}},
        {"gpipe_pp2", {"parallel.pp=2", "parallel.schedule=gpipe"}, 4},
        {"gpipe_pp4", {"parallel.pp=4", "parallel.schedule=gpipe"}, 4},
        {"1f1b_pp2", {"parallel.pp=2", "parallel.schedule=1f1b"}, 4},
        {"1f1b_pp4", {"parallel.pp=4", "parallel.schedule=1f1b"}, 8},
        {"interleaved_pp2",
         {"parallel.pp=2", "parallel.schedule=interleaved", "parallel.virtual_stages=2"},
         4},
        {"interleaved_pp4",
         {"parallel.pp=4", "parallel.schedule=interleaved", "parallel.virtual_stages=2"},
         4},
        {"recompute_none", {"parallel.dp=2", "parallel.recompute=none"}},
        {"recompute_selective", {"parallel.pp=2", "parallel.recompute=selective"}},
        {"recompute_full", {"parallel.tp=2", "parallel.recompute=full"}},
        {"offload_activations", {"parallel.pp=2", "parallel.offload_activations=true"}},
        {"offload_optimizer",
         {"parallel.dp=2", "parallel.zero=1", "parallel.offload_optimizer=true"}},
        {"dp2_accum1", {"parallel.dp=2"}, 1},
        {"dp2_accum4", {"parallel.dp=2"}, 4},
        {"llama_single", {}, 2, kLlamaBase},
        {"llama_dp2_zero1", {"parallel.dp=2", "parallel.zero=1"}, 2, kLlamaBase},
        {"llama_tp2", {"parallel.tp=2"}, 2, kLlamaBase},
        {"llama_pp2_tied", {"parallel.pp=2", "model.tie_embeddings=true"}, 4, kLlamaBase},
        {"llama_zero3_dp2_selective",
         {"parallel.dp=2", "parallel.zero=3", "parallel.recompute=selective"},
         2,
         kLlamaBase},
        {"llama_offload", {"parallel.pp=2", "parallel.offload_activations=true"}, 2, kLlamaBase},
        {"mlp_single", {}, 2, kMlpBase},
        {"mlp_dp2", {"parallel.dp=2"}, 2, kMlpBase},
        {"mlp_zero1_dp2", {"parallel.dp=2", "parallel.zero=1"}, 2, kMlpBase},
        {"mlp_zero3_dp4", {"parallel.dp=4", "parallel.zero=3"}, 2, kMlpBase},
        {"mlp_offload",
         {"parallel.dp=2", "parallel.zero=2", "parallel.offload_optimizer=true",
          "parallel.offload_activations=true"},
         2,
         kMlpBase},
    };
}

// this test process's folder, removed when it exits
const fs::path& work_root() {
    static const tessera::test_support::TempDir root("plan");
    return root.path();
}

class Measured : public ::testing::TestWithParam<Plan> {};

TEST_P(Measured, PeakMemoryWithinTenPercent) {
    const Plan& p = GetParam();
    std::vector<std::string> sets = p.sets;
    sets.push_back("train.grad_accum=" + std::to_string(p.accum));
    fs::path dir = work_root() / p.tag;
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "project.yaml") << p.base;

    RunConfig cfg = config_load((dir / "project.yaml").string(), sets);
    PlanEstimate est = estimate_plan(cfg, device_spec("H100"));

    auto [rc, out] =
        test_support::run_command(test_support::train_command(dir / "project.yaml", sets));
    ASSERT_EQ(rc, 0) << out;

    RunStore store = RunStore::open((dir / "runs.db").string(), true);
    auto runs = store.runs_list();
    ASSERT_FALSE(runs.empty());
    const int64_t run = runs.back().id;
    auto measured = [&](std::string_view name) {
        std::map<int, double> by_rank;  // max over steps
        for (const auto& m : store.metrics(run, name))
            by_rank[m.rank] = std::max(by_rank[m.rank], m.value);
        return by_rank;
    };
    auto total = measured(metric::mem_total_bytes);
    ASSERT_EQ((int)total.size(), est.world) << out;
    std::map<int, std::map<int, double>> cats;
    for (int c = 0; c < kMemCategoryCount; ++c)
        cats[c] = measured(metric::mem_category_bytes((MemCategory)c));

    for (int r = 0; r < est.world; ++r) {
        const RankEstimate& e = est.ranks[r];
        std::string line = "[plan] " + p.tag + " rank " + std::to_string(r) + " total meas " +
                           std::to_string((int64_t)total[r]) + " pred " +
                           std::to_string(e.total_peak_bytes);
        char pct[32];
        std::snprintf(pct, sizeof pct, " (%+.1f%%)",
                      100.0 * (e.total_peak_bytes - total[r]) / total[r]);
        line += pct;
        for (int c = 0; c < kMemCategoryCount; ++c)
            line += " | " + std::string(mem_category_name((MemCategory)c)) + " " +
                    std::to_string((int64_t)cats[c][r]) + "/" + std::to_string(e.peak_bytes[c]);
        std::printf("%s\n", line.c_str());
        EXPECT_NEAR(e.total_peak_bytes, total[r], 0.10 * total[r]) << p.tag << " rank " << r;
        for (MemCategory c : {MemCategory::params, MemCategory::grads, MemCategory::optimizer,
                              MemCategory::activations, MemCategory::host}) {
            double m = cats[(int)c][r];
            EXPECT_NEAR((double)e.peak_bytes[(int)c], m, 0.10 * m + 1)
                << p.tag << " rank " << r << " " << mem_category_name(c);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Plans, Measured, ::testing::ValuesIn(plans()),
                         [](const auto& info) { return info.param.tag; });

}  // namespace
