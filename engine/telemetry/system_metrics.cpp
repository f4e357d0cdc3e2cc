// System metrics: /proc parsing, the /proc host source and the sampler. See system_metrics.h.
#include "engine/telemetry/system_metrics.h"

#include <sstream>

#include "engine/core/error.h"
#include "engine/core/json_text.h"
#include "engine/telemetry/metric_names.h"

namespace tessera {

// ------------------------------------------------------------------------------------------------
// /proc

CpuTimes system_parse_proc_stat(const std::string& text, const std::string& what) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("cpu ", 0) != 0) continue;
        std::istringstream f(line.substr(4));
        // user nice system idle iowait irq softirq steal (guest time is inside user already)
        uint64_t v[8] = {};
        int n = 0;
        while (n < 8 && f >> v[n]) ++n;
        if (n < 4)
            throw InputError(str_cat(what, ": the \"cpu\" line has ", n,
                                     " numbers; expected at least 4 (user nice system idle)"));
        CpuTimes t;
        for (int i = 0; i < n; ++i) t.total += v[i];
        t.busy = t.total - v[3] - (n > 4 ? v[4] : 0);
        return t;
    }
    throw InputError(str_cat(what, ": no \"cpu \" line (expected the aggregate CPU times)"));
}

HostSample system_parse_meminfo(const std::string& text, const std::string& what) {
    std::istringstream in(text);
    std::string key, unit;
    int64_t total = -1, avail = -1;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        int64_t kb = -1;
        if (!(f >> key >> kb)) continue;
        if (key == "MemTotal:") total = kb * 1024;
        if (key == "MemAvailable:") avail = kb * 1024;
    }
    if (total < 0 || avail < 0)
        throw InputError(str_cat(what, ": ", total < 0 ? "MemTotal" : "MemAvailable",
                                 " not found (expected \"Key: <kB> kB\" lines)"));
    HostSample h;
    h.memory_total_bytes = total;
    h.memory_used_bytes = total - avail;
    return h;
}

double system_cpu_percent(const CpuTimes& before, const CpuTimes& after) {
    if (after.total <= before.total) return -1;
    const double busy = after.busy >= before.busy ? (double)(after.busy - before.busy) : 0.0;
    return 100.0 * busy / (double)(after.total - before.total);
}

ProcHostSource::ProcHostSource(std::string stat_path, std::string meminfo_path)
    : stat_path_(std::move(stat_path)), meminfo_path_(std::move(meminfo_path)) {}

std::optional<HostSample> ProcHostSource::host() {
    auto stat = text_file_read(stat_path_);
    auto mem = text_file_read(meminfo_path_);
    if (!stat || !mem) return std::nullopt;
    try {
        HostSample h = system_parse_meminfo(*mem, meminfo_path_);
        CpuTimes now = system_parse_proc_stat(*stat, stat_path_);
        if (last_) h.cpu_percent = system_cpu_percent(*last_, now);
        last_ = now;
        return h;
    } catch (const InputError&) {
        return std::nullopt;  // a sampler never stops a run
    }
}

// ------------------------------------------------------------------------------------------------
// sampler

SystemSampler::SystemSampler(SystemSource& src, int rank, bool host_owner, double interval_s)
    : src_(src), rank_(rank), host_owner_(host_owner), interval_s_(interval_s) {}

std::vector<MetricRecord> SystemSampler::sample(int64_t step, double now_s, bool last_step) {
    std::vector<MetricRecord> out;
    if (last_s_ >= 0 && now_s - last_s_ < interval_s_ && !last_step) return out;
    last_s_ = now_s;
    auto put = [&](std::string_view name, double v) {
        if (v >= 0) out.push_back(MetricRecord{step, rank_, std::string(name), v, now_s});
    };
    if (std::optional<GpuSample> g = src_.gpu()) {
        put(metric::gpu_util_percent, g->util_percent);
        put(metric::gpu_memory_used_bytes, (double)g->memory_used_bytes);
        put(metric::gpu_power_watts, g->power_watts);
        put(metric::gpu_temperature_c, g->temperature_c);
        put(metric::gpu_sm_clock_mhz, g->sm_clock_mhz);
    }
    if (host_owner_) {
        if (std::optional<HostSample> h = src_.host()) {
            put(metric::host_cpu_percent, h->cpu_percent);
            put(metric::host_memory_used_bytes, (double)h->memory_used_bytes);
        }
    }
    return out;
}

}  // namespace tessera
