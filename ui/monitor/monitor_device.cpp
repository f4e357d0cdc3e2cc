// The Monitor page's device choice (see monitor_device.h).
#include "ui/monitor/monitor_device.h"

#include <cstdio>

#include "engine/core/error.h"

namespace tessera::studio {

namespace {
std::string gib(int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(1LL << 30));
    return buf;
}
}  // namespace

MonitorDevice monitor_prediction_device(const tessera::RunConfig& cfg,
                                        const std::vector<tessera::DeviceRecord>& devices) {
    MonitorDevice md;
    const std::string fallback = tessera::device_default_name(cfg);
    const std::string why =
        str_cat(" · prediction for ", fallback, " (the Plan page's default for ",
                fallback == "cpu" ? "CPU" : "CUDA", " runs)");
    if (devices.empty()) {
        md.spec = tessera::device_spec(fallback);
        md.text = str_cat("device: not recorded by this run", why);
        return md;
    }
    const tessera::DeviceRecord& d = devices.front();  // rank 0's (by rank)
    size_t same = 0;
    for (const auto& o : devices) same += o.name == d.name;
    std::string what =
        str_cat(devices.size() > 1 && same == devices.size() ? str_cat(devices.size(), " × ")
                                                             : std::string(),
                d.name, " (", gib(d.memory_bytes), d.name == tessera::kDeviceCpu ? " RAM" : "",
                devices.size() > 1 && same == devices.size() ? " each" : "", ")");
    if (same != devices.size()) what += str_cat("; the ranks differ: rank ", d.rank, "'s");
    if (tessera::device_spec_for_recorded(d.name, &md.spec)) {
        md.recorded = true;
        md.text = str_cat("device: ", what, " · prediction for ", md.spec.name);
    } else {
        md.spec = tessera::device_spec(fallback);
        md.text = str_cat("device: ", what, ", not in the device table", why);
    }
    return md;
}

}  // namespace tessera::studio
