// Unit tests of the plan estimator and the stage balancer on hand-computable cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/kernels/fp8_workspace.h"
#include "engine/model/gpt.h"
#include "engine/parallel/layer_ops.h"
#include "engine/plan/estimator.h"
#include "engine/plan/op_costs.h"
#include "engine/plan/partitioner.h"
#include "engine/plan/rank_sim.h"
#include "tests/plan/tiny_plan.h"
#include "tests/support/paths.h"

using namespace tessera;

namespace tessera {
const char* device_ops_json(const std::string& name);  // generated from resources/devices
}

namespace {

RunConfig tiny(const std::vector<std::string>& sets = {}) {
    return test::tiny_plan(sets);
}

int64_t cat(const RankEstimate& r, MemCategory c) {
    return r.peak_bytes[(int)c];
}

const GptDims kDims{8, 4, 32, 16, 256};

// ParamStore units of a tp = 1 rank holding everything: wte, wpe, 8 blocks, ln_f
std::vector<int64_t> units() {
    std::vector<int64_t> u{256 * 32, 16 * 32};
    for (int l = 0; l < 8; ++l) u.push_back(12 * 32 * 32 + 13 * 32);
    u.push_back(2 * 32);
    return u;
}

TEST(Estimator, SingleRankParamsAreFourBytesPerElement) {
    PlanEstimate e = estimate_plan(tiny(), device_spec("H100"));
    ASSERT_EQ(e.world, 1);
    const int64_t numel = gpt_param_table(kDims).total_numel();
    EXPECT_EQ(cat(e.ranks[0], MemCategory::params), 4 * numel);
    EXPECT_EQ(cat(e.ranks[0], MemCategory::grads), 4 * numel);
    EXPECT_EQ(cat(e.ranks[0], MemCategory::optimizer), 8 * numel);
    EXPECT_GT(cat(e.ranks[0], MemCategory::activations), 0);
    EXPECT_EQ(e.tokens_per_step, 2 * 2 * 16);
}

TEST(Estimator, ZeroShardsOptimizerGradsAndParamsOverDp) {
    const int dp = 4;
    int64_t sum_len = 0, sum_S = 0, sum_pad = 0, max_pad = 0;
    for (int64_t len : units()) {
        int64_t S = (len + dp - 1) / dp;
        sum_len += len, sum_S += S, sum_pad += S * dp, max_pad = std::max(max_pad, S * dp);
    }
    auto z = [&](int stage) {
        return estimate_plan(tiny({"parallel.dp=4", "parallel.zero=" + std::to_string(stage)}),
                             device_spec("H100"))
            .ranks[0];
    };
    RankEstimate z0 = z(0), z1 = z(1), z2 = z(2), z3 = z(3);
    // zero 0: everything replicated; units padded to a multiple of dp (moments are not)
    EXPECT_EQ(cat(z0, MemCategory::params), 4 * sum_pad);
    EXPECT_EQ(cat(z0, MemCategory::grads), 4 * sum_pad);
    EXPECT_EQ(cat(z0, MemCategory::optimizer), 8 * sum_len);
    // zero 1: moments / dp
    EXPECT_EQ(cat(z1, MemCategory::optimizer), 8 * sum_S);
    EXPECT_EQ(cat(z1, MemCategory::grads), 4 * sum_pad);
    // zero 2: gradients / dp persist; a layer's full gradients live from its backward until their
    // reduce-scatter, with at most ParamStore::kMaxReductions of them in flight: beside the slices,
    // the units being computed (the head with its tied embedding: up to three) plus one waiting
    EXPECT_EQ(cat(z2, MemCategory::optimizer), 8 * sum_S);
    EXPECT_GE(cat(z2, MemCategory::grads), 4 * (sum_S + max_pad));
    EXPECT_LE(cat(z2, MemCategory::grads), 4 * (sum_S + 4 * max_pad));
    EXPECT_LT(cat(z2, MemCategory::grads), cat(z1, MemCategory::grads));
    // zero 3: parameters / dp plus at most two gathered layers
    EXPECT_GE(cat(z3, MemCategory::params), 4 * sum_S);
    EXPECT_LE(cat(z3, MemCategory::params), 4 * (sum_S + 2 * max_pad));
    EXPECT_LT(cat(z3, MemCategory::params), cat(z0, MemCategory::params) / 2);
}

TEST(Estimator, TensorParallelShardsBlockMatricesAndVocab) {
    // tp 2 (with dp 2 so both take the parallel runtime path) against dp 2 alone
    RankEstimate t1 = estimate_plan(tiny({"parallel.dp=2"}), device_spec("H100")).ranks[0];
    RankEstimate t2 =
        estimate_plan(tiny({"parallel.dp=2", "parallel.tp=2"}), device_spec("H100")).ranks[0];
    const int64_t C = 32, Cl = 16, T = 16, V = 256;
    auto padded = [](int64_t len) { return (len + 1) / 2 * 2; };
    int64_t want = padded(V / 2 * C) + padded(T * C) + 8 * padded(12 * Cl * C + 7 * Cl + 6 * C) +
                   padded(2 * C);
    EXPECT_EQ(cat(t2, MemCategory::params), 4 * want);
    EXPECT_LT(cat(t2, MemCategory::params), cat(t1, MemCategory::params) * 0.55);
}

TEST(Estimator, RecomputeOrdersActivations) {
    auto act = [](const std::string& rc) {
        return cat(
            estimate_plan(tiny({"parallel.pp=2", "parallel.recompute=" + rc}), device_spec("H100"))
                .ranks[0],
            MemCategory::activations);
    };
    int64_t none = act("none"), sel = act("selective"), full = act("full");
    EXPECT_LT(full, sel);
    EXPECT_LT(sel, none);
}

TEST(Estimator, OffloadMovesActivationsToHost) {
    RankEstimate on = estimate_plan(tiny({"parallel.pp=2", "parallel.offload_activations=true"}),
                                    device_spec("H100"))
                          .ranks[0];
    RankEstimate off = estimate_plan(tiny({"parallel.pp=2"}), device_spec("H100")).ranks[0];
    EXPECT_EQ(cat(off, MemCategory::host), 0);
    EXPECT_GT(cat(on, MemCategory::host), 0);
    EXPECT_LT(cat(on, MemCategory::activations), cat(off, MemCategory::activations));
    EXPECT_LT(on.device_peak_bytes, off.device_peak_bytes);
}

// One GPU without DP (ZeRO 0): each parameter's gradient (the blocks' weights alone) is allocated
// as its layer's backward first needs it, in the holes the freed activations leave, and released
// at the next step's start, so the device's peak (the pool's segments) stays below what the
// parameters, the optimizer, the activations and the gradients hold together, by more than half
// the gradients (GPT-2 124M's shape, 12 blocks: all but about the first block's backward's);
// with DP the gradients stay one persistent buffer per unit.
TEST(Estimator, SplitGradientsTakeTheFreedActivationsPlace) {
    auto rank = [](std::vector<std::string> sets) {
        for (const char* s : {"runtime.device=cuda", "runtime.precision=bf16", "model.n_layer=12",
                              "model.d_model=768", "model.n_head=12", "model.seq_len=1024",
                              "train.micro_batch=4", "train.grad_accum=1"})
            sets.push_back(s);
        return estimate_plan(tiny(sets), device_spec("H200")).ranks[0];
    };
    auto together = [](const RankEstimate& r) {
        int64_t sum = 0;
        for (MemCategory c : {MemCategory::context, MemCategory::libraries, MemCategory::params,
                              MemCategory::grads, MemCategory::optimizer, MemCategory::activations})
            sum += cat(r, c);
        return sum;
    };
    const RankEstimate split = rank({}), whole = rank({"parallel.dp=2"});
    // optimizer offload splits them too (each unit's go to the host as its backward ends)
    const RankEstimate offloaded = rank({"parallel.offload_optimizer=true"});
    for (const RankEstimate* r : {&split, &offloaded})
        EXPECT_LT(r->device_peak_bytes, together(*r) - cat(*r, MemCategory::grads) / 2);
    EXPECT_GE(whole.device_peak_bytes, together(whole));
    EXPECT_LT(offloaded.device_peak_bytes, split.device_peak_bytes);
    // at the device's peak (the Plan page stacks these): the categories add up to it, and the
    // split plans hold few of their gradients there
    for (const RankEstimate* r : {&split, &whole, &offloaded}) {
        int64_t sum = 0;
        for (int64_t b : r->at_peak_bytes) sum += b;
        EXPECT_EQ(sum, r->device_peak_bytes);
    }
    for (const RankEstimate* r : {&split, &offloaded})
        EXPECT_LT(r->at_peak_bytes[(int)MemCategory::grads], cat(*r, MemCategory::grads) / 2);
}

TEST(Estimator, ScheduleInFlightAndBubble) {
    // 1F1B with pp 4 and 8 micro-batches: stage s holds pp - s in flight; bubble 3 / 11
    PlanEstimate e =
        estimate_plan(tiny({"parallel.pp=4", "train.grad_accum=8"}), device_spec("H100"));
    ASSERT_EQ(e.world, 4);
    for (int s = 0; s < 4; ++s) EXPECT_EQ(e.ranks[s].max_in_flight, 4 - s) << "stage " << s;
    EXPECT_NEAR(e.bubble_fraction, 3.0 / 11.0, 1e-9);
    PlanEstimate g =
        estimate_plan(tiny({"parallel.pp=4", "train.grad_accum=8", "parallel.schedule=gpipe"}),
                      device_spec("H100"));
    EXPECT_EQ(g.ranks[3].max_in_flight, 8);
    EXPECT_GT(cat(g.ranks[3], MemCategory::activations), cat(e.ranks[3], MemCategory::activations));
}

TEST(Estimator, ZbH1HoldsActivationsUntilWAndLowersTheBubble) {
    // zb-h1, pp 4, m 8: every stage holds up to pp micro-batches until their W (the runner's
    // count on the meta device), the bubble is (p-1)/(3m+p-1) = 3/27 against 1F1B's 3/11, and
    // the later stages' activation peaks grow with what their deferred W's keep
    const auto sets = std::vector<std::string>{"parallel.pp=4", "train.grad_accum=8"};
    PlanEstimate f1b = estimate_plan(tiny(sets), device_spec("H100"));
    auto zsets = sets;
    zsets.push_back("parallel.schedule=zb-h1");
    PlanEstimate zb = estimate_plan(tiny(zsets), device_spec("H100"));
    ASSERT_EQ(zb.world, 4);
    for (int s = 0; s < 4; ++s) EXPECT_EQ(zb.ranks[s].max_in_flight, 4) << "stage " << s;
    EXPECT_NEAR(zb.bubble_fraction, 3.0 / 27.0, 1e-9);
    EXPECT_NEAR(f1b.bubble_fraction, 3.0 / 11.0, 1e-9);
    EXPECT_LT(zb.step_s, f1b.step_s);
    for (int s = 1; s < 4; ++s)
        EXPECT_GT(cat(zb.ranks[s], MemCategory::activations),
                  cat(f1b.ranks[s], MemCategory::activations))
            << "stage " << s;
    // the same work: FLOPs per step unchanged
    for (int s = 0; s < 4; ++s) EXPECT_EQ(zb.ranks[s].flops_per_step, f1b.ranks[s].flops_per_step);
}

TEST(Estimator, FlopsCommAndTime) {
    PlanEstimate e = estimate_plan(tiny({"parallel.dp=2", "parallel.tp=2"}), device_spec("H200"));
    ASSERT_EQ(e.world, 4);
    EXPECT_GT(e.ranks[0].comm_dp_bytes, 0);
    EXPECT_GT(e.ranks[0].comm_tp_bytes, 0);
    EXPECT_EQ(e.ranks[0].comm_pp_bytes, 0);
    EXPECT_GT(e.step_s, 0);
    EXPECT_GT(e.tokens_per_s, 0);
    EXPECT_GT(e.mfu, 0);
    EXPECT_LE(e.mfu, 1.0);
    // executed FLOPs: every rank does 1/tp of its replica's work
    EXPECT_NEAR(e.flops_per_step, e.model_flops_per_step, 1e-6 * e.model_flops_per_step);
}

TEST(Estimator, BadInputIsAnInputError) {
    EXPECT_THROW(device_spec("TPUv9"), InputError);
    EXPECT_THROW(estimate_plan(tiny({"parallel.tp=3", "parallel.dp=1"}), device_spec("H100")),
                 InputError);
}

// A GPU as its driver names it (nvidia-smi, NVML: what a run records and the rank loop's MFU reads)
// finds its own entry: the H100's PCIe and NVL parts are not the SXM part's figures, and a GPU the
// table lacks is false, not another GPU's entry. The parts without a sweep price by efficiency.
TEST(Estimator, DriverNamesFindTheirOwnDevice) {
    const std::pair<const char*, const char*> known[] = {
        {"NVIDIA H100 80GB HBM3", "H100"},      {"NVIDIA H100 PCIe", "H100-PCIe"},
        {"NVIDIA H100 NVL", "H100-NVL"},        {"NVIDIA H200", "H200"},
        {"NVIDIA A100-SXM4-40GB", "A100-40GB"}, {"NVIDIA A100-SXM4-80GB", "A100-80GB"},
        {"NVIDIA A100 80GB PCIe", "A100-80GB"}};
    for (const auto& [driver, table] : known) {
        DeviceSpec d;
        ASSERT_TRUE(device_spec_for_gpu(driver, &d)) << driver;
        EXPECT_EQ(d.name, table) << driver;
        EXPECT_EQ(d.peak_flops, device_spec(table).peak_flops) << driver;
        DeviceSpec by_name;  // every table name finds itself
        ASSERT_TRUE(device_spec_for_recorded(table, &by_name)) << table;
        EXPECT_EQ(by_name.name, table);
    }
    EXPECT_LT(device_spec("H100-PCIe").peak_flops, device_spec("H100").peak_flops);
    EXPECT_LT(device_spec("H100-PCIe").hbm_bytes_per_s, device_spec("H100").hbm_bytes_per_s);
    EXPECT_GT(device_spec("H100-NVL").memory_bytes, device_spec("H100").memory_bytes);
    DeviceSpec none;
    EXPECT_FALSE(device_spec_for_gpu("Tesla T4", &none));
    EXPECT_FALSE(device_spec_for_gpu("NVIDIA L40S", &none));
    const RunConfig gpt2 = config_parse(
        "name: t\nmodel: {preset: gpt2}\ndata: {dataset: brown}\n"
        "runtime: {device: cuda, precision: bf16}\n",
        "t.yaml", {"train.micro_batch=16"});
    EXPECT_EQ(estimate_plan(gpt2, device_spec("H100")).step_model, "ops");
    EXPECT_EQ(estimate_plan(gpt2, device_spec("H100-PCIe")).step_model, "efficiency");
}

// The per-op costs: at a grid point the measured time itself, between grid points between
// their neighbours, outside the grid in proportion to the work; a bad file is an InputError.
TEST(OpCosts, InterpolatesTheMeasuredGrid) {
    const OpCosts* c = op_costs_for("H200");
    ASSERT_NE(c, nullptr) << "resources/devices/h200_ops.json is embedded";
    EXPECT_EQ(op_costs_for("A100-40GB"), nullptr);
    auto gemm = [&](OpKind k, int64_t N, int64_t C, int64_t OC) {
        return c->op_s(OpCall{k, N, C, OC, 0, 0, 0, DType::bf16});
    };
    auto idx = [&](double n, double ch, double oc) {
        auto at = [](const std::vector<double>& g, double x) {
            return (size_t)(std::find(g.begin(), g.end(), x) - g.begin());
        };
        return (at(c->gemm_N, n) * c->gemm_C.size() + at(c->gemm_C, ch)) * c->gemm_OC.size() +
               at(c->gemm_OC, oc);
    };
    const size_t i = idx(16384, 768, 2304), j = idx(16384, 768, 3072);
    EXPECT_NEAR(gemm(OpKind::matmul_forward, 16384, 768, 2304), c->gemm_forward_s[i],
                1e-9 * c->gemm_forward_s[i]);
    EXPECT_NEAR(gemm(OpKind::matmul_backward, 16384, 768, 3072), c->gemm_backward_s[j],
                1e-9 * c->gemm_backward_s[j]);
    const double mid = gemm(OpKind::matmul_forward, 16384, 768, 2600);
    EXPECT_GT(mid, std::min(c->gemm_forward_s[i], c->gemm_forward_s[j]));
    EXPECT_LT(mid, std::max(c->gemm_forward_s[i], c->gemm_forward_s[j]));
    const double big = gemm(OpKind::matmul_forward, 65536, 768, 2304);  // N beyond the grid's 32768
    EXPECT_NEAR(big, 2 * gemm(OpKind::matmul_forward, 32768, 768, 2304), 1e-9);
    // attention grows with T² at a fixed number of heads; a memory-bound op is fixed + per unit
    const double a1 =
        c->op_s(OpCall{OpKind::attention_forward, 8 * 1024, 768, 0, 8, 1024, 12, DType::bf16});
    const double a2 =
        c->op_s(OpCall{OpKind::attention_forward, 8 * 2048, 768, 0, 8, 2048, 12, DType::bf16});
    EXPECT_GT(a2, 2 * a1);
    const OpCall ln{OpKind::layernorm_forward, 1000, 768, 0, 0, 0, 0, DType::bf16};
    const auto& lin = c->linear[(size_t)OpKind::layernorm_forward];
    EXPECT_DOUBLE_EQ(c->op_s(ln), lin.fixed_s + lin.per_unit_s * 768000.0);
    EXPECT_THROW(op_costs_parse("{}", "x.json"), InputError);
    EXPECT_THROW(op_costs_parse("not json", "x.json"), InputError);
    // JSON of the wrong shape or type is bad input too, named, not a library exception
    for (const char* bad : {"[1, 2]", R"({"cores": "two", "gemm": {}})"}) {
        try {
            op_costs_parse(bad, "x.json");
            ADD_FAILURE() << bad << ": accepted";
        } catch (const InputError& e) {
            EXPECT_EQ(std::string(e.what()).rfind("x.json: ", 0), 0u) << e.what();
        }
    }
}

// Each swept GPU's costs are embedded and price its plans: the H100's (bench/op_sweep on an H100,
// 2026-12-08) beside the H200's; a run on an H100 is no longer priced by the efficiency model.
// Its sweep times the fused GELU backward as well, which prices below the GEMM's backward plus a
// separate gelu_backward, as on the H200.
TEST(OpCosts, TheH100HasItsOwnSweep) {
    const OpCosts* h100 = op_costs_for("H100");
    ASSERT_NE(h100, nullptr) << "resources/devices/h100_ops.json is embedded";
    EXPECT_NE(h100->device.find("H100"), std::string::npos) << h100->device;
    EXPECT_NE(h100, op_costs_for("H200"));
    EXPECT_FALSE(h100->gemm_backward_gelu_s.empty());
    const OpCall fused{OpKind::matmul_gelu_backward, 16384, 3072, 768, 0, 0, 0, DType::bf16};
    OpCall gemm = fused;
    gemm.kind = OpKind::matmul_backward;
    const OpCall deriv{OpKind::gelu_backward, 16384 * 3072, 0, 0, 0, 0, 0, DType::bf16};
    EXPECT_LT(h100->op_s(fused), h100->op_s(gemm) + h100->op_s(deriv));
    const RunConfig gpt2 = config_parse(
        "name: t\nmodel: {preset: gpt2}\ndata: {dataset: brown}\n"
        "runtime: {device: cuda, precision: bf16}\n",
        "t.yaml", {"train.micro_batch=16"});
    const PlanEstimate e = estimate_plan(gpt2, device_spec("H100"));
    EXPECT_EQ(e.step_model, "ops") << e.step_model_note;
    EXPECT_NE(e.step_model_note.find("h100_ops.json"), std::string::npos) << e.step_model_note;
}

// A GEMM's backward through a GELU: where the sweep timed it (GPUs: the derivative in cuBLASLt's
// epilogue) its own grid, cheaper than the backward and a separate gelu_backward; where not (a
// file swept before it, FP8, the CPU) priced as exactly those two.
TEST(OpCosts, BackwardThroughGeluIsItsOwnGridOrTheGemmAndTheDerivative) {
    const OpCosts* c = op_costs_for("H200");
    ASSERT_NE(c, nullptr);
    ASSERT_FALSE(c->gemm_backward_gelu_s.empty()) << "h200_ops.json times the fused backward";
    ASSERT_TRUE(c->prices(OpCall{OpKind::matmul_gelu_backward}));
    const OpCall fused{OpKind::matmul_gelu_backward, 16384, 4096, 1024, 0, 0, 0, DType::bf16};
    OpCall gemm = fused, deriv = fused;
    gemm.kind = OpKind::matmul_backward;
    deriv = OpCall{OpKind::gelu_backward, 16384 * 4096, 0, 0, 0, 0, 0, DType::bf16};
    auto at = [](const std::vector<double>& g, double x) {
        return (size_t)(std::find(g.begin(), g.end(), x) - g.begin());
    };
    const size_t i =
        (at(c->gemm_N, 16384) * c->gemm_C.size() + at(c->gemm_C, 4096)) * c->gemm_OC.size() +
        at(c->gemm_OC, 1024);
    EXPECT_NEAR(c->op_s(fused), c->gemm_backward_gelu_s[i], 1e-9 * c->gemm_backward_gelu_s[i]);
    EXPECT_GT(c->op_s(fused), c->op_s(gemm));
    EXPECT_LT(c->op_s(fused), c->op_s(gemm) + c->op_s(deriv));

    OpCosts older = *c;  // a sweep from before the fused backward
    older.gemm_backward_gelu_s.clear();
    EXPECT_DOUBLE_EQ(older.op_s(fused), older.op_s(gemm) + older.op_s(deriv));
    OpCall fp8 = fused, fp8_gemm = gemm;
    fp8.fp8 = fp8_gemm.fp8 = true;
    EXPECT_DOUBLE_EQ(c->op_s(fp8), c->op_s(fp8_gemm) + c->op_s(deriv));
    OpCall half = fused;  // zb-h1's input-gradient part
    half.share = 0.5;
    EXPECT_DOUBLE_EQ(c->op_s(half), 0.5 * c->op_s(fused));
}

// A GEMM's forward plus a residual (a row-parallel projection on one TP rank): where the sweep
// timed it (GPUs: the residual as cuBLASLt's C operand) its own grid; where not (a file swept
// before it, FP8, the CPU) priced as the forward and a separate add_bias_residual.
TEST(OpCosts, ForwardPlusResidualIsItsOwnGridOrTheGemmAndTheAdd) {
    const OpCosts* h200 = op_costs_for("H200");
    ASSERT_NE(h200, nullptr);
    const OpCall fused{OpKind::matmul_residual_forward, 16384, 3072, 768, 0, 0, 0, DType::bf16};
    OpCall gemm = fused;
    gemm.kind = OpKind::matmul_forward;
    const OpCall add{OpKind::add_bias_residual, 16384, 768, 0, 0, 0, 0, DType::bf16};

    OpCosts older = *h200;  // a sweep without the grid
    older.gemm_forward_residual_s.clear();
    ASSERT_TRUE(older.prices(fused));
    EXPECT_DOUBLE_EQ(older.op_s(fused), older.op_s(gemm) + older.op_s(add));

    OpCosts swept = older;  // a sweep with it: its own times (here the forward's, 10% more)
    swept.gemm_forward_residual_s = swept.gemm_forward_s;
    for (double& t : swept.gemm_forward_residual_s) t *= 1.1;
    EXPECT_NEAR(swept.op_s(fused), 1.1 * swept.op_s(gemm), 1e-9 * swept.op_s(gemm));
    OpCall fp8 = fused, fp8_gemm = gemm;
    fp8.fp8 = fp8_gemm.fp8 = true;
    EXPECT_DOUBLE_EQ(swept.op_s(fp8), swept.op_s(fp8_gemm) + swept.op_s(add))
        << "FP8 adds the residual in a kernel of its own";
}

// A projection and its residual on one TP rank are one op, the GEMM with the residual as its C
// (what the meta device records is what the estimator prices); over TP ranks the partial sums
// are all-reduced first, then the bias and residual added.
TEST(OpTrace, ProjectionResidualIsOneGemmOnOneRankAndAllReducedOverTp) {
    LayerOps& ops = layer_ops_meta(layer_traits(Device::cuda, DType::bf16));
    auto record = [&](int tp) {
        OpTrace trace;
        OpTrace* before = op_trace_install(&trace);
        ops.projection_residual(nullptr, nullptr, nullptr, nullptr, nullptr, 4096, 3072 / tp, 768,
                                TpGroup{nullptr, 0, tp});
        op_trace_install(before);
        std::vector<OpKind> kinds;
        for (const OpCall& c : trace.calls) kinds.push_back(c.kind);
        return std::make_pair(kinds, trace.calls);
    };
    const auto [one, one_calls] = record(1);
    ASSERT_EQ(one, std::vector<OpKind>{OpKind::matmul_residual_forward});
    EXPECT_EQ(one_calls[0].N, 4096);
    EXPECT_EQ(one_calls[0].C, 3072);
    EXPECT_EQ(one_calls[0].OC, 768);
    const auto [two, two_calls] = record(2);
    EXPECT_EQ(two, (std::vector<OpKind>{OpKind::matmul_forward, OpKind::tp_all_reduce,
                                        OpKind::add_bias_residual}));
    EXPECT_EQ(two_calls[0].C, 1536);
    EXPECT_EQ(two_calls[1].N, 4096 * 768 * 2) << "the all-reduce's bytes (bf16)";
}

// Layers in bf16 on a GPU compute with bf16 copies of their weights. Where the rank's AdamW
// updates every parameter on the device (ZeRO 0), it writes the copies as it updates them: a step
// casts none but the head's padded vocabulary table (the first step's casts that make the copies
// are the run's setup, left out of the trace). ZeRO-3 gathers fresh fp32 parameters before each
// layer's forward and backward, which the layer casts each time (optimizer offload keeps a bf16
// image on the device instead, cast by the store: no layer casts). What the meta device traces is
// what the estimator prices.
TEST(RankSim, TheOptimizerWritesTheWeightCopiesWhereItUpdatesEveryParameter) {
    RunConfig cfg = tiny();
    auto casts = [&](int zero, int dp, bool offload) {
        plan_sim::RankSim sim;
        sim.B = 2, sim.T = 16, sim.N = 32;
        sim.dp = dp, sim.zero = zero, sim.m = 1, sim.offload_opt = offload;
        sim.device = layer_traits(Device::cuda, DType::bf16, false);
        ModelShape shape = model_shape(cfg.model, plan_vocab_size(cfg.model));
        shape.param_table();
        sim.build(shape, {8}, 0, 1, Recompute::none);
        sim.store_init();
        sim.run_step(schedule_build(ScheduleKind::one_f_one_b, 1, 1, 1)[0]);
        int n = 0;
        for (const OpCall& c : sim.trace.calls) n += c.kind == OpKind::cast_weights;
        return n;
    };
    EXPECT_EQ(casts(0, 1, false), 1) << "the head's padded wte only";
    EXPECT_EQ(casts(1, 1, false), 1) << "ZeRO-1 without DP updates every parameter too";
    // the embedding, 8 blocks and the head's own parameters twice, its padded wte once
    EXPECT_EQ(casts(3, 2, false), 21);
    EXPECT_EQ(casts(0, 1, true), 0);
}

// The cross-entropy is one op (its loss and gradient); a sweep from before that timed its two
// passes (tests/plan/data/h200_ops_2026-12-02.json), and prices it as their sum; a sweep that times
// the op (the embedded H200 one, since 2026-12-07) prices it from its own fit.
TEST(OpCosts, CrossEntropyIsOneOpOrTheTwoPassesOfOlderSweeps) {
    const OpCall ce{OpKind::cross_entropy, 16384, 50304, 0, 0, 0, 0, DType::bf16};
    const double units = 16384.0 * 50304.0;
    auto fit = [&](const nlohmann::json& lin, const char* key) {
        return lin[key]["fixed_s"].get<double>() + lin[key]["per_unit_s"].get<double>() * units;
    };
    const std::string older_path =
        std::string(test_support::tests_dir()) + "/plan/data/h200_ops_2026-12-02.json";
    std::ifstream f(older_path);
    ASSERT_TRUE(f) << older_path;
    nlohmann::json j = nlohmann::json::parse(f);
    nlohmann::json& lin = j["linear"];
    ASSERT_TRUE(lin.contains("cross_entropy_stats") && lin.contains("cross_entropy_loss"))
        << older_path << " is one of the older sweeps";
    ASSERT_FALSE(lin.contains("cross_entropy"));
    const OpCosts older = op_costs_from_json(j, "older.json");
    ASSERT_TRUE(older.prices(ce));
    EXPECT_NEAR(older.op_s(ce), fit(lin, "cross_entropy_stats") + fit(lin, "cross_entropy_loss"),
                1e-12 * older.op_s(ce));
    lin["cross_entropy"] = {{"fixed_s", 4e-6}, {"per_unit_s", 1e-12}};  // the op's own fit wins
    EXPECT_DOUBLE_EQ(op_costs_from_json(j, "both.json").op_s(ce), 4e-6 + 1e-12 * units);
    lin.erase("cross_entropy");
    lin.erase("cross_entropy_loss");  // half of the older pair prices nothing
    EXPECT_FALSE(op_costs_from_json(j, "half.json").prices(ce));

    const char* text = device_ops_json("h200");
    ASSERT_NE(text, nullptr);
    const nlohmann::json embedded = nlohmann::json::parse(text);
    ASSERT_TRUE(embedded["linear"].contains("cross_entropy")) << "the embedded sweep times the op";
    const OpCosts newer = op_costs_from_json(embedded, "h200_ops.json");
    EXPECT_NEAR(newer.op_s(ce), fit(embedded["linear"], "cross_entropy"), 1e-12 * newer.op_s(ce));
}

// Grouped-query attention: priced from the sweep's rows of its query heads per key/value head
// (OpCall::OC: the key/value heads), between them in log space; one key/value head per query
// head is the heads-only row, and a sweep without the axis prices every group as that row.
TEST(OpCosts, GroupedQueryAttentionIsPricedAtItsGroup) {
    const OpCosts* c = op_costs_for("H200");
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->attn_kv_group, (std::vector<double>{1, 2, 4, 8})) << "h200_ops.json";
    auto at = [](const std::vector<double>& g, double x) {
        return (size_t)(std::find(g.begin(), g.end(), x) - g.begin());
    };
    auto row = [&](const std::vector<double>& v, double hd, double g, double bh, double t) {
        return v[((at(c->attn_head_dim, hd) * c->attn_kv_group.size() + at(c->attn_kv_group, g)) *
                      c->attn_BH.size() +
                  at(c->attn_BH, bh)) *
                     c->attn_T.size() +
                 at(c->attn_T, t)];
    };
    // Llama-3.2-1B's shape at micro-batch 8: 32 heads of 64 sharing 8 key/value heads (group 4)
    auto call = [](OpKind k, int64_t kv) {
        return OpCall{k, 8 * 2048, 32 * 64, kv, 8, 2048, 32, DType::bf16};
    };
    for (OpKind k : {OpKind::attention_forward, OpKind::attention_backward}) {
        const auto& v = k == OpKind::attention_forward ? c->attn_forward_s : c->attn_backward_s;
        EXPECT_NEAR(c->op_s(call(k, 8)), row(v, 64, 4, 256, 2048), 1e-12);
        EXPECT_NEAR(c->op_s(call(k, 32)), row(v, 64, 1, 256, 2048), 1e-12);
        EXPECT_NEAR(c->op_s(call(k, 0)), row(v, 64, 1, 256, 2048), 1e-12);  // unspecified: MHA
        const double g6 = c->op_s(call(k, 5));  // 32 query heads over 5: group 6.4
        EXPECT_GE(g6, std::min(row(v, 64, 4, 256, 2048), row(v, 64, 8, 256, 2048)));
        EXPECT_LE(g6, std::max(row(v, 64, 4, 256, 2048), row(v, 64, 8, 256, 2048)));
    }
    OpCosts heads_only = *c;  // a sweep without the axis: its first group, the heads-only row
    const size_t per_group = c->attn_BH.size() * c->attn_T.size();
    heads_only.attn_kv_group = {1};
    heads_only.attn_forward_s.clear();
    for (size_t h = 0; h < c->attn_head_dim.size(); ++h)
        heads_only.attn_forward_s.insert(
            heads_only.attn_forward_s.end(),
            c->attn_forward_s.begin() + (long)(h * c->attn_kv_group.size() * per_group),
            c->attn_forward_s.begin() + (long)((h * c->attn_kv_group.size() + 1) * per_group));
    EXPECT_NEAR(heads_only.op_s(call(OpKind::attention_forward, 8)),
                row(c->attn_forward_s, 64, 1, 256, 2048), 1e-12);
}

