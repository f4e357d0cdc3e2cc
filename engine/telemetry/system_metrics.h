// System metrics of a rank's machine over time: its GPU as the driver sees it (utilisation,
// memory used, power, temperature, SM clock: NVML) and its host (CPU busy and RAM used: /proc).
// Sampling sits behind SystemSource so the rank loop and the tests share one sampler: the real
// sources are thin (NVML in engine/kernels/cuda/device.cu, /proc here), the tests use a fake.
// The sampler turns readings into metric records (metric_names.h, gpu/ and host/) at a modest
// rate, and the rank hands them to its sink: the launcher stays runs.db's one writer.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/telemetry/telemetry.h"

namespace tessera {

// ---- readings --------------------------------------------------------------------------------

// One GPU reading. A field the driver did not answer stays -1 and is not written.
struct GpuSample {
    double util_percent = -1;        // 0..100, busy time of the last sample period
    int64_t memory_used_bytes = -1;  // on the whole device, every process
    double power_watts = -1;
    double temperature_c = -1;  // the GPU die
    double sm_clock_mhz = -1;
};

// One host reading. cpu_percent is the busy share of all cores since the previous reading
// (-1 on the first reading: a rate needs two).
struct HostSample {
    double cpu_percent = -1;         // 0..100
    int64_t memory_used_bytes = -1;  // MemTotal - MemAvailable
    int64_t memory_total_bytes = -1;
};

class SystemSource {
  public:
    virtual ~SystemSource() = default;
    virtual std::optional<GpuSample> gpu() = 0;    // nullopt: no GPU (a CPU rank) or no driver
    virtual std::optional<HostSample> host() = 0;  // nullopt: unreadable
};

// ---- /proc ------------------------------------------------------------------------------------

// The aggregate "cpu" line of /proc/stat: busy and total jiffies (busy = total - idle - iowait).
struct CpuTimes {
    uint64_t busy = 0, total = 0;
};
// Throws InputError naming `what` (the file) when there is no well-formed "cpu " line.
CpuTimes system_parse_proc_stat(const std::string& text, const std::string& what = "/proc/stat");
// MemTotal and MemAvailable of /proc/meminfo, in bytes. Throws InputError naming `what` when
// either is missing.
HostSample system_parse_meminfo(const std::string& text, const std::string& what = "/proc/meminfo");
// Busy share between two readings, 0..100; -1 when no time passed.
double system_cpu_percent(const CpuTimes& before, const CpuTimes& after);

// The host from /proc (paths replaceable for tests). gpu() is nullopt; host() is nullopt when a
// file cannot be read or parsed (a sampler never stops a run).
class ProcHostSource : public SystemSource {
  public:
    explicit ProcHostSource(std::string stat_path = "/proc/stat",
                            std::string meminfo_path = "/proc/meminfo");
    std::optional<GpuSample> gpu() override { return std::nullopt; }
    std::optional<HostSample> host() override;

  private:
    std::string stat_path_, meminfo_path_;
    std::optional<CpuTimes> last_;
};

// ---- sampler ----------------------------------------------------------------------------------

// Decides when to sample and turns readings into metric records of one rank. The GPU metrics
// are written by every GPU rank (ranks sharing a GPU each write theirs, under their rank); the
// host metrics only by a rank with `host_owner` (the first rank of each host), so a host has one
// series. Rate: the first call, then no more often than every `interval_s` seconds, and the
// run's last step always.
class SystemSampler {
  public:
    SystemSampler(SystemSource& src, int rank, bool host_owner, double interval_s = 2.0);
    // Records for `step` at wall time `now_s` (empty when not due).
    std::vector<MetricRecord> sample(int64_t step, double now_s, bool last_step = false);

  private:
    SystemSource& src_;
    int rank_;
    bool host_owner_;
    double interval_s_;
    double last_s_ = -1;
};

}  // namespace tessera
