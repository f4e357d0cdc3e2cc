// What a training run is asked (TrainOptions) and what it reports (TrainResult), and the stop
// request a signal handler makes. Every run, one rank or many, trains through the rank loop
// (parallel_trainer.h): a single rank is its 1x1x1 case.
#pragma once
#include <cstdint>
#include <string>

namespace tessera {

struct TrainOptions {
    std::string db_path;      // "" = the config's log.db
    bool resume = false;      // continue from the newest checkpoint in checkpoint.dir
    std::string resume_from;  // or from this checkpoint directory
    // This process samples its host's CPU and RAM (system_metrics.h): the first rank of each
    // host (TESSERA_LOCAL_RANK 0), so a host has one series; every GPU rank samples its GPU.
    bool host_metrics = true;
};

struct TrainResult {
    int64_t steps_done = 0;  // steps completed (including resumed ones)
    double last_train_loss = 0;
    double last_val_loss = -1;  // -1 when never evaluated
    double last_val_accuracy = -1;
    std::string status;          // completed | stopped | failed
    std::string checkpoint_dir;  // last checkpoint written ("" none)
};

// Asks the training loop in this process to stop after the current step (SIGINT/SIGTERM
// handlers; every rank votes in the step's all-reduce, so all ranks stop after the same step).
void train_request_stop();
bool train_stop_requested();

}  // namespace tessera