// One model prices every rank: when the last pipeline stage's trace holds an op the sweep did not
// time (here the cross-entropy, taken out of a copy of the H200's costs), the first stage is
// priced from FLOPs too, not from its ops, and the step says "efficiency".
TEST(Estimator, OneStepModelForEveryStage) {
    const std::vector<std::string> pp2{"runtime.device=cuda", "runtime.precision=bf16",
                                       "parallel.pp=2", "train.grad_accum=4"};
    const DeviceSpec h200 = device_spec("H200");
    const OpCosts* measured = op_costs_for("H200");
    ASSERT_NE(measured, nullptr);
    const PlanEstimate ops = estimate_plan(tiny(pp2), h200, measured);
    ASSERT_EQ(ops.step_model, "ops");
    EXPECT_GT(ops.ranks[0].gemm_s, 0);
    EXPECT_GT(ops.ranks[1].gemm_s, 0);

    OpCosts partial = *measured;
    partial.measured[(size_t)OpKind::cross_entropy] = false;  // only the last stage runs it
    const PlanEstimate mixed = estimate_plan(tiny(pp2), h200, &partial);
    EXPECT_EQ(mixed.step_model, "efficiency");
    const PlanEstimate none = estimate_plan(tiny(pp2), h200, nullptr);
    ASSERT_EQ(mixed.ranks.size(), 2u);
    for (size_t i = 0; i < mixed.ranks.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(mixed.ranks[i].gemm_s, 0);
        EXPECT_DOUBLE_EQ(mixed.ranks[i].compute_s, none.ranks[i].compute_s);
    }
    EXPECT_DOUBLE_EQ(mixed.step_s, none.step_s);
}

