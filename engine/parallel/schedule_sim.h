// A pipeline schedule (schedule.h) simulated with per-chunk forward and backward times: when
// each action runs on its stage, the critical path (the chain of actions, each waiting on the one
// before it on its stage or on its input from a neighbour, that sets the makespan) and the
// bubbles (each stage's idle intervals inside the makespan). The one simulator of schedules: the
// studio's Timeline page draws it from a run's measured times, the estimator's predicted ones or
// unit times; schedule_bubble_fraction is it with the same times for every chunk.
#pragma once
#include <optional>
#include <vector>

#include "engine/parallel/schedule.h"
#include "engine/telemetry/telemetry.h"

namespace tessera {

// Times of one action (one micro-batch through one model chunk), seconds, per global chunk
// g = chunk * pp + stage (size pp * v). p2p_s: the transfer between two chunks on different
// stages, added before the receiving action may start.
struct ScheduleTimes {
    std::vector<double> forward_s, backward_s;
    double p2p_s = 0;
    // A split backward (zb-h1): W's part of backward_s per global chunk, B the rest; when empty,
    // half of every chunk's backward_s.
    std::vector<double> weight_s;
    double weight_of(int g) const {
        return weight_s.empty() ? backward_s[(size_t)g] / 2 : weight_s[(size_t)g];
    }
};

struct SimAction {
    int stage = 0, micro = 0, chunk = 0;
    PipeAction::Kind kind = PipeAction::forward;
    double start_s = 0, end_s = 0;
    // What made it start when it did: the action it waited for (an index into
    // ScheduleSim::actions), either its stage's previous action or its input's producer; -1 for
    // an action that started at 0.
    int waited_for = -1;
    bool critical = false;
};

struct SimGap {
    int stage = 0;
    double start_s = 0, end_s = 0;
};

struct ScheduleSim {
    std::vector<SimAction> actions;  // in the order they were placed
    std::vector<SimGap> bubbles;  // idle intervals per stage, before, between and after its actions
    double makespan_s = 0;
    double bubble_fraction = 0;  // idle / (stages x makespan)
    double critical_busy_s = 0;  // busy time along the critical path (makespan less its p2p waits)
};

// Throws Error when times have the wrong size or the schedule deadlocks.
ScheduleSim schedule_simulate(const std::vector<StageSchedule>& sched, int pp,
                              const ScheduleTimes& t);

// A run's times from its spans (SpanRecord: one step's or several): per stage, the mean forward
// and the mean backward (B + W under zb-h1, with W in weight_s) per micro-batch and chunk, the
// slowest of the stage's ranks; each global chunk of the stage gets them. nullopt when a stage
// has no forward or no backward span.
std::optional<ScheduleTimes> schedule_times_measured(const std::vector<SpanRecord>& spans, int pp,
                                                     int v);

}  // namespace tessera
