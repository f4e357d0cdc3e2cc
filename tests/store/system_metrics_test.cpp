// System metrics: /proc parsing (a real /proc too), the CPU busy share, and the sampler's rate
// and records against a fake source (the NVML source itself needs a GPU: tests/gpu).
#include "engine/telemetry/system_metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "engine/core/error.h"
#include "engine/telemetry/metric_names.h"
#include "tests/support/temp_dir.h"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

class FakeSource : public SystemSource {
  public:
    std::optional<GpuSample> g;
    std::optional<HostSample> h;
    int gpu_calls = 0, host_calls = 0;
    std::optional<GpuSample> gpu() override {
        ++gpu_calls;
        return g;
    }
    std::optional<HostSample> host() override {
        ++host_calls;
        return h;
    }
};

std::map<std::string, double> by_name(const std::vector<MetricRecord>& v) {
    std::map<std::string, double> m;
    for (const auto& r : v) m[r.name] = r.value;
    return m;
}

}  // namespace

TEST(SystemMetrics, ParsesProcStatAndMeminfo) {
    CpuTimes a = system_parse_proc_stat("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n");
    EXPECT_EQ(a.total, 1000u);
    EXPECT_EQ(a.busy, 150u);  // idle and iowait are not busy
    CpuTimes b = system_parse_proc_stat("cpu  400 0 50 1400 50 0 0 0\n");
    EXPECT_DOUBLE_EQ(system_cpu_percent(a, b), 100.0 * 300 / 900);
    EXPECT_EQ(system_cpu_percent(b, b), -1);
    HostSample h =
        system_parse_meminfo("MemTotal:       16384 kB\nMemFree: 1 kB\nMemAvailable:    4096 kB\n");
    EXPECT_EQ(h.memory_total_bytes, 16384 * 1024);
    EXPECT_EQ(h.memory_used_bytes, (16384 - 4096) * 1024);
    try {
        system_parse_meminfo("MemTotal: 1 kB\n", "/x/meminfo");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("/x/meminfo: MemAvailable not found"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(system_parse_proc_stat("intr 1 2 3\n"), InputError);
    EXPECT_THROW(system_parse_proc_stat("cpu  1 2\n"), InputError);
}

TEST(SystemMetrics, ProcSourceReadsThisHostAndSurvivesBadFiles) {
    ProcHostSource src;
    auto first = src.host();
    ASSERT_TRUE(first.has_value());
    EXPECT_GT(first->memory_total_bytes, 0);
    EXPECT_GE(first->memory_used_bytes, 0);
    EXPECT_EQ(first->cpu_percent, -1);  // a rate needs two readings
    volatile double x = 0;
    for (int i = 0; i < 20000000; ++i) x = x + i;  // some busy time between the readings
    auto second = src.host();
    ASSERT_TRUE(second.has_value());
    EXPECT_GE(second->cpu_percent, 0);
    EXPECT_LE(second->cpu_percent, 100);
    const tessera::test_support::TempDir scratch("meminfo");
    const fs::path bad = scratch.path() / "meminfo";
    std::ofstream(bad) << "garbage\n";
    ProcHostSource broken("/proc/stat", bad.string());
    EXPECT_FALSE(broken.host().has_value());
    ProcHostSource missing("/nonexistent/stat", "/nonexistent/meminfo");
    EXPECT_FALSE(missing.host().has_value());
}

TEST(SystemMetrics, SamplerRateAndRecords) {
    FakeSource f;
    f.g = GpuSample{87.0, 40LL << 30, 612.5, 71.0, 1980.0};
    f.h = HostSample{35.0, 8LL << 30, 64LL << 30};
    SystemSampler s(f, 3, true, 2.0);
    auto r1 = s.sample(1, 100.0);
    auto m = by_name(r1);
    EXPECT_EQ(m.size(), 7u);
    EXPECT_DOUBLE_EQ(m[std::string(metric::gpu_util_percent)], 87.0);
    EXPECT_DOUBLE_EQ(m[std::string(metric::gpu_memory_used_bytes)], double(40LL << 30));
    EXPECT_DOUBLE_EQ(m[std::string(metric::gpu_power_watts)], 612.5);
    EXPECT_DOUBLE_EQ(m[std::string(metric::gpu_temperature_c)], 71.0);
    EXPECT_DOUBLE_EQ(m[std::string(metric::gpu_sm_clock_mhz)], 1980.0);
    EXPECT_DOUBLE_EQ(m[std::string(metric::host_cpu_percent)], 35.0);
    EXPECT_DOUBLE_EQ(m[std::string(metric::host_memory_used_bytes)], double(8LL << 30));
    for (const auto& r : r1) {
        EXPECT_EQ(r.rank, 3);
        EXPECT_EQ(r.step, 1);
        EXPECT_DOUBLE_EQ(r.wall_time, 100.0);
    }
    EXPECT_TRUE(s.sample(2, 101.0).empty());         // under the 2 s interval
    EXPECT_FALSE(s.sample(3, 101.5, true).empty());  // the last step always
    EXPECT_TRUE(s.sample(4, 102.0).empty());
    EXPECT_FALSE(s.sample(5, 103.6).empty());
    EXPECT_EQ(f.gpu_calls, 3);  // the source is read only when due
}

TEST(SystemMetrics, CpuRankWritesHostOnlyAndOnlyTheHostOwner) {
    FakeSource f;                                // no GPU
    f.h = HostSample{-1, 1LL << 30, 2LL << 30};  // first reading: no CPU rate yet
    SystemSampler owner(f, 0, true);
    auto m = by_name(owner.sample(1, 0));
    EXPECT_EQ(m.size(), 1u);  // memory only: the unknown CPU share is not written
    EXPECT_TRUE(m.count(std::string(metric::host_memory_used_bytes)));
    SystemSampler other(f, 1, false);
    EXPECT_TRUE(other.sample(1, 0).empty());
    // a GPU field the driver did not answer is left out, the rest written
    f.g = GpuSample{50, 1 << 20, -1, -1, 1400};
    SystemSampler gpu_rank(f, 2, false);
    auto g = by_name(gpu_rank.sample(1, 0));
    EXPECT_EQ(g.size(), 3u);
    EXPECT_FALSE(g.count(std::string(metric::gpu_power_watts)));
}
