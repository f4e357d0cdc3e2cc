// Synthetic runs written through engine/store (Qt-free, header-only): the 1,000-run runs.db of
// bench/make_runs_db and bench/compare_scale, and the small stores of the Compare page's tests.
// Each run has a real, parseable config (lr, seed, dp and micro-batch vary), a decaying train loss
// with noise, val loss every eval_every steps, tokens/s and peak memory, wall time 0.5 s a step.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"

namespace tessera::bench {

struct SyntheticRun {
    std::string name;
    double lr = 1e-3;
    int seed = 0;
    int dp = 1;
    int micro_batch = 4;
    int64_t steps = 100;
    int eval_every = 10;
    double start_time = 1.7e9;
};

inline std::string synthetic_config(const SyntheticRun& r) {
    char buf[512];
    std::snprintf(
        buf, sizeof buf,
        "name: %s\n"
        "model: {preset: gpt-tiny, n_layer: 2, n_head: 2, d_model: 64, seq_len: 32}\n"
        "data: {dataset: brown}\n"
        "train: {steps: %lld, micro_batch: %d, lr: %g, seed: %d, eval_every: %d, eval_steps: 2}\n"
        "parallel: {dp: %d}\n",
        r.name.c_str(), (long long)r.steps, r.micro_batch, r.lr, r.seed, r.eval_every, r.dp);
    return buf;
}

// Appends one completed run; returns its id. Loss: 2 + 3 e^{-3 step/steps}, scaled by how far lr is
// from 1e-3 and by the seed, plus seed-dependent noise.
inline int64_t synthetic_run_add(RunStore& store, const SyntheticRun& r) {
    const int64_t id = store.run_begin(
        RunStartRecord{r.name, synthetic_config(r), "localhost", r.dp, "", r.start_time});
    std::mt19937 rng(uint32_t(r.seed * 7919 + 17));
    std::normal_distribution<double> noise(0, 0.04);
    // seeds spread the curves a little (+-3 %), as real seeds do
    const double lr_penalty =
        (1 + 0.2 * std::abs(std::log10(r.lr / 1e-3))) * (1 + 0.015 * ((r.seed % 5) - 2));
    const double tok = 2000.0 * r.dp * (1 + 0.05 * (r.seed % 3));
    std::vector<Record> batch;
    batch.reserve(8192);
    auto flush = [&] {
        store.append(id, batch);
        batch.clear();
    };
    for (int64_t s = 1; s <= r.steps; ++s) {
        const double wall = r.start_time + 0.5 * double(s);
        const double loss = (2 + 3 * std::exp(-3.0 * double(s) / double(r.steps))) * lr_penalty;
        batch.push_back(
            MetricRecord{s, 0, std::string(metric::train_loss), loss + noise(rng), wall});
        batch.push_back(
            MetricRecord{s, 0, std::string(metric::perf_tok_per_s), tok * (1 + noise(rng)), wall});
        if (s % r.eval_every == 0 || s == r.steps)
            batch.push_back(MetricRecord{s, 0, std::string(metric::val_loss), loss + 0.05, wall});
        if (s == 1)
            batch.push_back(
                MetricRecord{s, 0, std::string(metric::mem_total_bytes), 1.5e9 / r.dp, wall});
        if (batch.size() >= 8000) flush();
    }
    batch.push_back(RunEndRecord{std::string(run_status::completed), "", r.steps,
                                 r.start_time + 0.5 * double(r.steps)});
    flush();
    return id;
}

}  // namespace tessera::bench
