// Plan advice: the answers a user planning a run asks, computed with the estimator (each answer is
// a handful of estimate_plan calls, ~1-30 ms each). What fits (the largest micro-batch and the
// longest sequence for the current plan; the plans that fit a target global batch, ranked by
// tokens/s, each with why it loses to the one above), the step time in parts (compute, exposed
// communication, bubble, offload) for side-by-side candidates, the cheapest recompute/offload
// policy that makes a plan fit, and a pipeline stage made the memory or time outlier by the
// embedding or the head, with the blocks to move. Qt-free: `tessera plan --fits` and the studio's
// Plan page both call it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/plan/estimator.h"
#include "engine/plan/plan_search.h"

namespace tessera {

// The slowest rank's step in parts; the parts add up to step_s.
struct StepBreakdown {
    int rank = 0;
    double compute_s = 0;  // forward, backward (recompute included) and optimizer
    double comm_s = 0;     // exposed communication
    double bubble_s = 0;   // the pipeline's idle time
    double offload_s = 0;  // exposed host copies
    double step_s = 0;
};
StepBreakdown plan_step_breakdown(const PlanEstimate& e);

// ---- what fits the current plan

struct FitLimits {
    int micro_batch = 0;              // largest train.micro_batch that fits (0: not even 1)
    bool micro_batch_capped = false;  // fits at the search's ceiling (kFitMaxMicroBatch)
    int seq_len = 0;                  // longest model.seq_len that fits at the current micro-batch
    bool seq_len_capped = false;      // fits at the search's ceiling (kFitMaxSeqLen)
    int estimates = 0;                // estimate_plan calls made
    std::string note;                 // why a limit was not searched (an MLP has no sequence)
};
constexpr int kFitMaxMicroBatch = 1024;
constexpr int kFitMaxSeqLen = 131072;
// Throws InputError when the plan itself cannot be estimated.
FitLimits plan_fit_limits(const RunConfig& cfg, const DeviceSpec& dev);

// ---- plans for a target global batch

struct RankedPlan {
    PlanSuggestion plan;
    StepBreakdown parts;
    std::string loses_because;  // why it is slower than the plan ranked above it ("" for the first)
};
// The fastest plans on `gpus` devices for `global_batch` samples per step (each layout's best,
// as plan_suggest), fastest first, each with why it loses to the previous one: the part of the
// step (compute, bubble, exposed communication, offload) that grew most, and the memory saver or
// smaller micro-batch it needs. Throws InputError for global_batch < 1.
// `control`: as plan_suggest's (follow the search, stop it: PlanSearchStopped).
std::vector<RankedPlan> plan_rank_for_batch(const RunConfig& base, const DeviceSpec& dev, int gpus,
                                            int64_t global_batch, int top = 5,
                                            PlanSearchControl* control = nullptr);
// Why `slower` is slower than `faster`: the part of the step that grew most per token; with a
// device, also the memory savers or smaller micro-batch the slower layout needs, where the
// estimator shows it would not fit as the faster plan is set.
std::string plan_loss_reason(const PlanSuggestion& faster, const StepBreakdown& fp,
                             const PlanSuggestion& slower, const StepBreakdown& sp,
                             const DeviceSpec* dev = nullptr);

// ---- the cheapest memory policy

struct MemoryPolicy {
    std::vector<std::string> recompute;  // parallel.recompute (1 or pp entries)
    bool offload_activations = false;
    bool offload_optimizer = false;
    std::string label;  // "none", "selective", "full on stage 0", "selective + offload optimizer"
};
struct PolicyAdvice {
    bool current_fits = false;
    bool found = false;       // some policy fits
    MemoryPolicy policy;      // the fastest policy that fits
    double step_s = 0;        // with it
    double plain_step_s = 0;  // with none (no recompute, no offload), fitting or not
    double slowdown = 1;      // step_s / plain_step_s
    int tried = 0;
    std::string text;  // one line for the page and the CLI
};
// Tries none, selective and full (uniform, and on the over-capacity stages only), activation and
// optimizer offload and their combinations, keeps the current plan otherwise, and returns the
// fastest that fits. Throws InputError when the plan cannot be estimated.
PolicyAdvice plan_policy_advice(const RunConfig& cfg, const DeviceSpec& dev);
void plan_policy_apply(RunConfig& cfg, const MemoryPolicy& p);

// ---- stage imbalance

struct StageImbalance {
    bool found = false;
    int stage = -1;                // the outlier pipeline stage
    std::string metric;            // "memory" | "time"
    std::string cause;             // "embedding" | "head" | "embedding and head"
    double value = 0, others = 0;  // the outlier's bytes or seconds, the other stages' mean
    int move_blocks = 0;           // blocks to move off the outlier
    int to_stage = -1;             // onto this neighbour
    std::vector<int> stages;       // the fixed parallel.stages
    double fixed_step_s = 0, step_s = 0;
    int64_t fixed_peak_bytes = 0, peak_bytes = 0;
    std::string text;  // "stage 0 holds the embedding: ... move 2 blocks to stage 1 ..."
};
// For pp > 1 with one chunk per stage: the first or last stage whose peak memory or busy time is
// more than 10% over the other stages' mean, and the move of N blocks to its neighbour that
// lowers the outlier most (memory: the fullest GPU; time: the step), as long as the step gets no
// slower than 2% (memory) and the plan still fits. found false when no such stage or no move
// helps; text says which.
StageImbalance plan_stage_imbalance(const RunConfig& cfg, const DeviceSpec& dev);

}  // namespace tessera