// A bf16 GPU step is priced op by op where the device has measured costs; elsewhere (fp32, a
// device without them, CPU ranks) from FLOPs at the device's efficiency.
TEST(Estimator, StepTimeFromOpsWhereMeasured) {
    const std::vector<std::string> gpu{"runtime.device=cuda", "runtime.precision=bf16"};
    PlanEstimate h200 = estimate_plan(tiny(gpu), device_spec("H200"));
    EXPECT_EQ(h200.step_model, "ops");
    const RankEstimate& r = h200.ranks[0];
    EXPECT_GT(r.gemm_s, 0);
    EXPECT_GT(r.attention_s, 0);
    EXPECT_GT(r.other_ops_s, 0);
    EXPECT_GT(r.optimizer_s, 0);
    EXPECT_GE(r.compute_s, r.gemm_s + r.attention_s + r.other_ops_s + r.optimizer_s - 1e-12);
    EXPECT_EQ(estimate_plan(tiny(gpu), device_spec("A100-80GB")).step_model, "efficiency");
    EXPECT_EQ(
        estimate_plan(tiny({"runtime.device=cuda", "runtime.precision=fp32"}), device_spec("H200"))
            .step_model,
        "efficiency");
    EXPECT_EQ(estimate_plan(tiny(), device_spec("H200")).step_model, "efficiency");
    // full recompute runs the blocks' forward twice: more GEMM time, same optimizer
    std::vector<std::string> full = gpu;
    full.push_back("parallel.recompute=full");
    const RankEstimate f = estimate_plan(tiny(full), device_spec("H200")).ranks[0];
    EXPECT_GT(f.gemm_s, r.gemm_s);
    EXPECT_DOUBLE_EQ(f.optimizer_s, r.optimizer_s);
}

