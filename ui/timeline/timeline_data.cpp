// Timeline data: measured spans -> bars, the ideal schedule simulated -> bars, bubble fractions.
#include "ui/timeline/timeline_data.h"

#include <QObject>
#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "engine/core/error.h"
#include "engine/parallel/schedule.h"
#include "engine/parallel/stage_runner.h"
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
    // unit op times as the estimator's: f = 1, a whole backward 2 (B = W = 1 under zb-h1)
    tessera::ScheduleTimes t;
    t.forward_s.assign(size_t(p.pp * p.v), 1.0);
    t.backward_s.assign(size_t(p.pp * p.v), 2.0);
    GanttData g = timeline_simulated_bars(cfg, t, nullptr);
    // the schedule's shape only (no critical path, no hatched gaps), stretched over the window
    g.gaps.clear();
    const double scale = g.length_ms > 0 && window_ms > 0 ? window_ms / g.length_ms : 1.0;
    for (auto& bar : g.bars) {
        bar.critical = false;
        bar.start_ms *= scale;
        bar.end_ms *= scale;
    }
    g.length_ms *= scale;
    return g;
}

// ------------------------------------------------------------------------------------------------
// simulated

std::optional<tessera::ScheduleTimes> timeline_measured_times(
    const tessera::RunConfig& cfg, const std::vector<tessera::SpanRecord>& spans) {
    const IdealPlan p = ideal_plan(cfg);
    return tessera::schedule_times_measured(spans, p.pp, p.v);
}

namespace {
QString shown(int v) {
    return QString::number(v);
}
QString shown(bool v) {
    return v ? QStringLiteral("true") : QStringLiteral("false");
}
QString shown(const std::string& v) {
    return QString::fromStdString(v);
}

// Every layer's recompute policy under cfg's partition (layer i: its chunk's stage's policy).
std::vector<std::string> layer_recompute(const tessera::RunConfig& cfg) {
    const std::vector<int> blocks = tessera::plan_blocks_per_chunk(cfg);
    const int n_layers = cfg.model.n_layer + 2, pp = std::max(1, cfg.parallel.pp);
    std::vector<std::string> out((size_t)n_layers);
    for (int g = 0; g < (int)blocks.size(); ++g) {
        const auto [lo, hi] = tessera::chunk_layer_range(blocks, g, n_layers);
        for (int l = lo; l < hi; ++l) out[(size_t)l] = cfg.parallel.recompute_of(g % pp);
    }
    return out;
}
}  // namespace

QString timeline_layer_times_mismatch(const tessera::RunConfig& run,
                                      const tessera::RunConfig& plan) {
    if (!(run.model == plan.model)) return QObject::tr("the model differs from the run's");
    auto differs = [](const char* what, auto a, auto b) {
        return QObject::tr("%1 is %2 in the plan but %3 in the run")
            .arg(QString::fromLatin1(what), shown(b), shown(a));
    };
    if (run.train.micro_batch != plan.train.micro_batch)
        return differs("train.micro_batch", run.train.micro_batch, plan.train.micro_batch);
    if (run.parallel.tp != plan.parallel.tp)
        return differs("parallel.tp", run.parallel.tp, plan.parallel.tp);
    if (run.runtime.device != plan.runtime.device)
        return differs("runtime.device", run.runtime.device, plan.runtime.device);
    if (run.runtime.precision != plan.runtime.precision)
        return differs("runtime.precision", run.runtime.precision, plan.runtime.precision);
    if (run.parallel.offload_activations != plan.parallel.offload_activations)
        return differs("parallel.offload_activations", run.parallel.offload_activations,
                       plan.parallel.offload_activations);
    try {
        const std::vector<std::string> a = layer_recompute(run), b = layer_recompute(plan);
        for (size_t l = 0; l < a.size(); ++l)
            if (a[l] != b[l])
                return QObject::tr("layer %1's recompute is %2 in the plan but %3 in the run")
                    .arg(l)
                    .arg(QString::fromStdString(b[l]), QString::fromStdString(a[l]));
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

std::optional<tessera::ScheduleTimes> timeline_layer_schedule_times(
    const tessera::RunConfig& plan, const std::vector<tessera::LayerTimeRecord>& layers) {
    const int n_layers = plan.model.n_layer + 2;
    std::vector<double> f((size_t)n_layers, -1), b((size_t)n_layers, -1);
    for (const tessera::LayerTimeRecord& r : layers) {  // the slowest rank holding each layer
        if (r.layer < 0 || r.layer >= n_layers) return std::nullopt;
        f[(size_t)r.layer] = std::max(f[(size_t)r.layer], r.forward_s);
        b[(size_t)r.layer] = std::max(b[(size_t)r.layer], r.backward_s);
    }
    for (int l = 0; l < n_layers; ++l)
        if (f[(size_t)l] < 0 || b[(size_t)l] < 0) return std::nullopt;
    const IdealPlan p = ideal_plan(plan);
    const std::vector<int> blocks = tessera::plan_blocks_per_chunk(plan);
    tessera::ScheduleTimes t;
    for (int g = 0; g < p.pp * p.v; ++g) {
        const auto [lo, hi] = tessera::chunk_layer_range(blocks, g, n_layers);
        double fs = 0, bs = 0;
        for (int l = lo; l < hi; ++l) fs += f[(size_t)l], bs += b[(size_t)l];
        t.forward_s.push_back(fs);
        t.backward_s.push_back(bs);
    }
    return t;
}

tessera::ScheduleTimes timeline_predicted_times(const tessera::RunConfig& cfg,
                                                const tessera::DeviceSpec& dev) {
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
        bar.kind = a.kind == tessera::PipeAction::forward           ? "forward"
                   : a.kind == tessera::PipeAction::backward_input  ? "backward_input"
                   : a.kind == tessera::PipeAction::backward_weight ? "backward_weight"
                                                                    : "backward";
        bar.start_ms = a.start_s * 1e3;
        bar.end_ms = a.end_s * 1e3;
        bar.critical = a.critical;
        g.bars.push_back(bar);
    }
    for (const tessera::SimGap& gap : sim.bubbles)
        g.gaps.push_back({gap.stage, gap.start_s * 1e3, gap.end_s * 1e3});
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
