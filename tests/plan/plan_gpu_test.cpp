// The estimator against GPU runs, without a GPU: tests/plan/data/h200_gpt2_memory.json holds, for
// each plan, what bench/gpu_memory_dump.py measured on H200s (GPT-2 bf16, 3 steps; each entry's
// produced_by says when and how): the per-rank, per-category peaks of the engine's accounting
// and, for the plans dumped on one H200 (GPT-2 124M plans and gpt2-large, gpt2-xl), the device's
// own figure: the largest NVML per-process used memory, sampled every 50 ms. Each plan's config
// is built as that script builds it and estimate_plan predicts it:
//   - the device peak (the context and libraries of the device table included) within ±5% of the
//     device's figure; `full` (full recompute) within ±6%: its allocator pool holds 0.28 GB more
//     than the other plans' beyond the accounted peak (churn of the recomputed activations), which
//     the estimator does not model;
//   - every category of the engine's accounting, its total and its device peak, within ±10% (a
//     category measured at zero must be predicted at zero).
// Prints the table of predicted against measured.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/plan/estimator.h"
#include "engine/plan/op_costs.h"
#include "tests/support/paths.h"

using namespace tessera;

namespace {

// bench/gpu_memory_dump.py's project.yaml; the estimator reads no data, so a named dataset stands
// in for its random shard (preset gpt2 sets the vocabulary either way)
const char* kConfig = R"(name: gpu_memory
model: {preset: gpt2}
data: {dataset: brown}
train: {steps: 3, micro_batch: 16, grad_accum: 1, lr: 6.0e-4, min_lr: 6.0e-5, warmup_steps: 1, eval_every: 0}
runtime: {device: cuda, precision: bf16}
log: {db: runs.db, every: 1}
)";

std::string data_path(const char* file) {
    return std::string(TESSERA_TESTS_DIR) + "/plan/data/" + file;
}

nlohmann::json measured_json(const char* file = "h200_gpt2_memory.json") {
    const std::string path = data_path(file);
    std::ifstream f(path);
    if (!f) throw std::runtime_error("cannot open " + path);
    return nlohmann::json::parse(f);
}

double gib(double b) {
    return b / (1024.0 * 1024.0 * 1024.0);
}

template <typename... A>
std::string str_format(const char* fmt, A... a) {
    char buf[128];
    std::snprintf(buf, sizeof buf, fmt, a...);
    return buf;
}

struct Figure {
    std::string name;  // the dump's key without "_bytes"
    int64_t pred;
};

// The engine's own figures: the allocator's categories, and its total and device peaks (the
// device table's context and libraries, which the runtime adds from the same table, taken out).
// A measurement from before the runtime placed tensors in its own pool (no `cached` figure: the
// two-GPU plans, 2026-11-30) is compared without the pool's slack.
std::vector<Figure> figures(const RankEstimate& r, bool with_cached) {
    std::vector<Figure> f;
    int64_t outside = 0;
    for (int c = 0; c < kMemCategoryCount; ++c) {
        const auto cat = (MemCategory)c;
        if (cat == MemCategory::context || cat == MemCategory::libraries ||
            (cat == MemCategory::cached && !with_cached)) {
            outside += r.peak_bytes[c];
            continue;
        }
        f.push_back({std::string(mem_category_name(cat)), r.peak_bytes[c]});
    }
    f.push_back({"device", r.device_peak_bytes - outside});
    f.push_back({"total", r.total_peak_bytes - outside});
    return f;
}

