// The single-process training loop: data -> micro-batches (gradient accumulation) -> AdamW ->
// telemetry (metrics, memory by category, spans) -> run store, with periodic evaluation and
// atomic checkpoints; bit-exact resume on the CPU.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>

#include "engine/config/config.h"

namespace tessera {

struct TrainOptions {
    std::string db_path;       // "" = the config's log.db
    bool resume = false;       // continue from the newest checkpoint in checkpoint.dir
    std::string resume_from;   // or from this checkpoint directory
    std::ostream* out = nullptr;  // per-step lines (null = std::cout)
    // This process samples its host's CPU and RAM (system_metrics.h): the first rank of each
    // host (TESSERA_LOCAL_RANK 0), so a host has one series; every GPU rank samples its GPU.
    bool host_metrics = true;
};

struct TrainResult {
    int64_t run_id = 0;
    int64_t steps_done = 0;       // steps completed (including resumed ones)
    double last_train_loss = 0;
    double last_val_loss = -1;    // -1 when never evaluated
    double last_val_accuracy = -1;
    std::string status;           // completed | stopped | failed
    std::string checkpoint_dir;   // last checkpoint written ("" none)
};

TrainResult train_run(const RunConfig& cfg, const TrainOptions& opts);

// Asks a running train_run (this process) to stop after the current step (SIGINT handler).
void train_request_stop();
bool train_stop_requested();

}  // namespace tessera
