// A runs.db holding one GPU run as the launcher writes it, no GPU needed: 4 ranks (pp 2 x dp 2,
// two per host on hosts "node-a" and "node-b", two ranks sharing each GPU pair's first GPU on
// node-b), 200 steps of loss with a spike at step 120, tokens/s that drop at step 150,
// per-category memory, the driver's figures and the system metrics the ranks sample (GPU
// utilisation, memory, power, temperature, SM clock; host CPU and RAM from each host's first
// rank), and one step's pipeline spans. Used by the Monitor and Timeline page tests.
#pragma once
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"

namespace tessera::fixture {

inline constexpr double kFixGiB = 1024.0 * 1024.0 * 1024.0;

inline const char* gpu_run_yaml() {
    return "model: {preset: gpt-tiny, n_layer: 4, d_model: 64, n_head: 2, seq_len: 32}\n"
           "data: {dataset: brown}\n"
           "train: {steps: 200, micro_batch: 4, grad_accum: 4, eval_every: 0}\n"
           "parallel: {dp: 2, pp: 2, schedule: 1f1b}\n"
           "runtime: {device: cuda, precision: bf16}\n";
}

// Writes project.yaml and runs.db into `dir`; returns the run id. `predicted_tok_per_s` sets the
// level the tokens/s series runs at before its drop (pass the estimator's figure).
inline int64_t write_gpu_run(const std::filesystem::path& dir, double predicted_tok_per_s) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "project.yaml") << gpu_run_yaml();
    RunStore s = RunStore::open((dir / "runs.db").string());
    const double t0 = 1.7e9;
    int64_t id = s.run_begin(RunStartRecord{"gpu-4ranks", gpu_run_yaml(), "node-a", 4, "", t0});
    std::vector<Record> recs;
    const char* hosts[4] = {"node-a", "node-a", "node-b", "node-b"};
    for (int r = 0; r < 4; ++r)
        recs.push_back(DeviceRecord{r, hosts[r], "NVIDIA H200", int64_t(140 * kFixGiB), t0});
    auto put = [&](int64_t step, int rank, std::string_view name, double v, double wall) {
        recs.push_back(MetricRecord{step, rank, std::string(name), v, wall});
    };
    for (int64_t step = 1; step <= 200; ++step) {
        const double wall = t0 + 0.5 * (double)step;
        double loss = 2.0 + 3.0 * std::exp(-step / 40.0) + 0.03 * std::sin(step * 1.3);
        if (step == 120) loss *= 1.8;  // a spike
        put(step, 0, metric::train_loss, loss, wall);
        const double tps = step >= 150 && step < 170
                               ? 0.6 * predicted_tok_per_s
                               : predicted_tok_per_s * (1.0 + 0.02 * std::sin(step * 0.7));
        put(step, 0, metric::perf_tok_per_s, tps, wall);
        if (step % 10 == 0) {
            for (int r = 0; r < 4; ++r) {
                const double act = (r < 2 ? 0.9 : 0.5) * kFixGiB;  // the first stage holds more
                put(step, r, metric::mem_category_bytes(MemCategory::params), 0.3 * kFixGiB, wall);
                put(step, r, metric::mem_category_bytes(MemCategory::grads), 0.3 * kFixGiB, wall);
                put(step, r, metric::mem_category_bytes(MemCategory::optimizer), 0.6 * kFixGiB,
                    wall);
                put(step, r, metric::mem_category_bytes(MemCategory::activations), act, wall);
                put(step, r, metric::mem_category_bytes(MemCategory::context), 0.5 * kFixGiB, wall);
                put(step, r, metric::mem_device_bytes, 1.7 * kFixGiB + act, wall);
                put(step, r, metric::gpu_memory_used_bytes, 2.0 * kFixGiB + act, wall);
            }
        }
        if (step % 4 == 0) {  // the sampler: every 2 s
            for (int r = 0; r < 4; ++r) {
                const double busy = step >= 150 && step < 170 ? 55 : 92;
                put(step, r, metric::gpu_util_percent, busy + 3 * std::sin(step * 0.1 + r), wall);
                put(step, r, metric::gpu_memory_used_bytes,
                    2.0 * kFixGiB + (r < 2 ? 0.9 : 0.5) * kFixGiB, wall);
                put(step, r, metric::gpu_power_watts, 420 + 150 * busy / 100 + 10 * r, wall);
                put(step, r, metric::gpu_temperature_c, 45 + 0.1 * (double)step / 4 + 2 * r, wall);
                put(step, r, metric::gpu_sm_clock_mhz, busy > 80 ? 1980 : 1755, wall);
            }
            for (int r : {0, 2}) {  // each host's first rank
                put(step, r, metric::host_cpu_percent, 18 + 4 * std::sin(step * 0.05 + r), wall);
                put(step, r, metric::host_memory_used_bytes, (r == 0 ? 40.0 : 36.0) * kFixGiB,
                    wall);
            }
        }
    }
    // the last step's pipeline: stage 0 (ranks 0, 1) forward 1 ms / backward 2 ms, stage 1
    // (ranks 2, 3) forward 1.5 / backward 3 ms, 1F1B with 4 micro-batches, as measured
    const double st = 100.0;  // spans: seconds since the run started
    struct A {
        int stage, micro;
        bool fwd;
        double start_ms, end_ms;
    };
    const std::vector<A> acts = {
        {0, 0, true, 0, 1},        {0, 1, true, 1, 2},       {1, 0, true, 1.1, 2.6},
        {1, 0, false, 2.6, 5.6},   {0, 0, false, 5.7, 7.7},  {0, 2, true, 7.7, 8.7},
        {1, 1, true, 5.6, 7.1},    {1, 1, false, 7.1, 10.1}, {0, 1, false, 10.2, 12.2},
        {0, 3, true, 12.2, 13.2},  {1, 2, true, 10.1, 11.6}, {1, 2, false, 11.6, 14.6},
        {0, 2, false, 14.7, 16.7}, {1, 3, true, 14.6, 16.1}, {1, 3, false, 16.1, 19.1},
        {0, 3, false, 19.2, 21.2}};
    for (int dp = 0; dp < 2; ++dp)
        for (const A& a : acts) {
            const int rank = a.stage * 2 + dp;
            recs.push_back(SpanRecord{199, rank, a.stage, a.micro, a.fwd ? "forward" : "backward",
                                      st + a.start_ms * 1e-3, st + a.end_ms * 1e-3});
        }
    recs.push_back(RunEndRecord{std::string(run_status::completed), "", 200, t0 + 101});
    s.append(id, recs);
    return id;
}

}  // namespace tessera::fixture
