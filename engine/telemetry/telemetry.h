// Telemetry: the versioned record stream a rank emits while it trains. Ranks write one JSON object
// per line to a pipe/socket; the launcher decodes the lines and is the only writer of runs.db
// (engine/store). The wire format is documented field by field in docs/telemetry.md.
//
// Versioning rule: every line carries "v". Adding a field (readers ignore unknown keys) or a record
// type (an older launcher warns about that line and keeps the rest) keeps the version; removing,
// renaming or changing the meaning/unit of a field bumps kTelemetryVersion, and a reader rejects
// any version it does not know.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

namespace tessera {

inline constexpr int kTelemetryVersion = 1;

// ------------------------------------------------------------------------------------------------
// Records. Times: `wall_time` is seconds since the Unix epoch; span times are seconds since the
// run started.

struct RunStartRecord {
    std::string name;
    std::string config_text;  // the resolved project.yaml
    std::string host;
    int world_size = 1;
    std::string plan_json;
    double wall_time = 0;
};

struct MetricRecord {
    int64_t step = 0;
    int rank = 0;
    std::string name;  // e.g. train/loss, train/lr, val/loss, perf/tok_per_s
    double value = 0;  // may be NaN/inf (encoded as "nan", "inf", "-inf")
    double wall_time = 0;
};

struct SpanRecord {
    int64_t step = 0;
    int rank = 0;
    int stage = 0;
    int micro_batch = -1;  // -1 = not tied to a micro-batch
    std::string kind;      // forward|backward|send|recv|optimizer|...
    // wall clock, seconds since the Unix epoch: every rank's spans on one time base (runs stored
    // before 2026-12-02 count from each rank's start); readers use differences
    double start_s = 0, end_s = 0;
};

struct ErrorRecord {
    int rank = 0;
    int64_t step = 0;
    std::string message;
    double wall_time = 0;
};

struct CheckpointRecord {
    int64_t step = 0;
    std::string path;
    double wall_time = 0;
};

struct RunEndRecord {
    std::string status;  // completed|failed|stopped
    std::string message;
    int64_t last_step = 0;
    double wall_time = 0;
};

// The device a rank trains on, written once by each rank as it starts: a GPU as its driver names
// it ("NVIDIA H200") with the memory NVML reports, or kDeviceCpu with the host's physical RAM.
// Readers look the name up in the device table (engine/plan: device_spec_for_recorded).
inline constexpr std::string_view kDeviceCpu = "cpu";
struct DeviceRecord {
    int rank = 0;
    std::string host;          // the rank's machine (telemetry_host_name)
    std::string name;          // kDeviceCpu or the driver's name of the GPU
    int64_t memory_bytes = 0;  // the device's total memory (cpu: the host's RAM)
    double wall_time = 0;
};

// One model layer's compute time on one rank in one step: its forward and its whole backward
// (split under zb-h1: B + W), each the mean over the step's micro-batches, in seconds. Layers count
// in forward order over the whole model (0 the embedding, 1..L the blocks, L + 1 the head), so a
// plan with another partition can be simulated from them (the Timeline page). Written on logged
// steps (train: log.every) only.
struct LayerTimeRecord {
    int64_t step = 0;  // 0-based, as spans
    int rank = 0;
    int stage = 0;
    int layer = 0;
    double forward_s = 0, backward_s = 0;
};

using Record = std::variant<RunStartRecord, MetricRecord, SpanRecord, ErrorRecord, CheckpointRecord,
                            RunEndRecord, DeviceRecord, LayerTimeRecord>;

// ------------------------------------------------------------------------------------------------
// Encoding: one JSON object, no newline: {"v":1,"type":"metric",...}. Types are run_start, metric,
// span, error, checkpoint, run_end, device, layer_time.

std::string telemetry_encode(const Record& r);
// Throws InputError (naming the byte offset / key, expected vs found) on malformed JSON, a
// missing or mistyped field, an unknown type, or a version other than kTelemetryVersion.
Record telemetry_decode(std::string_view line);
// The "type" string of a record ("metric", ...).
const char* telemetry_type_name(const Record& r);

double telemetry_now();                 // wall time, seconds since epoch
std::string telemetry_host_name();      // this machine's host name (RunStartRecord::host)
int64_t telemetry_host_memory_bytes();  // this machine's physical RAM (a CPU rank's device)

// ------------------------------------------------------------------------------------------------
// Sinks: where a rank's records go.

class TelemetrySink {
  public:
    virtual ~TelemetrySink() = default;
    virtual void write(const Record& r) = 0;
    virtual void flush() {}
};

// JSON lines to a file descriptor (not owned). Each record is written with a single write() of
// line + '\n', so lines up to PIPE_BUF bytes from several processes sharing one pipe never
// interleave. Throws Error if the descriptor fails.
std::unique_ptr<TelemetrySink> telemetry_stream_sink(int fd);

}  // namespace tessera
