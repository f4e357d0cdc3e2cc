// Alerts over a run's metric series, the one rule the studio's Monitor page and any other reader
// use: loss spikes and non-finite losses (with the step and the rank that saw them first), and
// throughput below the plan's prediction (with the step it started). Pure functions of the rows;
// the tolerances are parameters with the defaults stated below (tests/store/run_alerts_test.cpp
// checks each on synthetic series).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

// One row of a metric series as runs.db holds it (RunStore::metrics gives these fields).
struct AlertPoint {
    int64_t step = 0;
    int rank = 0;
    double value = 0;
    double wall_time = 0;
};

struct LossAlert {
    enum class Kind { spike, non_finite };
    Kind kind = Kind::spike;
    int64_t step = 0;
    int rank = 0;         // the rank that saw it first (earliest wall time; ties: lowest rank)
    double value = 0;     // the loss at that step (NaN / inf for non_finite)
    double baseline = 0;  // the median of the window before it (spike; NaN when no history)
};

// A spike: a finite loss above the median of the previous `window` finite, unflagged losses by
// more than both `mad_k` robust standard deviations (1.4826 x the median absolute deviation) and
// `rel` of the median. Needs `min_history` earlier points. Consecutive flagged steps are one
// episode: only its first step is reported (and the flagged values stay out of the baseline, so
// a long plateau after a jump is reported once, then becomes the baseline after `window` steps).
// Defaults: window 20, mad_k 6, rel 0.25 (a quarter above the median), min_history 5.
struct LossSpikeRule {
    int window = 20;
    double mad_k = 6.0;
    double rel = 0.25;
    int min_history = 5;
};

// Rows of train/loss, any order, possibly several ranks per step: a step's value is the one seen
// first. A non-finite loss is always reported (each such step once).
std::vector<LossAlert> alerts_loss(const std::vector<AlertPoint>& rows,
                                   const LossSpikeRule& rule = {});

// Throughput below the prediction: `sustain` consecutive points below (1 - tol) x predicted,
// after skipping the first `warmup` points (start-up: allocation, first kernels, caches). Reports
// the first step of each episode; an episode ends at a point at or above the threshold.
// Defaults: tol 0.2 (20 % below), sustain 3, warmup 3.
struct ThroughputRule {
    double tol = 0.2;
    int sustain = 3;
    int warmup = 3;
};
struct ThroughputAlert {
    int64_t step = 0;      // the first point of the episode
    double tok_per_s = 0;  // the value at that step
    double predicted = 0;
    int64_t steps_below = 0;  // points in the episode
};
// Rows of perf/tok_per_s (one rank); nothing when predicted_tok_per_s <= 0 or not finite.
std::vector<ThroughputAlert> alerts_throughput(const std::vector<AlertPoint>& rows,
                                               double predicted_tok_per_s,
                                               const ThroughputRule& rule = {});

// One line for a person: "step 120: loss spike 4.1 (median 2.3), first seen on rank 0".
std::string alert_describe(const LossAlert& a);
std::string alert_describe(const ThroughputAlert& a);

}  // namespace tessera