// runtime.precision fp8: the blocks' GEMMs whose shapes qualify are priced from the sweep's FP8
// rows (here a copy of the H200's bf16 times at half), the head's and the small ones from the bf16
// rows; a device whose sweep has no FP8 rows leaves the step to the efficiency model.
TEST(Estimator, Fp8GemmsArePricedFromTheirOwnRows) {
    const std::vector<std::string> base{"runtime.device=cuda",  "model.d_model=2048",
                                        "model.n_head=16",      "model.seq_len=1024",
                                        "train.micro_batch=16", "model.n_layer=2"};
    auto with = [&](const char* precision) {
        auto sets = base;
        sets.push_back(std::string("runtime.precision=") + precision);
        return tiny(sets);
    };
    const OpCosts* h200 = op_costs_for("H200");
    ASSERT_NE(h200, nullptr);
    OpCosts half = *h200;
    half.gemm_fp8_forward_s = h200->gemm_forward_s;
    half.gemm_fp8_forward_gelu_s = h200->gemm_forward_gelu_s;
    half.gemm_fp8_backward_s = h200->gemm_backward_s;
    for (auto* v :
         {&half.gemm_fp8_forward_s, &half.gemm_fp8_forward_gelu_s, &half.gemm_fp8_backward_s})
        for (double& t : *v) t *= 0.5;
    half.fp8_measured = true;
    const PlanEstimate bf16 = estimate_plan(with("bf16"), device_spec("H200"), &half);
    const PlanEstimate fp8 = estimate_plan(with("fp8"), device_spec("H200"), &half);
    ASSERT_EQ(fp8.step_model, "ops");
    const double g16 = bf16.ranks[0].gemm_s, g8 = fp8.ranks[0].gemm_s;
    EXPECT_LT(g8, 0.9 * g16) << "the blocks' large GEMMs (N 16384, C 2048) are FP8";
    EXPECT_GT(g8, 0.5 * g16) << "the head's GEMM stays bf16";
    EXPECT_DOUBLE_EQ(fp8.ranks[0].attention_s, bf16.ranks[0].attention_s);
    OpCosts none = *h200;
    none.fp8_measured = false;
    EXPECT_EQ(estimate_plan(with("fp8"), device_spec("H200"), &none).step_model, "efficiency");
    EXPECT_EQ(estimate_plan(with("bf16"), device_spec("H200"), &none).step_model, "ops");
}

