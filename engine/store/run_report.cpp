// Text views of runs.db: the run table and one run's detail page (see run_report.h).
#include "engine/store/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <ostream>
#include <vector>

#include "engine/core/error.h"
#include "engine/io/checkpoint.h"
#include "engine/telemetry/metric_names.h"
#include "engine/telemetry/pipeline_spans.h"

namespace tessera {

std::string store_format_duration(double s) {
    char buf[32];
    if (!(s >= 0)) return "-";
    if (s < 60)
        std::snprintf(buf, sizeof buf, "%.1fs", s);
    else if (s < 3600)
        std::snprintf(buf, sizeof buf, "%dm%02ds", int(s / 60), int(s) % 60);
    else
        std::snprintf(buf, sizeof buf, "%dh%02dm", int(s / 3600), int(s / 60) % 60);
    return buf;
}

std::string store_format_time(double epoch_s) {
    if (!(epoch_s > 0)) return "-";
    std::time_t t = std::time_t(epoch_s);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

namespace {

std::string format_value(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

double run_duration(const RunRow& r) {
    double end = r.end_time > 0 ? r.end_time : telemetry_now();
    return end - r.start_time;
}

}  // namespace

void store_write_run_table(std::ostream& out, const RunStore& store) {
    std::vector<RunRow> runs = store.runs_list();
    if (runs.empty()) {
        out << "no runs in " << store.path() << "\n";
        return;
    }
    // rows of cells, the first is the header
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"id", "name", "status", "steps", "world", "start", "duration",
                    std::string(metric::train_loss)});
    for (const RunRow& r : runs) {
        auto loss = store.metric_last(r.id, metric::train_loss);
        std::string name = r.name.size() > 28 ? r.name.substr(0, 25) + "..." : r.name;
        rows.push_back({std::to_string(r.id), name, r.status, std::to_string(r.last_step),
                        std::to_string(r.world_size), store_format_time(r.start_time),
                        store_format_duration(run_duration(r)),
                        loss ? format_value(loss->value) : "-"});
    }
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto& row : rows)
        for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    for (const auto& row : rows) {
        std::string line;
        for (size_t c = 0; c < row.size(); ++c) {
            bool right = c == 0 || c == 3 || c == 4 || c == 7;  // numbers right-aligned
            std::string pad(width[c] - row[c].size(), ' ');
            line += right ? pad + row[c] : row[c] + pad;
            if (c + 1 < row.size()) line += "  ";
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out << line << "\n";
    }
}

namespace {

// A pipelined run's measured bubble, from every rank's spans (pipeline_spans.h) of its last 50
// steps after the first: nothing for a run of one stage.
void write_pipeline(std::ostream& out, const RunStore& store, const RunRow& r) {
    constexpr int64_t kSteps = 50;
    std::vector<double> bubbles;
    bool pipelined = false;
    int64_t first = 0, last = 0;
    for (int64_t s = std::max<int64_t>(1, r.last_step - kSteps); s < r.last_step;
         ++s) {  // spans count from 0
        std::vector<SpanRecord> spans = store.spans(r.id, s);
        for (const SpanRecord& sp : spans) pipelined |= sp.stage > 0;
        double b = pipeline_bubble_measured(spans);
        if (b < 0) continue;
        if (bubbles.empty()) first = s + 1;
        last = s + 1;
        bubbles.push_back(b);
    }
    if (!pipelined || bubbles.empty()) return;
    double sum = 0;
    for (double b : bubbles) sum += b;
    auto [lo, hi] = std::minmax_element(bubbles.begin(), bubbles.end());
    char line[160];
    std::snprintf(line, sizeof line,
                  "  bubble      %.3f measured: the mean of steps %lld-%lld (%.3f .. %.3f)\n",
                  sum / double(bubbles.size()), (long long)first, (long long)last, *lo, *hi);
    out << "\npipeline (every rank's timeline spans):\n" << line;
}

}  // namespace

void store_write_run_detail(std::ostream& out, const RunStore& store, int64_t run_id) {
    std::optional<RunRow> run = store.run_get(run_id);
    if (!run)
        throw InputError(str_cat(store.path(), ": run ", run_id,
                                 " not found (`tessera runs list "
                                 "--db ",
                                 store.path(), "` shows the ids)"));
    const RunRow& r = *run;
    out << "run " << r.id << ": " << r.name << "\n";
    out << "  status:     " << r.status << (r.message.empty() ? "" : " — ") << r.message << "\n";
    out << "  host:       " << (r.host.empty() ? "-" : r.host) << "  (world size " << r.world_size
        << ")\n";
    out << "  started:    " << store_format_time(r.start_time) << "\n";
    out << "  duration:   " << store_format_duration(run_duration(r))
        << (r.end_time > 0 ? "" : " (still running)") << "\n";
    out << "  last step:  " << r.last_step << "\n";

    std::vector<DeviceRecord> devs = store.devices(r.id);
    out << "\ndevices:\n";
    if (devs.empty()) out << "  (none recorded)\n";
    for (const DeviceRecord& d : devs) {
        char mem[32];
        std::snprintf(mem, sizeof mem, "%.1f GiB", double(d.memory_bytes) / double(1LL << 30));
        out << "  rank " << d.rank << "  " << (d.host.empty() ? "-" : d.host) << "  " << d.name
            << "  " << mem << "\n";
    }

    std::vector<MetricRow> latest = store.metrics_latest(r.id);
    out << "\nlast metrics:\n";
    if (latest.empty()) out << "  (none)\n";
    size_t w = 0;
    for (const MetricRow& m : latest) w = std::max(w, m.name.size());
    for (const MetricRow& m : latest)
        out << "  " << m.name << std::string(w - m.name.size(), ' ') << "  step " << m.step << "  "
            << format_value(m.value) << "\n";

    write_pipeline(out, store, r);

    std::vector<CheckpointRow> ckpts = store.checkpoints(r.id);
    out << "\ncheckpoints:\n";
    if (ckpts.empty()) out << "  (none)\n";
    for (const CheckpointRow& c : ckpts) {
        const std::optional<std::string> now = checkpoint_now_at(c.path, c.wall_time);
        out << "  step " << c.step << "  " << (now ? *now : c.path);
        if (!now)
            out << "  (not here: rotated away by checkpoint.keep, removed, or on another host)";
        else if (*now != c.path)
            out << "  (set aside there by a later run)";
        out << "\n";
    }

    std::vector<ErrorRow> errs = store.errors(r.id);
    if (!errs.empty()) {
        out << "\nerrors:\n";
        for (const ErrorRow& e : errs)
            out << "  rank " << e.rank << " step " << e.step << ": " << e.message << "\n";
    }

    out << "\nconfig:\n";
    if (r.config_text.empty()) out << "  (none)\n";
    size_t pos = 0;
    while (pos < r.config_text.size()) {
        size_t nl = r.config_text.find('\n', pos);
        if (nl == std::string::npos) nl = r.config_text.size();
        out << "  " << r.config_text.substr(pos, nl - pos) << "\n";
        pos = nl + 1;
    }
}

}  // namespace tessera
