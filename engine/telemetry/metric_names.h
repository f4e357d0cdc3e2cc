// The telemetry vocabulary: every metric name and run status that writers (the single-rank
// trainer, the rank loop, the launcher) put into runs.db and readers (the studio's pages,
// `tessera runs`, the reports, tests, benches) look up. docs/telemetry.md has the table with units
// and writers.
//
// These strings are on disk: never change a value (every existing runs.db must keep reading the
// same); add a name here and a row in docs/telemetry.md.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "engine/core/memory.h"

namespace tessera {

namespace metric {

// ---- training (rank 0; the loss is summed over the world before it is written) ----
inline constexpr std::string_view train_loss = "train/loss";            // mean over the step
inline constexpr std::string_view train_lr = "train/lr";                // learning rate used
inline constexpr std::string_view train_grad_norm = "train/grad_norm";  // before clipping
// samples consumed / the training set's items (fractional; both data.order values)
inline constexpr std::string_view train_epoch = "train/epoch";
inline constexpr std::string_view val_loss = "val/loss";
inline constexpr std::string_view val_accuracy = "val/accuracy";  // classifiers only, 0..1

// ---- speed ----
inline constexpr std::string_view perf_step_ms = "perf/step_ms";
inline constexpr std::string_view perf_tok_per_s = "perf/tok_per_s";  // targets per second
inline constexpr std::string_view perf_gflops =
    "perf/gflops";                                        // model FLOP/s of the step, whole world
inline constexpr std::string_view perf_mfu = "perf/mfu";  // GPUs, 0..1

// ---- memory: the engine's own accounting (MemoryTracker peaks), every rank ----
// One name per category as well: mem_category_bytes(MemCategory::params) = "mem/params_bytes".
inline constexpr std::string_view mem_total_bytes = "mem/total_bytes";    // peak of the sum
inline constexpr std::string_view mem_device_bytes = "mem/device_bytes";  // ... without host
inline constexpr std::string_view mem_prefix = "mem/";

// ---- the device as its driver sees it (NVML), GPU ranks ----
inline constexpr std::string_view gpu_util_percent = "gpu/util_percent";
inline constexpr std::string_view gpu_memory_used_bytes = "gpu/memory_used_bytes";
inline constexpr std::string_view gpu_power_watts = "gpu/power_watts";
inline constexpr std::string_view gpu_temperature_c = "gpu/temperature_c";
inline constexpr std::string_view gpu_sm_clock_mhz = "gpu/sm_clock_mhz";

// ---- the host (/proc), the first rank of each host (system_metrics.h) ----
inline constexpr std::string_view host_cpu_percent = "host/cpu_percent";  // all cores, 0..100
inline constexpr std::string_view host_memory_used_bytes = "host/memory_used_bytes";

// ---- pipeline and launcher ----
// This rank's idle share (0..1) of its own step's pipeline window. The pipeline's bubble is
// measured from every rank's spans on one time base (engine/telemetry/pipeline_spans.h); files
// before store schema 5 logged this figure as "pipeline/bubble".
inline constexpr std::string_view pipeline_rank_idle = "pipeline/rank_idle";
inline constexpr std::string_view launch_attempt = "launch/attempt";  // rank -1: 1, 2, ...

// "mem/<category>_bytes": the peak of one MemoryTracker category.
std::string mem_category_bytes(MemCategory c);
// The category a name "mem/<category>_bytes" belongs to; nullopt for any other name (including
// mem/total_bytes and mem/device_bytes).
std::optional<MemCategory> mem_category_of(std::string_view name);

}  // namespace metric

// A run's status in runs.db (runs.status, RunEndRecord::status, the launcher's result).
namespace run_status {
inline constexpr std::string_view running = "running";  // until the writer finishes the run
inline constexpr std::string_view completed = "completed";
inline constexpr std::string_view failed = "failed";
inline constexpr std::string_view stopped = "stopped";  // by the user (Ctrl-C, Stop)

inline constexpr bool valid(std::string_view s) {
    return s == running || s == completed || s == failed || s == stopped;
}
// The exit code of a process whose run ended so: 0 completed, 130 stopped (as after Ctrl-C),
// 1 otherwise (`tessera train`, the node launcher).
inline constexpr int exit_code(std::string_view s) {
    return s == completed ? 0 : s == stopped ? 130 : 1;
}
}  // namespace run_status

}  // namespace tessera
