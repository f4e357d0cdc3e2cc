#include "engine/parallel/schedule.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/parallel/schedule_sim.h"

namespace tessera {

ScheduleKind schedule_kind_parse(const std::string& s) {
    if (s == "gpipe") return ScheduleKind::gpipe;
    if (s == "1f1b") return ScheduleKind::one_f_one_b;
    if (s == "interleaved") return ScheduleKind::interleaved;
    if (s == "zb-h1") return ScheduleKind::zb_h1;
    throw InputError(
        str_cat("schedule: expected gpipe, 1f1b, interleaved or zb-h1, found '", s, "'"));
}

const char* schedule_kind_name(ScheduleKind k) {
    switch (k) {
        case ScheduleKind::gpipe:
            return "gpipe";
        case ScheduleKind::one_f_one_b:
            return "1f1b";
        case ScheduleKind::interleaved:
            return "interleaved";
        case ScheduleKind::zb_h1:
            return "zb-h1";
    }
    return "?";
}

namespace {

StageSchedule gpipe_stage(int m) {
    StageSchedule s;
    for (int i = 0; i < m; ++i) s.push_back({PipeAction::forward, i, 0});
    for (int i = 0; i < m; ++i) s.push_back({PipeAction::backward, i, 0});
    return s;
}

StageSchedule one_f_one_b_stage(int pp, int stage, int m) {
    StageSchedule s;
    int warmup = std::min(pp - stage - 1, m);
    int f = 0, b = 0;
    for (; f < warmup; ++f) s.push_back({PipeAction::forward, f, 0});
    while (f < m) {  // steady state: one forward, one backward
        s.push_back({PipeAction::forward, f++, 0});
        s.push_back({PipeAction::backward, b++, 0});
    }
    while (b < m) s.push_back({PipeAction::backward, b++, 0});
    return s;
}

// Megatron-LM's interleaved 1F1B: virtual step k maps to (micro-batch, chunk); forwards walk the
// chunks upwards in groups of pp micro-batches, backwards walk them downwards.
StageSchedule interleaved_stage(int pp, int stage, int m, int v) {
    const int total = m * v;
    auto micro_of = [&](int k) { return (k / (pp * v)) * pp + k % pp; };
    auto fchunk = [&](int k) { return (k / pp) % v; };
    auto bchunk = [&](int k) { return v - 1 - (k / pp) % v; };
    int warmup = std::min(total, (pp - stage - 1) * 2 + (v - 1) * pp);
    StageSchedule s;
    int f = 0, b = 0;
    for (; f < warmup; ++f) s.push_back({PipeAction::forward, micro_of(f), fchunk(f)});
    while (f < total) {
        s.push_back({PipeAction::forward, micro_of(f), fchunk(f)});
        ++f;
        s.push_back({PipeAction::backward, micro_of(b), bchunk(b)});
        ++b;
    }
    for (; b < total; ++b) s.push_back({PipeAction::backward, micro_of(b), bchunk(b)});
    return s;
}

// ZB-H1: 1F1B's order with each backward split into B and W. Stage s runs min(pp − s, m)
// warm-up forwards, then per micro-batch j: B j, the W of micro-batch j − s (stage s defers s
// W's, which later fill the cool-down, where 1F1B's stage s idles), the next forward; the
// deferred W's close the step. A stage holds at most pp micro-batches' activations (stage 0's
// 1F1B peak); after its B a micro-batch keeps only what its W reads. With unit times
// f = b = w every stage idles pp − 1 units for m >= pp (schedule_zb_h1_bubble_theory).
StageSchedule zb_h1_stage(int pp, int stage, int m) {
    StageSchedule s;
    const int warmup = std::min(pp - stage, m);
    int f = 0, w = 0;
    for (; f < warmup; ++f) s.push_back({PipeAction::forward, f, 0});
    for (int b = 0; b < m; ++b) {
        s.push_back({PipeAction::backward_input, b, 0});
        if (b >= stage) s.push_back({PipeAction::backward_weight, w++, 0});
        if (f < m) s.push_back({PipeAction::forward, f++, 0});
    }
    while (w < m) s.push_back({PipeAction::backward_weight, w++, 0});
    return s;
}

}  // namespace

std::vector<StageSchedule> schedule_build(ScheduleKind kind, int pp, int m, int v) {
    TS_CHECK(pp >= 1 && m >= 1 && v >= 1,
             "schedule needs pp, micro-batches and virtual stages >= 1");
    if (kind == ScheduleKind::interleaved) {
        if (v < 2) throw InputError("the interleaved schedule needs virtual_stages >= 2");
        if (m % pp != 0)
            throw InputError(str_cat("the interleaved schedule needs micro-batches (", m,
                                     ") divisible by pp (", pp, ")"));
    } else if (v != 1) {
        throw InputError(str_cat(schedule_kind_name(kind),
                                 " runs one model chunk per stage "
                                 "(virtual_stages 1), found ",
                                 v));
    }
    std::vector<StageSchedule> out;
    for (int s = 0; s < pp; ++s) {
        switch (kind) {
            case ScheduleKind::gpipe:
                out.push_back(gpipe_stage(m));
                break;
            case ScheduleKind::one_f_one_b:
                out.push_back(one_f_one_b_stage(pp, s, m));
                break;
            case ScheduleKind::interleaved:
                out.push_back(interleaved_stage(pp, s, m, v));
                break;
            case ScheduleKind::zb_h1:
                out.push_back(zb_h1_stage(pp, s, m));
                break;
        }
    }
    return out;
}

double schedule_zb_h1_bubble_theory(int pp, int m, double f, double b, double w) {
    const double idle = (pp - 1) * (f + b - w);
    return idle / (m * (f + b + w) + idle);
}

double schedule_bubble_fraction(const std::vector<StageSchedule>& sched, int pp, double f, double b,
                                double w) {
    int v = 1;
    for (const auto& s : sched)
        for (const auto& a : s) v = std::max(v, a.chunk + 1);
    ScheduleTimes t;
    const size_t chunks = size_t(v) * size_t(pp);
    t.forward_s.assign(chunks, f);
    t.backward_s.assign(chunks, b + w);
    t.weight_s.assign(chunks, w);
    return schedule_simulate(sched, pp, t).bubble_fraction;
}

}  // namespace tessera
