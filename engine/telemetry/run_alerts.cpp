// Loss spikes, non-finite losses and throughput drops over metric series. See run_alerts.h.
#include "engine/telemetry/run_alerts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>

namespace tessera {

namespace {

double median(std::vector<double> v) {
    if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
    const size_t h = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + (long)h, v.end());
    double m = v[h];
    if (v.size() % 2 == 0) m = 0.5 * (m + *std::max_element(v.begin(), v.begin() + (long)h));
    return m;
}

// The row seen first at each step (earliest wall time, then lowest rank), by step.
std::map<int64_t, AlertPoint> first_per_step(const std::vector<AlertPoint>& rows) {
    std::map<int64_t, AlertPoint> by_step;
    for (const AlertPoint& p : rows) {
        auto [it, fresh] = by_step.try_emplace(p.step, p);
        if (fresh) continue;
        const AlertPoint& q = it->second;
        // a non-finite value beats a finite one at the same step: it is what a reader must see
        const bool p_bad = !std::isfinite(p.value), q_bad = !std::isfinite(q.value);
        if (p_bad != q_bad) {
            if (p_bad) it->second = p;
            continue;
        }
        if (p.wall_time < q.wall_time || (p.wall_time == q.wall_time && p.rank < q.rank))
            it->second = p;
    }
    return by_step;
}

}  // namespace

std::vector<LossAlert> alerts_loss(const std::vector<AlertPoint>& rows, const LossSpikeRule& rule) {
    std::vector<LossAlert> out;
    std::deque<double> hist;  // the last `window` finite, unflagged values
    bool in_episode = false;
    for (const auto& [step, p] : first_per_step(rows)) {
        if (!std::isfinite(p.value)) {
            out.push_back({LossAlert::Kind::non_finite, step, p.rank, p.value,
                           std::numeric_limits<double>::quiet_NaN()});
            continue;
        }
        bool spike = false;
        double med = std::numeric_limits<double>::quiet_NaN();
        if ((int)hist.size() >= std::max(1, rule.min_history)) {
            std::vector<double> h(hist.begin(), hist.end());
            med = median(h);
            std::vector<double> dev;
            dev.reserve(h.size());
            for (double x : h) dev.push_back(std::fabs(x - med));
            const double sigma = 1.4826 * median(dev);
            spike = p.value - med > std::max(rule.mad_k * sigma, rule.rel * std::fabs(med));
        }
        if (spike) {
            if (!in_episode) out.push_back({LossAlert::Kind::spike, step, p.rank, p.value, med});
            in_episode = true;
            continue;
        }
        in_episode = false;
        hist.push_back(p.value);
        while ((int)hist.size() > std::max(1, rule.window)) hist.pop_front();
    }
    return out;
}

std::vector<ThroughputAlert> alerts_throughput(const std::vector<AlertPoint>& rows,
                                               double predicted_tok_per_s,
                                               const ThroughputRule& rule) {
    std::vector<ThroughputAlert> out;
    if (!(predicted_tok_per_s > 0) || !std::isfinite(predicted_tok_per_s)) return out;
    std::vector<AlertPoint> pts(rows);
    std::stable_sort(pts.begin(), pts.end(),
                     [](const AlertPoint& a, const AlertPoint& b) { return a.step < b.step; });
    const double threshold = (1.0 - rule.tol) * predicted_tok_per_s;
    ThroughputAlert cur;
    int64_t run = 0;
    auto end_episode = [&] {
        if (run >= std::max(1, rule.sustain)) {
            cur.steps_below = run;
            out.push_back(cur);
        }
        run = 0;
    };
    for (size_t i = 0; i < pts.size(); ++i) {
        if ((int)i < rule.warmup) continue;
        const AlertPoint& p = pts[i];
        if (std::isfinite(p.value) && p.value < threshold) {
            if (run == 0) cur = ThroughputAlert{p.step, p.value, predicted_tok_per_s, 0};
            ++run;
        } else {
            end_episode();
        }
    }
    end_episode();
    return out;
}

std::string alert_describe(const LossAlert& a) {
    char buf[200];
    if (a.kind == LossAlert::Kind::non_finite)
        std::snprintf(buf, sizeof buf, "step %lld: loss is %s, first seen on rank %d",
                      (long long)a.step,
                      std::isnan(a.value) ? "NaN"
                      : a.value > 0       ? "+inf"
                                          : "-inf",
                      a.rank);
    else
        std::snprintf(buf, sizeof buf,
                      "step %lld: loss spike %.4g (median %.4g), first seen on rank %d",
                      (long long)a.step, a.value, a.baseline, a.rank);
    return buf;
}

std::string alert_describe(const ThroughputAlert& a) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "step %lld: %.0f tok/s, %.0f %% below the predicted %.0f (%lld points)",
                  (long long)a.step, a.tok_per_s, 100.0 * (1.0 - a.tok_per_s / a.predicted),
                  a.predicted, (long long)a.steps_below);
    return buf;
}

}  // namespace tessera