TEST(EstimatorGpu, H200Gpt2PeaksWithinFivePercentOfTheDevice) {
    const nlohmann::json all = measured_json();
    ASSERT_FALSE(all.empty());
    std::printf("%-11s %4s  %21s %21s   engine categories (pred - meas) / meas\n", "plan", "rank",
                "device GiB pred/NVML", "engine GiB pred/meas");
    int checked = 0, device_checked = 0;
    for (const auto& [tag, plan] : all.items()) {
        ASSERT_TRUE(plan.contains("measured")) << tag << ": no measurement in the dump";
        ASSERT_TRUE(plan.contains("produced_by"))
            << tag << ": the fixture must say what produced it";
        std::vector<std::string> sets = plan.at("sets").get<std::vector<std::string>>();
        RunConfig cfg = config_parse(kConfig, tag + ".yaml", sets);
        PlanEstimate est = estimate_plan(cfg, device_spec("H200"));
        const auto& ranks = plan.at("measured");
        ASSERT_EQ((int)ranks.size(), est.world) << tag;
        for (const auto& item : ranks.items()) {
            // a named reference, not a structured binding: the lambda below captures it
            const int rank = std::stoi(item.key());
            const auto& meas = item.value();
            const RankEstimate& e = est.ranks.at(rank);
            const std::vector<Figure> fig = figures(e, meas.contains("cached_bytes"));
            // the run's own figure for a category; its device and total peaks without the
            // device table's context and libraries, which a run since 2026-12-02 counts in them
            auto measured = [&](const std::string& name) {
                double m = meas.at(name + "_bytes").get<double>();
                if (name == "device" || name == "total")
                    for (const char* k : {"context_bytes", "libraries_bytes"})
                        m -= meas.value(k, 0.0);
                return m;
            };
            const double eng_m = measured("device");
            const double eng_p = (double)fig[fig.size() - 2].pred;
            std::string dev_col = "          -          ";
            if (plan.contains("device_measured")) {
                const double dev_m = plan.at("device_measured").at(item.key()).get<double>();
                const double err = (e.device_peak_bytes - dev_m) / dev_m;
                dev_col = str_format("%7.3f/%7.3f (%+5.1f%%)", gib(e.device_peak_bytes), gib(dev_m),
                                     100 * err);
                EXPECT_NEAR(err, 0.0, 0.05)
                    << tag << " rank " << rank << ": device peak predicted " << e.device_peak_bytes
                    << " bytes, NVML " << (int64_t)dev_m;
                ++device_checked;
            }
            std::string row = str_format("%-11s %4d  %s %7.3f/%7.3f (%+5.1f%%) ", tag.c_str(), rank,
                                         dev_col.c_str(), gib(eng_p), gib(eng_m),
                                         100.0 * (eng_p - eng_m) / eng_m);
            for (const Figure& f : fig) {
                if (f.name == "device") continue;
                const double m = measured(f.name);
                row += " " + f.name +
                       (m > 0 ? str_format(" %+.1f%%", 100.0 * (f.pred - m) / m)
                              : str_format(" %s", f.pred == 0 ? "0=0" : "0!=0"));
            }
            std::printf("%s\n", row.c_str());
            for (const Figure& f : fig) {
                const double m = measured(f.name);
                // under activation offload the pool's slack at the device's peak follows the
                // copy engine's timing (when a copied buffer is freed); under optimizer offload
                // the run lands each unit's update (a staging buffer) between the next forward's
                // activations, the replay all of them after its one step (4 MiB of slack apart
                // on GPT-2 124M): not compared; the device and total peaks it is part of are
                const bool optimizer_offload = tag.rfind("offload_optimizer", 0) == 0;
                if (f.name == "cached" && (tag == "offload" || optimizer_offload)) continue;
                // the pool's segments, where the run placed its tensors in Tessera's own pool
                // (a cached figure) without offload: the estimator runs the same pool over the
                // same allocations, step after step, so the device peak holds to 0.5%
                const bool pooled = meas.contains("cached_bytes") && tag != "offload";
                const double tol =
                    pooled && (f.name == "device" || f.name == "cached") ? 0.005 : 0.10;
                EXPECT_NEAR((double)f.pred, m, tol * m)
                    << tag << " rank " << rank << " " << f.name << ": predicted " << f.pred
                    << " bytes, measured " << (int64_t)m;
                ++checked;
            }
        }
    }
    EXPECT_GE(checked, 15 * 9);    // every plan of the dump, every figure (but a few)
    EXPECT_GE(device_checked, 9);  // the one-GPU plans, gpt2-large and gpt2-xl
}

