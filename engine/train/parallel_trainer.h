// One rank of a parallel training job (dp × tp × pp processes): builds this rank's pipeline
// chunks of tensor-parallel GPT layers, runs the pipeline schedule over the step's micro-batches,
// reduces gradients over data parallel (ZeRO 0-3), steps AdamW on its slices, and streams
// telemetry (metrics, per-rank memory, timeline spans) to the launcher. Checkpoints hold gathered
// full tensors under Tessera's names, so any plan can resume them. One rank (1x1x1) is this loop
// too.
#pragma once
#include <functional>
#include <iosfwd>

#include "engine/config/config.h"
#include "engine/parallel/comm.h"
#include "engine/telemetry/telemetry.h"
#include "engine/train/trainer.h"

namespace tessera {

// Which blocks each of the pp × virtual_stages model chunks holds: from parallel.stages, or the
// estimator's compute-balanced split (plan_blocks_per_chunk). Chunk 0 also holds the embedding,
// the last chunk the head.
std::vector<int> pipeline_blocks_per_chunk(const RunConfig& cfg);

// Builds the rank, loads its starting weights, then asks open_sink for where its telemetry goes
// and trains: a bad config, data, checkpoint or weights file fails before open_sink is called
// (so a run that never started records nothing). *steps_done, where given, follows the steps
// completed (resumed ones included) as they complete: how far a run got when it throws.
TrainResult parallel_train_rank(const RunConfig& cfg, ProcessGroups& groups,
                                const std::function<TelemetrySink&()>& open_sink,
                                const TrainOptions& opts, std::ostream& out,
                                int64_t* steps_done = nullptr);

}  // namespace tessera
