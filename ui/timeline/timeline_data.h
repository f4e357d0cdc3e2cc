// Timeline data: turns one step's measured spans (runs.db) into Gantt bars, simulates the ideal
// pipeline schedule of the same plan (schedule_build, unit op times f = 1, B = W = 1) into bars on
// the same time axis, and computes the measured and predicted bubble fractions. No widgets.
#pragma once
#include <QString>
#include <QVector>
#include <optional>
#include <vector>

#include "engine/config/config.h"
#include "engine/parallel/schedule_sim.h"
#include "engine/plan/estimator.h"
#include "engine/telemetry/telemetry.h"

namespace tessera::studio {

// One bar of a Gantt chart. Times are milliseconds from the step's first span.
struct GanttBar {
    int row = 0;  // index into GanttData::rowLabels
    int stage = 0;
    int rank = 0;
    int micro = -1;  // -1 = not tied to a micro-batch (optimizer)
    QString kind;    // forward|backward|recv|send|optimizer|forward_backward|...
    double start_ms = 0, end_ms = 0;
    bool critical = false;  // on the simulated schedule's critical path
    double duration_ms() const { return end_ms - start_ms; }
};

// An idle interval of one row (a pipeline bubble), ms.
struct GanttGap {
    int row = 0;
    double start_ms = 0, end_ms = 0;
};

struct GanttData {
    QVector<QString> rowLabels;  // "stage 0 · rank 0"
    QVector<GanttBar> bars;
    QVector<GanttGap> gaps;  // bubbles (the simulated schedule's; empty for measured data)
    double length_ms = 0;    // the last bar's end
};

// Measured: one row per (stage, rank), sorted by stage then rank.
GanttData timeline_measured_bars(const std::vector<tessera::SpanRecord>& spans);

// Pipeline window (first non-optimizer start to last non-optimizer end), in ms; 0 if none.
double timeline_pipeline_window_ms(const std::vector<tessera::SpanRecord>& spans);

// Ideal schedule of cfg's plan (kind, pp, micro-batches = grad_accum, virtual stages), simulated
// with f = 1, B = W = 1 per chunk (a whole backward 2) and free p2p, scaled so its makespan
// equals window_ms. One row per stage. Throws tessera::Error if the plan has no valid schedule.
GanttData timeline_ideal_bars(const tessera::RunConfig& cfg, double window_ms);

// ---- simulated: the plan's schedule run with real or predicted times (schedule_simulate) ----

// Per-action times from one step's measured spans: for each stage, each rank's mean forward and
// backward span (a single-rank forward_backward span split 1 : 2), the slowest rank's figure;
// every chunk of a stage gets its stage's. Communication waits (recv) are not compute and are
// left out: the simulation has free p2p. nullopt when a stage of the plan has no compute span.
std::optional<tessera::ScheduleTimes> timeline_measured_times(
    const tessera::RunConfig& cfg, const std::vector<tessera::SpanRecord>& spans);
// Predicted per-action times: the estimator's busy time of each rank without its optimizer
// (RankEstimate::compute_s - optimizer_s) over its micro-batches and chunks, a third forward and
// two thirds backward (the estimator's own split), the slowest rank of each stage. Throws
// InputError when the estimator cannot estimate the plan.
tessera::ScheduleTimes timeline_predicted_times(const tessera::RunConfig& cfg,
                                                const tessera::DeviceSpec& dev);
// Why a run's per-layer times (LayerTimeRecord) cannot stand for `plan`'s layers, or "" when
// they can: the model, micro-batch, tensor parallelism, device, precision, each layer's recompute
// policy and activation offload must be the run's. dp, ZeRO, pp, the schedule and the partition
// may differ: those are what the simulation answers.
QString timeline_layer_times_mismatch(const tessera::RunConfig& run,
                                      const tessera::RunConfig& plan);
// The per-action times of `plan`'s schedule from measured per-layer times: each layer's slowest
// rank, summed over the layers of each of the plan's chunks (chunk_layer_range). nullopt when a
// layer of the model has no time.
std::optional<tessera::ScheduleTimes> timeline_layer_schedule_times(
    const tessera::RunConfig& plan, const std::vector<tessera::LayerTimeRecord>& layers);
// The plan's schedule simulated with `t`: one row per stage, bars marked critical, the bubbles
// as gaps. `sim` (optional) receives the simulation itself.
GanttData timeline_simulated_bars(const tessera::RunConfig& cfg, const tessera::ScheduleTimes& t,
                                  tessera::ScheduleSim* sim = nullptr);

// Predicted bubble of cfg's schedule: schedule_bubble_fraction(f = b = w = 1), as the estimator.
double timeline_predicted_bubble(const tessera::RunConfig& cfg);

}  // namespace tessera::studio
