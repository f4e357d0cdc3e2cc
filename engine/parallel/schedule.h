// Pipeline schedules as data: a pure function of (kind, pp, micro-batches, virtual stages) gives,
// for every stage, the ordered list of forward / backward actions on (micro-batch, model chunk).
// The runtime executes it (receiving inputs before and sending outputs after each action), the
// estimator simulates it with predicted op times, and the studio draws it: one source of truth.
#pragma once
#include <string>
#include <vector>

namespace tessera {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved };

struct PipeAction {
    enum Kind { forward, backward } kind;
    int micro;  // micro-batch 0..m-1
    int chunk;  // this stage's model chunk 0..v-1 (global chunk = chunk * pp + stage)
    bool operator==(const PipeAction&) const = default;
};

using StageSchedule = std::vector<PipeAction>;

ScheduleKind schedule_kind_parse(const std::string& s);  // gpipe | 1f1b | interleaved
const char* schedule_kind_name(ScheduleKind k);

// One list per stage. Requirements (checked, Error otherwise): pp >= 1, micro >= 1, virtual
// stages v >= 1; interleaved needs v >= 2 and micro % pp == 0; gpipe and 1f1b need v == 1.
std::vector<StageSchedule> schedule_build(ScheduleKind kind, int pp, int micro, int virtual_stages);

// Simulates the schedule with unit-free op times (forward f, backward b per chunk; p2p free) and
// returns the bubble fraction: idle time / (stages × makespan). Used by the estimator and tests.
double schedule_bubble_fraction(const std::vector<StageSchedule>& s, int pp, double f, double b);

}  // namespace tessera