// Step time against what bench/step_time.py or bench/gpt2_throughput.py measured on one GPU, wall
// clock (tokens of steps 11-30 over their elapsed time), for GPT-2 plans: `fixture` under
// tests/plan/data, priced on `device`. None of these runs entered the prediction: the estimator
// prices each op of the step from the per-op costs bench/op_sweep measured on its own
// (resources/devices/<device>_ops.json). Every plan within ±10%; returns how many were checked.
int check_gpt2_step_times(const char* fixture, const std::string& device) {
    const nlohmann::json data = measured_json(fixture);
    EXPECT_TRUE(data.contains("produced_by")) << fixture;
    std::printf("%s on %s\n%-22s %10s %10s %8s\n", fixture, device.c_str(), "plan", "measured",
                "predicted", "error");
    int checked = 0;
    for (const auto& [tag, plan] : data.at("plans").items()) {
        std::vector<std::string> sets = plan.at("sets").get<std::vector<std::string>>();
        RunConfig cfg = config_parse(kConfig, "step.yaml", sets);
        const PlanEstimate est = estimate_plan(cfg, device_spec(device));
        EXPECT_EQ(est.step_model, "ops") << tag;
        const double meas = plan.at("measured_tok_per_s").get<double>();
        std::printf("%-22s %10.0f %10.0f %+7.1f%%\n", tag.c_str(), meas, est.tokens_per_s,
                    100.0 * (est.tokens_per_s - meas) / meas);
        EXPECT_NEAR(est.tokens_per_s, meas, 0.10 * meas)
            << fixture << " " << tag << ": predicted " << est.tokens_per_s << " tokens/s";
        ++checked;
    }
    return checked;
}

// tests/plan/data/h200_gpt2_step_time.json: bench/step_time.py on one H200, every size, recompute
// policy, offload and micro-batch sizes from 1 to 16.
TEST(EstimatorGpu, H200Gpt2StepTimeWithinTenPercentOfWallClock) {
    EXPECT_GE(check_gpt2_step_times("h200_gpt2_step_time.json", "H200"), 11);
}

// tests/plan/data/h100_gpt2_step_time.json: bench/gpt2_throughput.py on one H100, the four sizes,
// priced with the H100's own sweep (resources/devices/h100_ops.json).
TEST(EstimatorGpu, H100Gpt2StepTimeWithinTenPercentOfWallClock) {
    EXPECT_GE(check_gpt2_step_times("h100_gpt2_step_time.json", "H100"), 4);
}

// The Llama family on one H200, against tests/plan/data/h200_llama_step_time.json: what
// bench/llama_throughput.py measured (T 2048, bf16, wall clock) for SmolLM-135M, Qwen2.5-0.5B,
// Llama-3.2-1B and Qwen3-0.6B, none of which entered the per-op costs. Step time within ±10%;
// device memory (NVML per process) within ±5%.
TEST(EstimatorGpu, H200LlamaStepTimeAndDeviceMemory) {
    const nlohmann::json data = measured_json("h200_llama_step_time.json");
    ASSERT_TRUE(data.contains("produced_by"));
    const char* base = R"(name: llama_step
model: {preset: smollm-135m, seq_len: 2048}
data: {dataset: brown}
train: {steps: 30, micro_batch: 8, grad_accum: 1, eval_every: 0}
runtime: {device: cuda, precision: bf16}
)";
    std::printf("%-20s %10s %10s %8s %9s %9s %8s\n", "plan", "measured", "predicted", "error",
                "dev GiB", "pred GiB", "error");
    int checked = 0;
    for (const auto& [tag, plan] : data.at("plans").items()) {
        RunConfig cfg =
            config_parse(base, "llama_step.yaml", plan.at("sets").get<std::vector<std::string>>());
        const PlanEstimate est = estimate_plan(cfg, device_spec("H200"));
        EXPECT_EQ(est.step_model, "ops") << tag;
        const double meas = plan.at("measured_tok_per_s").get<double>();
        const double dev = plan.at("measured_device_gib").get<double>() * (1 << 30);
        double pred_dev = 0;
        for (const auto& r : est.ranks) pred_dev = std::max(pred_dev, (double)r.device_peak_bytes);
        std::printf("%-20s %10.0f %10.0f %+7.1f%% %9.2f %9.2f %+7.1f%%\n", tag.c_str(), meas,
                    est.tokens_per_s, 100.0 * (est.tokens_per_s - meas) / meas, dev / (1 << 30),
                    pred_dev / (1 << 30), 100.0 * (pred_dev - dev) / dev);
        EXPECT_NEAR(est.tokens_per_s, meas, 0.10 * meas)
            << tag << ": predicted " << est.tokens_per_s << " tokens/s";
        EXPECT_NEAR(pred_dev, dev, 0.05 * dev) << tag;
        ++checked;
    }
    EXPECT_GE(checked, 4);
}

