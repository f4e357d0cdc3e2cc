// A CPU plan's step time from this host's calibration (engine/plan/op_costs.h, op_sweep.h): with a
// costs file for the threads a rank gets, the step is the op trace priced with it (a synthetic
// file gives a time counted by hand); without one, or with one made on another host or at another
// thread count, the estimator falls back to sgemm's rate at the device's efficiency and says so.
// Whether the priced time matches a real run is bench/cpu_step_time.py's question, not this test's.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/kernels/cpu/threads.h"
#include "engine/plan/estimator.h"
#include "engine/plan/op_costs.h"
#include "engine/plan/op_sweep.h"
#include "tests/plan/tiny_plan.h"
#include "tests/support/temp_dir.h"

using namespace tessera;
using nlohmann::json;

namespace {

// 8 GPT blocks of width 32 (4 heads of 8), micro-batch 2 x 16, 2 micro-batches per step
RunConfig tiny(const std::vector<std::string>& sets = {}) {
    return test::tiny_plan(sets);
}

// Every GEMM in the grid takes 1 ms, attention 2 ms forward and 3 ms backward, every other op
// 0.1 ms, one AdamW call 10 ms; squared norms and zeroing nothing.
json synthetic_costs(int threads, const std::string& cpu_model) {
    const std::vector<double> wide{1, 1e7}, ones(8, 1e-3);
    json lin;
    for (int k = 0; k < (int)OpKind::count; ++k)
        lin[op_kind_name((OpKind)k)] = {{"fixed_s", 1e-4}, {"per_unit_s", 0.0}};
    auto flat = [](double t) { return json{{"fixed_s", t}, {"per_unit_s", 0.0}}; };
    return {{"device", "cpu"},
            {"cpu_model", cpu_model},
            {"cores", cpu_host().cores},
            {"threads", threads},
            {"gemm",
             {{"N", wide},
              {"C", wide},
              {"OC", wide},
              {"forward_s", ones},
              {"forward_gelu_s", ones},
              {"backward_s", ones}}},
            {"attention",
             {{"head_dim", {8}},
              {"BH", wide},
              {"T", wide},
              {"forward_s", std::vector<double>(4, 2e-3)},
              {"backward_s", std::vector<double>(4, 3e-3)}}},
            {"linear", lin},
            {"optimizer", {{"adamw", flat(0.01)}, {"sum_squares", flat(0)}, {"zero", flat(0)}}}};
}

// A fresh devices folder for the estimator (TESSERA_DEVICES_DIR), removed after the test.
class CpuCalibration : public ::testing::Test {
  protected:
    void SetUp() override { ::setenv("TESSERA_DEVICES_DIR", dir_.c_str(), 1); }
    void TearDown() override { ::unsetenv("TESSERA_DEVICES_DIR"); }
    void write(int threads, const json& j) {
        const std::string path = cpu_costs_path(threads);
        ASSERT_EQ(std::filesystem::path(path).parent_path(), dir_);
        std::ofstream(path) << j.dump();
    }
    tessera::test_support::TempDir scratch_{"devices"};
    std::filesystem::path dir_ = scratch_.path();
};

TEST_F(CpuCalibration, PricesTheTraceWithTheHostsCosts) {
    const RunConfig cfg = tiny();
    const int threads = plan_cpu_threads(cfg);
    EXPECT_EQ(threads, cpu_host().cores) << "world 1 takes every core";
    write(threads, synthetic_costs(threads, cpu_host().model));
    const PlanEstimate e = estimate_plan(cfg, device_spec("cpu"));
    ASSERT_EQ(e.step_model, "ops") << e.step_model_note;
    EXPECT_NE(e.step_model_note.find(dir_.string()), std::string::npos) << e.step_model_note;
    ASSERT_EQ(e.ranks.size(), 1u);
    const RankEstimate& r = e.ranks[0];
    // per micro-batch: 8 blocks x 4 GEMMs (qkv, projection, fc with GELU, fc projection) and the
    // head, forward and backward: 66 GEMMs; 8 attention forwards and backwards; 2 micro-batches.
    // The fc projection's backward runs through the GELU, and both projections' forwards add
    // the residual: a sweep without those GEMMs' own times (a CPU's) prices them as the GEMM and
    // a gelu_backward or an add_bias_residual (0.1 ms each), counted with the GEMMs.
    const double gemms_s = 2 * 66 * 1e-3;
    EXPECT_NEAR(r.gemm_s, gemms_s + 2 * 8 * 1e-4 + 2 * 8 * 2 * 1e-4, 1e-9);
    EXPECT_NEAR(r.attention_s, 2 * 8 * (2e-3 + 3e-3), 1e-9);
    EXPECT_NEAR(r.optimizer_s, 0.01, 1e-12);
    const double other_calls = r.other_ops_s / 1e-4;  // a whole number of 0.1 ms ops
    EXPECT_GT(other_calls, 2 * 8 * 4 - 0.5) << "the layernorms and the loss at least";
    EXPECT_NEAR(other_calls, std::round(other_calls), 1e-6);
    EXPECT_NEAR(r.compute_s, r.gemm_s + r.attention_s + r.other_ops_s + r.optimizer_s, 1e-12);
    EXPECT_NEAR(e.step_s, r.compute_s, 1e-12) << "one rank: no communication, no bubble";
    // the costs price time only: the memory and FLOPs are the meta device's run either way
    // MFU against the calibration's fastest GEMM (1e7 x 1e7 x 1e7 in 1 ms) where it beats the
    // sgemm this process timed
    const double peak = 2e21 / 1e-3;
    EXPECT_NEAR(e.mfu, e.model_flops_per_step / (e.step_s * peak), 1e-6 * e.mfu);
    const PlanEstimate fallback = estimate_plan(cfg, device_spec("cpu"), nullptr);
    EXPECT_EQ(r.total_peak_bytes, fallback.ranks[0].total_peak_bytes);
    EXPECT_EQ(r.flops_per_step, fallback.ranks[0].flops_per_step);

    // twice the GEMM costs: the step grows by exactly the GEMMs' time
    json slower = synthetic_costs(threads, cpu_host().model);
    slower["gemm"]["forward_s"] = slower["gemm"]["forward_gelu_s"] = slower["gemm"]["backward_s"] =
        std::vector<double>(8, 2e-3);
    const OpCosts twice = op_costs_parse(slower.dump(), "slower.json");
    EXPECT_NEAR(estimate_plan(cfg, device_spec("cpu"), &twice).step_s, e.step_s + gemms_s, 1e-9);
}

// A rank's OpenMP threads: its share of the host's cores, less one for its comm thread from four.
TEST(CpuThreads, ARankLeavesACoreForItsCommThreadFromFourCores) {
    EXPECT_EQ(default_threads_per_rank(16, 1), 16);  // one rank: no comm thread beside it
    EXPECT_EQ(default_threads_per_rank(16, 2), 7);
    EXPECT_EQ(default_threads_per_rank(16, 4), 3);
    EXPECT_EQ(default_threads_per_rank(6, 2), 3);  // three cores a rank: all of them
    EXPECT_EQ(default_threads_per_rank(2, 2), 1);
    EXPECT_EQ(default_threads_per_rank(2, 4), 1);  // oversubscribed: still one
}

// A GPU rank's host AdamW under optimizer offload: the rank's threads but two, at least one.
TEST(CpuThreads, TheHostOptimizerLeavesTwoOfTheRanksThreads) {
    EXPECT_EQ(host_optimizer_threads(16), 14);
    EXPECT_EQ(host_optimizer_threads(3), 1);
    EXPECT_EQ(host_optimizer_threads(2), 1);
    EXPECT_EQ(host_optimizer_threads(1), 1);
}

TEST_F(CpuCalibration, RanksSharingTheHostUseTheirThreadCount) {
    const RunConfig dp2 = tiny({"parallel.dp=2"});
    const int threads = plan_cpu_threads(dp2);
    EXPECT_EQ(threads, default_threads_per_rank(cpu_host().cores, 2));  // tessera train's rule
    EXPECT_EQ(plan_cpu_threads(tiny({"parallel.dp=2", "train.threads=3"})), 3);
    write(threads, synthetic_costs(threads, cpu_host().model));
    const PlanEstimate e = estimate_plan(dp2, device_spec("cpu"));
    ASSERT_EQ(e.step_model, "ops") << e.step_model_note;
    ASSERT_EQ(e.ranks.size(), 2u);
    // more threads than cores stretch every op by their ratio
    if (cpu_host().cores < 2) GTEST_SKIP() << "one core: dp2 is oversubscribed already";
    const RunConfig crowded = tiny({"parallel.dp=2", str_cat("train.threads=", cpu_host().cores)});
    write(cpu_host().cores, synthetic_costs(cpu_host().cores, cpu_host().model));
    const PlanEstimate c = estimate_plan(crowded, device_spec("cpu"));
    ASSERT_EQ(c.step_model, "ops");
    EXPECT_NEAR(c.ranks[0].gemm_s, 2.0 * e.ranks[0].gemm_s, 1e-9);
}

// Collectives over Gloo are priced per call and per byte sent: with 1 ms per call and nothing per
// byte, dp2's communication is its 11 per-unit gradient all-reduces (wte, wpe, 8 blocks, ln_f)
// and the step's scalars; zero 3 adds per micro-batch a reduce-scatter and two gathers per unit.
TEST_F(CpuCalibration, CollectivesPricedPerCall) {
    const RunConfig dp2 = tiny({"parallel.dp=2"});
    const int threads = plan_cpu_threads(dp2);
    json costs = synthetic_costs(threads, cpu_host().model);
    costs["comm"] = {{"group", 2}, {"collective", {{"fixed_s", 1e-3}, {"per_unit_s", 0.0}}}};
    write(threads, costs);
    const PlanEstimate e = estimate_plan(dp2, device_spec("cpu"));
    ASSERT_EQ(e.step_model, "ops");
    EXPECT_NEAR(e.ranks[0].comm_s, (11 + 1) * 1e-3, 1e-12);
    EXPECT_NEAR(e.step_s, e.ranks[0].compute_s + e.ranks[0].comm_s, 1e-12);
    const PlanEstimate z3 =
        estimate_plan(tiny({"parallel.dp=2", "parallel.zero=3"}), device_spec("cpu"));
    EXPECT_NEAR(z3.ranks[0].comm_s, (11 * 3 * 2 + 1) * 1e-3, 1e-12);
    // a tp2 rank's all-reduces are the trace's: some per block and micro-batch, each 1 ms
    const PlanEstimate tp2 = estimate_plan(tiny({"parallel.tp=2"}), device_spec("cpu"));
    const double calls = tp2.ranks[0].comm_s / 1e-3;
    EXPECT_GE(calls, 2 * 8 * 4 + 1);
    EXPECT_NEAR(calls, std::round(calls), 1e-6);
}

// A collective reached from compute also waits out the ranks' spread (the sweep's "sync"): per
// synchronising call, plus a fraction of the rank's compute.
TEST_F(CpuCalibration, CollectivesWaitOutTheRanksSpread) {
    const RunConfig dp2 = tiny({"parallel.dp=2"});
    const int threads = plan_cpu_threads(dp2);
    json costs = synthetic_costs(threads, cpu_host().model);
    costs["comm"] = {{"group", 2},
                     {"collective", {{"fixed_s", 1e-3}, {"per_unit_s", 0.0}}},
                     {"sync", {{"fixed_s", 2e-4}, {"per_unit_s", 0.01}}}};
    write(threads, costs);
    const PlanEstimate e = estimate_plan(dp2, device_spec("cpu"));
    ASSERT_EQ(e.step_model, "ops");
    const RankEstimate& r = e.ranks[0];
    EXPECT_NEAR(r.comm_s, (11 + 1) * (1e-3 + 2e-4) + 0.01 * r.compute_s, 1e-12);
    // one rank: nothing to wait for
    const PlanEstimate one = estimate_plan(tiny({}), device_spec("cpu"));
    EXPECT_EQ(one.ranks[0].comm_s, 0.0);
}

TEST_F(CpuCalibration, FallsBackToTheEfficiencyModelWithoutOne) {
    const RunConfig cfg = tiny();
    const int threads = plan_cpu_threads(cfg);
    const PlanEstimate none = estimate_plan(cfg, device_spec("cpu"));
    EXPECT_EQ(none.step_model, "efficiency");
    EXPECT_NE(none.step_model_note.find("tessera plan --calibrate"), std::string::npos)
        << none.step_model_note;
    const DeviceSpec cpu = device_spec("cpu");
    EXPECT_NEAR(none.step_s, none.model_flops_per_step / (cpu.peak_flops * cpu.efficiency),
                1e-9 * none.step_s);
    EXPECT_EQ(none.ranks[0].gemm_s, 0);
    // a calibration at another thread count, or another host's under this one's name, is not used
    write(threads + 1, synthetic_costs(threads + 1, cpu_host().model));
    EXPECT_EQ(estimate_plan(cfg, device_spec("cpu")).step_model, "efficiency");
    write(threads, synthetic_costs(threads, "Some Other CPU"));
    EXPECT_EQ(estimate_plan(cfg, device_spec("cpu")).step_model, "efficiency");
    // ... and the host's own, once written, is picked up without a restart
    write(threads, synthetic_costs(threads, cpu_host().model));
    EXPECT_EQ(estimate_plan(cfg, device_spec("cpu")).step_model, "ops");
    // a GPU config planned for the CPU device, or a CPU config for a GPU, never takes it
    EXPECT_EQ(estimate_plan(cfg, device_spec("A100-80GB")).step_model, "efficiency");
}

// Two sweeps of one grid merge point by point into the faster (what `tessera plan --calibrate
// --keep-faster` stores); sweeps of different grids are told apart and never merged.
json sweep_of(double gemm, double slope_s) {
    return {
        {"gemm",
         {{"N", {256, 1024}},
          {"C", {32}},
          {"OC", {64}},
          {"forward_s", {gemm, 2 * gemm}},
          {"backward_s", {3 * gemm, 4 * gemm}}}},
        {"attention",
         {{"head_dim", {16}},
          {"BH", {4}},
          {"T", {32, 64}},
          {"forward_s", {gemm, gemm}},
          {"backward_s", {gemm, gemm}}}},
        {"linear",
         {{"swiglu_forward", op_sweep_fit_linear({{1e3, slope_s * 1e3}, {1e6, slope_s * 1e6}})}}},
        {"optimizer", {{"adamw", op_sweep_fit_linear({{1e5, 1e-3}, {1e6, 1e-2}})}}}};
}

TEST(OpSweep, KeepsTheFasterOfTwoSweepsPointByPoint) {
    json a = sweep_of(1e-3, 2e-9), b = sweep_of(2e-3, 1e-9);
    b["gemm"]["forward_s"][1] = 1e-4;                      // b faster at one GEMM shape only
    b["linear"]["swiglu_forward"]["points"][0][1] = 5e-6;  // and a's small point slower than b's
    ASSERT_EQ(op_sweep_grid_difference(a, b), "");
    const json a0 = a;
    op_sweep_keep_faster(a, b);
    EXPECT_EQ(a["gemm"]["forward_s"], json({a0["gemm"]["forward_s"][0], 1e-4}));
    EXPECT_EQ(a["gemm"]["backward_s"], a0["gemm"]["backward_s"]);
    EXPECT_EQ(a["attention"], a0["attention"]);
    // swiglu: a's points (1e3: 2e-6, 1e6: 2e-3), b's (5e-6, 1e-3): the faster are a's first and
    // b's second, refitted through them
    const json& fit = a["linear"]["swiglu_forward"];
    const double y0 = a0["linear"]["swiglu_forward"]["points"][0][1].get<double>();
    const double y1 = b["linear"]["swiglu_forward"]["points"][1][1].get<double>();
    EXPECT_EQ(fit["points"], json({{1e3, y0}, {1e6, y1}}));
    const double slope = (y1 - y0) / (1e6 - 1e3);
    EXPECT_NEAR(fit["per_unit_s"].get<double>(), slope, 1e-15);
    EXPECT_NEAR(fit["fixed_s"].get<double>(), y0 - slope * 1e3, 1e-12);
    EXPECT_EQ(a["optimizer"], a0["optimizer"]) << "equal sweeps keep their points";
}

TEST(OpSweep, SweepsOfDifferentGridsAreNotMerged) {
    const json a = sweep_of(1e-3, 1e-9);
    json b = sweep_of(1e-3, 1e-9);
    b["gemm"]["N"] = {256, 4096};
    EXPECT_NE(op_sweep_grid_difference(a, b).find("gemm N"), std::string::npos)
        << op_sweep_grid_difference(a, b);
    json c = sweep_of(1e-3, 1e-9);
    c["linear"].erase("swiglu_forward");
    EXPECT_NE(op_sweep_grid_difference(a, c).find("swiglu_forward"), std::string::npos);
    json d = sweep_of(1e-3, 1e-9);
    d["linear"]["swiglu_forward"]["points"][1][0] = 2e6;
    EXPECT_NE(op_sweep_grid_difference(a, d).find("other sizes"), std::string::npos);
    json e = sweep_of(1e-3, 1e-9);
    e["attention"]["forward_s"] = {1e-3};
    EXPECT_NE(op_sweep_grid_difference(a, e).find("attention forward_s"), std::string::npos);
    EXPECT_NE(op_sweep_grid_difference(a, json::object()), "");
    json into = a;
    EXPECT_THROW(op_sweep_keep_faster(into, b), std::exception);
    EXPECT_EQ(into, a) << "nothing merged";
}

}  // namespace
