// Pipeline schedule simulation with times, critical path and bubbles. See schedule_sim.h.
#include "engine/parallel/schedule_sim.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include "engine/core/error.h"

namespace tessera {

ScheduleSim schedule_simulate(const std::vector<StageSchedule>& sched, int pp,
                              const ScheduleTimes& t) {
    TS_CHECK(pp >= 1 && (int)sched.size() == pp, "schedule_simulate: ", sched.size(),
             " stage lists for pp ", pp);
    int v = 1;
    for (const auto& s : sched)
        for (const auto& a : s) v = std::max(v, a.chunk + 1);
    const int G = v * pp;
    TS_CHECK((int)t.forward_s.size() == G && (int)t.backward_s.size() == G &&
                 (t.weight_s.empty() || (int)t.weight_s.size() == G),
             "schedule_simulate: times for ", t.forward_s.size(), " / ", t.backward_s.size(), " / ",
             t.weight_s.size(), " chunks; the schedule has ", G);
    ScheduleSim out;
    std::map<std::tuple<int, int, int>, int> done;  // (kind, global chunk, micro) -> action index
    std::vector<size_t> pos((size_t)pp, 0);
    std::vector<int> last_on((size_t)pp, -1);  // the stage's previous action
    size_t remaining = 0;
    for (const auto& s : sched) remaining += s.size();
    while (remaining > 0) {
        bool progressed = false;
        for (int st = 0; st < pp; ++st) {
            while (pos[(size_t)st] < sched[(size_t)st].size()) {
                const PipeAction& a = sched[(size_t)st][pos[(size_t)st]];
                const int g = a.chunk * pp + st;
                // the input: forward of g-1, or backward of g+1 (the last chunk: its own forward)
                int kind = 0, gg = -1;
                if (a.kind == PipeAction::forward) {
                    if (g > 0) kind = 0, gg = g - 1;
                } else if (a.kind == PipeAction::backward_weight) {
                    kind = 1, gg = g;  // zb-h1's W: after its own B
                } else {
                    if (g < G - 1)
                        kind = 1, gg = g + 1;
                    else
                        kind = 0, gg = g;
                }
                int producer = -1;
                double ready = 0;
                if (gg >= 0) {
                    auto it = done.find({kind, gg, a.micro});
                    if (it == done.end()) break;  // waits for another stage
                    producer = it->second;
                    const SimAction& p = out.actions[(size_t)producer];
                    ready = p.end_s + (p.stage != st ? t.p2p_s : 0.0);
                }
                const int prev = last_on[(size_t)st];
                const double free_at = prev >= 0 ? out.actions[(size_t)prev].end_s : 0.0;
                SimAction s;
                s.stage = st, s.micro = a.micro, s.chunk = a.chunk, s.kind = a.kind;
                s.start_s = std::max(ready, free_at);
                // the binding wait: the input when it came last (ties: the input), else the stage
                s.waited_for = producer >= 0 && ready >= free_at ? producer : prev;
                if (s.start_s == 0) s.waited_for = -1;
                // zb-h1's B and W share a whole backward (weight_of: W's part)
                const double bwd = t.backward_s[(size_t)g], w = t.weight_of(g);
                s.end_s = s.start_s + (a.kind == PipeAction::forward ? t.forward_s[(size_t)g]
                                       : a.kind == PipeAction::backward_input  ? bwd - w
                                       : a.kind == PipeAction::backward_weight ? w
                                                                               : bwd);
                const int idx = (int)out.actions.size();
                out.actions.push_back(s);
                const int done_kind = a.kind == PipeAction::forward           ? 0
                                      : a.kind == PipeAction::backward_weight ? 2
                                                                              : 1;
                done[{done_kind, g, a.micro}] = idx;
                last_on[(size_t)st] = idx;
                ++pos[(size_t)st];
                --remaining;
                progressed = true;
            }
        }
        TS_CHECK(progressed, "schedule_simulate: the schedule deadlocks (", remaining,
                 " actions left)");
    }
    // critical path: back from the action that ends last
    int last = -1;
    for (size_t i = 0; i < out.actions.size(); ++i) {
        out.makespan_s = std::max(out.makespan_s, out.actions[i].end_s);
        if (last < 0 || out.actions[i].end_s > out.actions[(size_t)last].end_s) last = (int)i;
    }
    for (int i = last; i >= 0; i = out.actions[(size_t)i].waited_for) {
        out.actions[(size_t)i].critical = true;
        out.critical_busy_s += out.actions[(size_t)i].end_s - out.actions[(size_t)i].start_s;
    }
    // bubbles: each stage's idle intervals inside [0, makespan]
    double idle = 0;
    for (int st = 0; st < pp; ++st) {
        std::vector<std::pair<double, double>> busy;
        for (const SimAction& a : out.actions)
            if (a.stage == st) busy.emplace_back(a.start_s, a.end_s);
        std::sort(busy.begin(), busy.end());
        double at = 0;
        for (auto [b0, b1] : busy) {
            if (b0 > at) out.bubbles.push_back({st, at, b0}), idle += b0 - at;
            at = std::max(at, b1);
        }
        if (out.makespan_s > at)
            out.bubbles.push_back({st, at, out.makespan_s}), idle += out.makespan_s - at;
    }
    out.bubble_fraction = out.makespan_s > 0 ? idle / (pp * out.makespan_s) : 0.0;
    return out;
}

std::optional<ScheduleTimes> schedule_times_measured(const std::vector<SpanRecord>& spans, int pp,
                                                     int v) {
    // (stage, rank) -> {forward sum, forward n, backward sum, backward n, W sum}, seconds
    std::map<std::pair<int, int>, std::array<double, 5>> acc;
    for (const auto& s : spans) {
        const double d = s.end_s - s.start_s;
        auto& a = acc[{s.stage, s.rank}];
        if (s.kind == "forward")
            a[0] += d, a[1] += 1;
        else if (s.kind == "backward" || s.kind == "backward_input")
            a[2] += d, a[3] += 1;
        else if (s.kind == "backward_weight")
            a[2] += d, a[4] += d;  // zb-h1: B + W make one backward
        else if (s.kind == "forward_backward")
            a[0] += d / 3, a[1] += 1, a[2] += 2 * d / 3, a[3] += 1;
    }
    std::vector<double> f((size_t)pp, -1), b((size_t)pp, -1), w((size_t)pp, 0);
    for (const auto& [key, a] : acc) {
        const int st = key.first;
        if (st < 0 || st >= pp || a[1] == 0 || a[3] == 0) continue;
        f[(size_t)st] = std::max(f[(size_t)st], a[0] / a[1]);
        if (a[2] / a[3] > b[(size_t)st]) b[(size_t)st] = a[2] / a[3], w[(size_t)st] = a[4] / a[3];
    }
    ScheduleTimes t;
    for (int g = 0; g < pp * v; ++g) {
        const int st = g % pp;
        if (f[(size_t)st] < 0 || b[(size_t)st] < 0) return std::nullopt;
        t.forward_s.push_back(f[(size_t)st]);
        t.backward_s.push_back(b[(size_t)st]);
        t.weight_s.push_back(w[(size_t)st]);
    }
    return t;
}

}  // namespace tessera