// Two H200s, against tests/plan/data/h200_gpt2_throughput.json: per-step medians of a 2026-11-30
// build (about 3% above wall clock), the only 2-GPU figures there are until a 2-GPU machine
// measures them as bench/step_time.py does; held to ±15%. Those runs had that build's kernels, so
// they are priced with the per-op costs op_sweep measured of the kernels of then
// (tests/plan/data/h200_ops_2026-12-02.json, the sweep resources/devices/h200_ops.json held before
// the Hopper attention kernels): what this test checks is the estimator's model of two ranks (the
// schedule, its bubble, the collectives), not today's kernels, which the 1-GPU tests above hold.
TEST(EstimatorGpu, TwoH200sGpt2WithinFifteenPercentOfOlderMedians) {
    const nlohmann::json data = measured_json("h200_gpt2_throughput.json");
    const std::string ops_path = data_path("h200_ops_2026-12-02.json");
    std::ifstream ops_file(ops_path);
    ASSERT_TRUE(ops_file) << ops_path;
    const OpCosts then = op_costs_parse(
        std::string(std::istreambuf_iterator<char>(ops_file), std::istreambuf_iterator<char>()),
        ops_path);
    std::printf("%-10s %10s %10s %8s\n", "plan", "measured", "predicted", "error");
    int checked = 0;
    for (const auto& [tag, plan] : data.at("plans").items()) {
        std::vector<std::string> sets = plan.at("sets").get<std::vector<std::string>>();
        RunConfig cfg = config_parse(kConfig, tag + ".yaml", sets);
        const double pred = estimate_plan(cfg, device_spec("H200"), &then).tokens_per_s;
        const double meas = plan.at("tok_s").get<double>();
        std::printf("%-10s %10.0f %10.0f %+7.1f%%\n", tag.c_str(), meas, pred,
                    100.0 * (pred - meas) / meas);
        EXPECT_NEAR(pred, meas, 0.15 * meas) << tag << ": predicted " << pred << " tokens/s";
        ++checked;
    }
    EXPECT_GE(checked, 5);
}

// The GPU replay differs from the CPU one where the layers differ: a bf16 run holds about half
// the activations of an fp32 GPU run, and neither keeps the CPU attention's T×T probabilities.
TEST(EstimatorGpu, Bf16HalvesActivationsAndNoAttentionScores) {
    const std::vector<std::string> base;
    RunConfig bf16 = config_parse(kConfig, "bf16.yaml", base);
    RunConfig fp32 = config_parse(kConfig, "fp32.yaml", {"runtime.precision=fp32"});
    RunConfig cpu =
        config_parse(kConfig, "cpu.yaml", {"runtime.device=cpu", "runtime.precision=fp32"});
    const DeviceSpec h200 = device_spec("H200");
    auto act = [&](const RunConfig& c) {
        return (double)estimate_plan(c, h200).ranks[0].peak_bytes[(int)MemCategory::activations];
    };
    EXPECT_NEAR(act(bf16) / act(fp32), 0.5, 0.02);
    const double scores = 12.0 * 16 * 12 * 1024 * 1024 * 4;  // (B, NH, T, T) fp32 per block
    EXPECT_GT(act(cpu) - act(fp32), 0.9 * scores);
}

}  // namespace
