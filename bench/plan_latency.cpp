// How long the estimator takes: `tessera plan` must answer interactively (< 100 ms) for
// gpt2-large dp8 x tp2 x pp4, for 64-GPU plans and for llama-3.1-8b over 8 H200s. Prints the median
// of repeated estimates (the config is a struct: no YAML in the timed path) and the balanced
// split's time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/plan/estimator.h"
#include "engine/plan/partitioner.h"
#include "engine/plan/plan_search.h"

using namespace tessera;

namespace {

double median_ms(const std::vector<double>& v) {
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
}

void bench(const char* label, const std::vector<std::string>& sets,
           const char* preset = "gpt2-large") {
    RunConfig cfg = config_parse(
        std::string("name: bench\nmodel: {preset: ") + preset + "}\ndata: {dataset: brown}\n",
        "bench.yaml", sets);
    DeviceSpec dev = device_spec("H200");
    std::vector<double> est_ms, bal_ms;
    PlanEstimate e;
    for (int i = 0; i < 7; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        e = estimate_plan(cfg, dev);
        auto t1 = std::chrono::steady_clock::now();
        try {
            if (cfg.parallel.pp > 1) balance_stages(cfg, dev);
        } catch (const std::exception&) {
        }
        auto t2 = std::chrono::steady_clock::now();
        est_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        bal_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    std::printf(
        "%-44s world %3d | estimate %7.2f ms | balance %7.2f ms | step %.3f s, MFU %.1f%%\n", label,
        e.world, median_ms(est_ms), median_ms(bal_ms), e.step_s, 100 * e.mfu);
}

// plan_suggest over every layout of `gpus` GPUs (the studio's "Suggest a plan").
void bench_suggest(int gpus, const std::vector<std::string>& sets) {
    RunConfig cfg = config_parse(
        "name: bench\nmodel: {preset: gpt2-large}\ndata: {dataset: brown}\n", "bench.yaml", sets);
    DeviceSpec dev = device_spec("H200");
    std::vector<double> ms;
    std::vector<PlanSuggestion> s;
    PlanSearchStats st;
    for (int i = 0; i < 3; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        s = plan_suggest(cfg, dev, gpus, 5, &st);
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
    }
    std::printf(
        "plan_suggest gpt2-large on %d x H200, global batch %d: %.1f ms (median of 3), "
        "%d candidates, %d estimated, %d fit\n",
        gpus, cfg.train.micro_batch * cfg.train.grad_accum * cfg.parallel.dp, median_ms(ms),
        st.candidates, st.estimated, st.fitting);
    for (const auto& x : s)
        std::printf("  %-62s %9.0f tok/s  %s\n", x.summary.c_str(), x.tokens_per_s,
                    x.reason.c_str());
}

// The command as a user runs it: process start, library loading, YAML, estimate, printing.
void bench_cli(const std::string& tessera, const std::string& project) {
    const std::string cmd = "'" + tessera + "' plan '" + project + "' > /dev/null";
    std::vector<double> ms;
    for (int i = 0; i < 7; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        if (std::system(cmd.c_str()) != 0) {
            std::printf("`%s` failed\n", cmd.c_str());
            return;
        }
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
    }
    std::printf("`tessera plan %s`, whole process through /bin/sh: %.1f ms (median of 7)\n",
                project.c_str(), median_ms(ms));
}

}  // namespace

// plan_latency [TESSERA PROJECT]: with a tessera binary and a project, also times the command.
int main(int argc, char** argv) {
    std::printf(
        "plan_latency: gpt2-large (36 layers, 20 heads, d_model 1280), H200, median of 7\n");
    bench("dp8 x tp2 x pp4, 1f1b, accum 8",
          {"parallel.dp=8", "parallel.tp=2", "parallel.pp=4", "train.grad_accum=8"});
    bench("dp8 x tp2 x pp4, interleaved v3, accum 32",
          {"parallel.dp=8", "parallel.tp=2", "parallel.pp=4", "parallel.schedule=interleaved",
           "parallel.virtual_stages=3", "train.grad_accum=32"});
    bench("dp64, zero 3, accum 4", {"parallel.dp=64", "parallel.zero=3", "train.grad_accum=4"});
    const std::vector<std::string> cuda{"runtime.device=cuda", "runtime.precision=bf16",
                                        "model.seq_len=4096"};
    auto with = [&](std::vector<std::string> v) {
        v.insert(v.end(), cuda.begin(), cuda.end());
        return v;
    };
    bench("llama-3.1-8b tp8, selective, accum 16",
          with({"parallel.tp=8", "parallel.recompute=selective", "train.micro_batch=1",
                "train.grad_accum=16"}),
          "llama-3.1-8b");
    bench("llama-3.1-8b tp2 x pp4, zero 1, accum 16",
          with({"parallel.tp=2", "parallel.pp=4", "parallel.zero=1", "train.micro_batch=1",
                "train.grad_accum=16"}),
          "llama-3.1-8b");
    bench("dp16 x tp4, zero 1", {"parallel.dp=16", "parallel.tp=4", "parallel.zero=1"});
    bench("dp4 x tp4 x pp4, gpipe, accum 64", {"parallel.dp=4", "parallel.tp=4", "parallel.pp=4",
                                               "parallel.schedule=gpipe", "train.grad_accum=64"});
    bench("tp4 x pp4 x dp4, 1f1b, recompute full, offload",
          {"parallel.dp=4", "parallel.tp=4", "parallel.pp=4", "parallel.recompute=full",
           "parallel.offload_activations=true", "train.grad_accum=16"});
    bench_suggest(64, {"parallel.dp=64", "train.micro_batch=8", "train.grad_accum=1"});
    bench_suggest(16, {"parallel.dp=16", "train.micro_batch=8", "train.grad_accum=4"});
    if (argc == 3) bench_cli(argv[1], argv[2]);
    return 0;
}