TEST(Estimator, Fp8WorkspaceRule) {
    EXPECT_TRUE(Fp8Workspace::eligible(16384, 2048, 8192));  // Llama-3.2-1B's MLP at B 8, T 2048
    EXPECT_FALSE(Fp8Workspace::eligible(16384, 768, 3072)) << "GPT-2 124M's MLP: too small to gain";
    EXPECT_FALSE(Fp8Workspace::eligible(16384, 2048, 2048)) << "under 1e11 multiply-adds";
    EXPECT_FALSE(Fp8Workspace::eligible(16384, 2056, 8192)) << "not a multiple of 16";
    const Fp8Workspace f = Fp8Workspace::of(1024, 512, 2048, false),
                       b = Fp8Workspace::of(1024, 512, 2048, true);
    EXPECT_EQ(f.bytes, 256 + 1024 * 512 + 2048 * 512);                    // scales, inp, weight
    EXPECT_EQ(b.bytes, 256 + 1024 * 512 + 2048 * 512 + 2 * 1024 * 2048);  // and dout twice
}

TEST(Balance, KnownOptimum) {
    ChunkCostModel m;
    m.block_s = 1.0;
    m.fixed_s = {0.0, 2.5};  // a heavy head on the last chunk
    m.mem_base = {0, 0};
    m.mem_per_block = {1, 1};
    m.capacity_bytes = 100;
    EXPECT_EQ(balance_blocks(8, m), (std::vector<int>{5, 3}));
    m.capacity_bytes = 4;  // at most 4 blocks per chunk
    EXPECT_EQ(balance_blocks(8, m), (std::vector<int>{4, 4}));
    m.capacity_bytes = 3;
    try {
        balance_blocks(8, m);
        FAIL() << "expected no split to fit";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("no split of 8 blocks over 2 chunks"),
                  std::string::npos)
            << e.what();
    }
    m.fixed_s = {0, 0, 0};
    m.mem_base = {0, 0, 0};
    m.mem_per_block = {1, 1, 1};
    m.capacity_bytes = 100;
    EXPECT_EQ(balance_blocks(9, m), (std::vector<int>{3, 3, 3}));
}

TEST(Balance, HeavyHeadGetsFewerBlocks) {
    // GPT-2 vocabulary on a tiny model: the LM head dominates, the last stage takes fewer blocks
    RunConfig c = tiny({"parallel.pp=2", "model.vocab=gpt2"});
    std::vector<int> b = balance_stages(c, device_spec("H100"));
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(b[0] + b[1], 8);
    EXPECT_GT(b[0], b[1]);
}

}  // namespace
