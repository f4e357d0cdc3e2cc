// Pipeline schedules as data: a pure function of (kind, pp, micro-batches, virtual stages) gives,
// for every stage, the ordered list of forward / backward actions on (micro-batch, model chunk).
// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", 2023) splits each backward into B (the
// input gradient, on the critical path: sent to the previous stage) and W (the weight gradients,
// which nothing downstream waits for) and places the W's into what 1F1B leaves idle.
// The runtime executes it (receiving inputs before and sending outputs after each action), the
// estimator simulates it with predicted op times, and the studio draws it: one source of truth.
#pragma once
#include <string>
#include <vector>

namespace tessera {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zb_h1 };

struct PipeAction {
    // backward: the whole backward; backward_input (B) then backward_weight (W): the same work
    // split in two (zb-h1), the W of a micro-batch after its B
    enum Kind { forward, backward, backward_input, backward_weight } kind;
    int micro;  // micro-batch 0..m-1
    int chunk;  // this stage's model chunk 0..v-1 (global chunk = chunk * pp + stage)
    bool operator==(const PipeAction&) const = default;
};

using StageSchedule = std::vector<PipeAction>;

ScheduleKind schedule_kind_parse(const std::string& s);  // gpipe | 1f1b | interleaved | zb-h1
const char* schedule_kind_name(ScheduleKind k);

// One list per stage. Requirements (checked, Error otherwise): pp >= 1, micro >= 1, virtual
// stages v >= 1; interleaved needs v >= 2 and micro % pp == 0; gpipe, 1f1b and zb-h1 need v == 1.
std::vector<StageSchedule> schedule_build(ScheduleKind kind, int pp, int micro, int virtual_stages);

// Simulates the schedule with unit-free op times per chunk (forward f, input gradient b, weight
// gradients w: a whole backward costs b + w; p2p free) and returns the bubble fraction: idle
// time / (stages × makespan). Used by the estimator, the studio and tests.
double schedule_bubble_fraction(const std::vector<StageSchedule>& s, int pp, double f, double b,
                                double w = 0);

// ZB-H1's bubble in theory for m >= pp micro-batches: every stage idles (pp − 1)(f + b − w)
// (w <= f + b), against (pp − 1)(f + b + w) for 1F1B; the fraction of the makespan
// m(f + b + w) + (pp − 1)(f + b − w).
double schedule_zb_h1_bubble_theory(int pp, int m, double f, double b, double w);

}  // namespace tessera
