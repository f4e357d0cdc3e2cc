// Timeline data: measured spans -> bars, the ideal schedule simulated -> bars, bubble fractions.
#include "ui/timeline/timeline_data.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "engine/core/error.h"
#include "engine/parallel/schedule.h"
#include "engine/telemetry/pipeline_spans.h"

namespace tessera::studio {


// ------------------------------------------------------------------------------------------------
// measured

GanttData timeline_measured_bars(const std::vector<tessera::SpanRecord>& spans) {
    GanttData g;
    if (spans.empty()) return g;
    double t0 = std::numeric_limits<double>::infinity();
    std::map<std::pair<int, int>, int> rows;  // (stage, rank) -> row
    for (const auto& s : spans) {
        t0 = std::min(t0, s.start_s);
        rows.emplace(std::make_pair(s.stage, s.rank), 0);
    }
    for (auto& [key, row] : rows) {
        row = g.rowLabels.size();
        g.rowLabels.push_back(QString("stage %1 · rank %2").arg(key.first).arg(key.second));
    }
    for (const auto& s : spans) {
        GanttBar b;
        b.row = rows[{s.stage, s.rank}];
        b.stage = s.stage;
        b.rank = s.rank;
        b.micro = s.micro_batch;
        b.kind = QString::fromStdString(s.kind);
        b.start_ms = (s.start_s - t0) * 1e3;
        b.end_ms = (s.end_s - t0) * 1e3;
        g.length_ms = std::max(g.length_ms, b.end_ms);
        g.bars.push_back(b);
    }
    return g;
}

double timeline_pipeline_window_ms(const std::vector<tessera::SpanRecord>& spans) {
    auto [t0, t1] = tessera::pipeline_window_s(spans);
    return t1 > t0 ? (t1 - t0) * 1e3 : 0.0;
}

// ------------------------------------------------------------------------------------------------
// ideal schedule

namespace {

struct IdealPlan {
    std::vector<tessera::StageSchedule> sched;
    int pp = 1, v = 1, micro = 1;
};

IdealPlan ideal_plan(const tessera::RunConfig& cfg) {
    IdealPlan p;
    p.pp = std::max(1, cfg.parallel.pp);
    p.micro = std::max(1, cfg.train.grad_accum);
    tessera::ScheduleKind kind = tessera::schedule_kind_parse(cfg.parallel.schedule);
    p.v = kind == tessera::ScheduleKind::interleaved ? std::max(2, cfg.parallel.virtual_stages) : 1;
    p.sched = tessera::schedule_build(kind, p.pp, p.micro, p.v);
    return p;
}

}  // namespace

GanttData timeline_ideal_bars(const tessera::RunConfig& cfg, double window_ms) {
    const IdealPlan p = ideal_plan(cfg);
    const int chunks = p.pp * p.v;
    // unit op times as the estimator's: a whole backward is B (input gradient) + W (weights)
    const double f = 1.0, b = 1.0, w = 1.0;
    using A = tessera::PipeAction;
    // end time of forward / backward (or B) of (micro, global chunk); -1 = not yet run
    std::vector<double> fwd_end(size_t(p.micro) * chunks, -1), bwd_end(fwd_end);
    auto at = [&](int m, int g) { return size_t(m) * chunks + g; };
    std::vector<size_t> next(p.pp, 0);
    std::vector<double> free_at(p.pp, 0);
    GanttData g;
    for (int s = 0; s < p.pp; ++s) g.rowLabels.push_back(QString("stage %1").arg(s));
    size_t left = 0;
    for (const auto& st : p.sched) left += st.size();
    while (left > 0) {
        bool progressed = false;
        for (int s = 0; s < p.pp; ++s) {
            while (next[s] < p.sched[s].size()) {
                const tessera::PipeAction& a = p.sched[s][next[s]];
                const int gc = a.chunk * p.pp + s;
                double ready = 0;
                if (a.kind == A::forward) {
                    if (gc > 0) ready = fwd_end[at(a.micro, gc - 1)];
                } else if (a.kind == A::backward_weight) {
                    ready = bwd_end[at(a.micro, gc)];  // its own B
                } else {
                    ready = gc + 1 < chunks ? bwd_end[at(a.micro, gc + 1)] : fwd_end[at(a.micro, gc)];
                }
                if (ready < 0) break;  // waits for another stage
                const double t0 = std::max(ready, free_at[s]);
                const double t1 = t0 + (a.kind == A::forward          ? f
                                        : a.kind == A::backward       ? b + w
                                        : a.kind == A::backward_input ? b
                                                                      : w);
                if (a.kind != A::backward_weight) (a.kind == A::forward ? fwd_end : bwd_end)[at(a.micro, gc)] = t1;
                free_at[s] = t1;
                GanttBar bar;
                bar.row = s;
                bar.stage = s;
                bar.rank = s;
                bar.micro = a.micro;
                bar.kind = a.kind == A::forward          ? "forward"
                           : a.kind == A::backward       ? "backward"
                           : a.kind == A::backward_input ? "backward_input"
                                                         : "backward_weight";
                bar.start_ms = t0;
                bar.end_ms = t1;
                g.bars.push_back(bar);
                ++next[s];
                --left;
                progressed = true;
            }
        }
        TS_CHECK(progressed, "ideal schedule deadlocks (", left, " actions left)");
    }
    double makespan = 0;
    for (const auto& bar : g.bars) makespan = std::max(makespan, bar.end_ms);
    const double scale = makespan > 0 && window_ms > 0 ? window_ms / makespan : 1.0;
    for (auto& bar : g.bars) {
        bar.start_ms *= scale;
        bar.end_ms *= scale;
    }
    g.length_ms = makespan * scale;
    return g;
}

// ------------------------------------------------------------------------------------------------
// simulated

std::optional<tessera::ScheduleTimes> timeline_measured_times(const tessera::RunConfig& cfg,
                                                               const std::vector<tessera::SpanRecord>& spans) {
    const IdealPlan p = ideal_plan(cfg);
    return tessera::schedule_times_measured(spans, p.pp, p.v);
}

tessera::ScheduleTimes timeline_predicted_times(const tessera::RunConfig& cfg, const tessera::DeviceSpec& dev) {
    const IdealPlan p = ideal_plan(cfg);
    const tessera::PlanEstimate est = tessera::estimate_plan(cfg, dev);
    std::vector<double> per_action((size_t)p.pp, 0.0);
    for (const auto& r : est.ranks) {
        const int st = r.coord.pp;
        if (st < 0 || st >= p.pp) continue;
        const double pass_s = std::max(0.0, r.compute_s - r.optimizer_s);
        per_action[(size_t)st] = std::max(per_action[(size_t)st], pass_s / (double)(p.micro * p.v));
    }
    tessera::ScheduleTimes t;
    for (int g = 0; g < p.pp * p.v; ++g) {
        t.forward_s.push_back(per_action[(size_t)(g % p.pp)] / 3);
        t.backward_s.push_back(2 * per_action[(size_t)(g % p.pp)] / 3);
    }
    return t;
}

GanttData timeline_simulated_bars(const tessera::RunConfig& cfg, const tessera::ScheduleTimes& t,
                                  tessera::ScheduleSim* sim_out) {
    const IdealPlan p = ideal_plan(cfg);
    tessera::ScheduleSim sim = tessera::schedule_simulate(p.sched, p.pp, t);
    GanttData g;
    for (int s = 0; s < p.pp; ++s) g.rowLabels.push_back(QString("stage %1").arg(s));
    for (const tessera::SimAction& a : sim.actions) {
        GanttBar bar;
        bar.row = bar.stage = bar.rank = a.stage;
        bar.micro = a.micro;
        bar.kind = a.kind == tessera::PipeAction::forward          ? "forward"
                   : a.kind == tessera::PipeAction::backward_input ? "backward_input"
                   : a.kind == tessera::PipeAction::backward_weight ? "backward_weight"
                                                                    : "backward";
        bar.start_ms = a.start_s * 1e3;
        bar.end_ms = a.end_s * 1e3;
        bar.critical = a.critical;
        g.bars.push_back(bar);
    }
    for (const tessera::SimGap& gap : sim.bubbles) g.gaps.push_back({gap.stage, gap.start_s * 1e3, gap.end_s * 1e3});
    g.length_ms = sim.makespan_s * 1e3;
    if (sim_out) *sim_out = std::move(sim);
    return g;
}

double timeline_predicted_bubble(const tessera::RunConfig& cfg) {
    const IdealPlan p = ideal_plan(cfg);
    if (p.pp <= 1) return 0.0;
    return tessera::schedule_bubble_fraction(p.sched, p.pp, 1.0, 1.0, 1.0);
}

}  // namespace tessera::studio
