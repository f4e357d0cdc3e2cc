// Plan search: the fastest plans for a model on `gpus` devices. Enumerates dp x tp x pp
// factorizations with ZeRO, uniform recompute, offload, micro-batch and schedule choices, keeping
// the global batch (micro_batch x grad_accum x dp) of the base config; estimates each with
// estimate_plan, keeps those that fit and ranks them by predicted tokens/s. Qt-free: the studio's
// "Suggest a plan" and bench/plan_latency call it.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/plan/estimator.h"

namespace tessera {

struct PlanSuggestion {
    RunConfig config;  // the base config with parallel.* and train.micro_batch/grad_accum set
    PlanEstimate estimate;
    double tokens_per_s = 0;
    int64_t headroom_bytes = 0;  // capacity minus the fullest GPU's device peak
    std::string summary;         // "dp8 x tp2 x pp4 | 1f1b | zero 1 | recompute none | mb 4 x 16"
    std::string reason;          // why this plan, from the numbers
};

struct PlanSearchStats {
    int candidates = 0;  // configurations considered
    int estimated = 0;   // estimate_plan calls
    int fitting = 0;
};

// Lets another thread follow a search and stop it: `total` layouts, `done` searched so far;
// setting `stop` makes the search skip the layouts not begun and throw PlanSearchStopped.
struct PlanSearchControl {
    std::atomic<bool> stop{false};
    std::atomic<int> done{0}, total{0};
};
struct PlanSearchStopped : Error {
    PlanSearchStopped() : Error("plan search stopped") {}
};

// The best `top` plans, one per (dp, tp, pp, schedule) layout, fastest first. Empty when nothing
// fits. Throws InputError for gpus < 1 or a model it cannot estimate (the MLP preset).
std::vector<PlanSuggestion> plan_suggest(const RunConfig& base, const DeviceSpec& dev, int gpus,
                                         int top = 5, PlanSearchStats* stats = nullptr,
                                         PlanSearchControl* control = nullptr);

// "dp8 x tp2 x pp4 | 1f1b | zero 1 | recompute none | mb 4 x 16" for any config.
std::string plan_summary(const RunConfig& cfg);

}  // namespace tessera
