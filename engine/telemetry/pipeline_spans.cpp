// A step's pipeline from its spans (see pipeline_spans.h).
#include "engine/telemetry/pipeline_spans.h"

#include <algorithm>
#include <limits>
#include <map>

namespace tessera {

bool span_is_compute(std::string_view kind) {
    return kind == "forward" || kind == "backward" || kind == "forward_backward" ||
           kind == "backward_input" || kind == "backward_weight";
}

std::pair<double, double> pipeline_window_s(const std::vector<SpanRecord>& spans) {
    double t0 = std::numeric_limits<double>::infinity(), t1 = -t0;
    for (const auto& s : spans) {
        if (s.kind == "optimizer") continue;
        t0 = std::min(t0, s.start_s);
        t1 = std::max(t1, s.end_s);
    }
    return {t0, t1};
}

double pipeline_bubble_measured(const std::vector<SpanRecord>& spans) {
    auto [t0, t1] = pipeline_window_s(spans);
    std::map<std::pair<int, int>, double> busy_s;  // (stage, rank) -> compute seconds
    bool any = false;
    for (const auto& s : spans) {
        double& row = busy_s[{s.stage, s.rank}];  // every row counts, also one that only waited
        if (!span_is_compute(s.kind)) continue;
        row += s.end_s - s.start_s;
        any = true;
    }
    if (!any || !(t1 > t0)) return -1;
    double busy = 0;
    for (const auto& [key, b] : busy_s) busy += b;
    return std::clamp(1.0 - busy / (double(busy_s.size()) * (t1 - t0)), 0.0, 1.0);
}

}  // namespace tessera
