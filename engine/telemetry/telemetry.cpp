// Telemetry records <-> JSON lines, and the file-descriptor sink ranks use to ship them to the
// launcher. Decoding is strict about what version 1 defines (every field present and typed) and
// lenient about what it does not (unknown keys are ignored, so fields can be added later).
#include "engine/telemetry/telemetry.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/json_text.h"

namespace tessera {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

// ------------------------------------------------------------------------------------------------
// Encoding

namespace {

// JSON has no NaN/inf; a diverged loss must still arrive, so non-finite values become strings.
ojson encode_double(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    return x;
}

struct Encoder {
    ojson& j;
    void operator()(const RunStartRecord& r) {
        j["name"] = r.name;
        j["config_text"] = r.config_text;
        j["host"] = r.host;
        j["world_size"] = r.world_size;
        j["plan_json"] = r.plan_json;
        j["wall_time"] = encode_double(r.wall_time);
    }
    void operator()(const MetricRecord& r) {
        j["step"] = r.step;
        j["rank"] = r.rank;
        j["name"] = r.name;
        j["value"] = encode_double(r.value);
        j["wall_time"] = encode_double(r.wall_time);
    }
    void operator()(const SpanRecord& r) {
        j["step"] = r.step;
        j["rank"] = r.rank;
        j["stage"] = r.stage;
        j["micro_batch"] = r.micro_batch;
        j["kind"] = r.kind;
        j["start_s"] = encode_double(r.start_s);
        j["end_s"] = encode_double(r.end_s);
    }
    void operator()(const ErrorRecord& r) {
        j["rank"] = r.rank;
        j["step"] = r.step;
        j["message"] = r.message;
        j["wall_time"] = encode_double(r.wall_time);
    }
    void operator()(const CheckpointRecord& r) {
        j["step"] = r.step;
        j["path"] = r.path;
        j["wall_time"] = encode_double(r.wall_time);
    }
    void operator()(const RunEndRecord& r) {
        j["status"] = r.status;
        j["message"] = r.message;
        j["last_step"] = r.last_step;
        j["wall_time"] = encode_double(r.wall_time);
    }
    void operator()(const DeviceRecord& r) {
        j["rank"] = r.rank;
        j["host"] = r.host;
        j["name"] = r.name;
        j["memory_bytes"] = r.memory_bytes;
        j["wall_time"] = encode_double(r.wall_time);
    }
    void operator()(const LayerTimeRecord& r) {
        j["step"] = r.step;
        j["rank"] = r.rank;
        j["stage"] = r.stage;
        j["layer"] = r.layer;
        j["forward_s"] = encode_double(r.forward_s);
        j["backward_s"] = encode_double(r.backward_s);
    }
};

}  // namespace

const char* telemetry_type_name(const Record& r) {
    static const char* kNames[] = {"run_start",  "metric",  "span",   "error",
                                   "checkpoint", "run_end", "device", "layer_time"};
    static_assert(std::variant_size_v<Record> == std::size(kNames));
    return kNames[r.index()];
}

std::string telemetry_encode(const Record& r) {
    ojson j;
    j["v"] = kTelemetryVersion;
    j["type"] = telemetry_type_name(r);
    std::visit(Encoder{j}, r);
    // Invalid UTF-8 (e.g. in an OS error message) is replaced rather than failing the rank.
    return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

// ------------------------------------------------------------------------------------------------
// Decoding

namespace {

struct Fields {
    const json& j;
    std::string type;

    const json& need(const char* key) const {
        auto it = j.find(key);
        if (it == j.end())
            throw InputError(
                str_cat("telemetry record (type ", type, "): missing key '", key, "'"));
        return *it;
    }
    [[noreturn]] void wrong(const char* key, const char* expected, const json& v) const {
        throw InputError(str_cat("telemetry record (type ", type, "): key '", key, "': expected ",
                                 expected, ", found ", json_kind(v)));
    }
    int64_t i64(const char* key) const {
        const json& v = need(key);
        if (v.is_number_integer()) {
            if (v.is_number_unsigned() &&
                v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
                wrong(key, "a 64-bit signed integer", v);
            return v.get<int64_t>();
        }
        wrong(key, "an integer", v);
    }
    int i32(const char* key) const {
        int64_t x = i64(key);
        if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
            wrong(key, "a 32-bit integer", need(key));
        return int(x);
    }
    double f64(const char* key) const {
        const json& v = need(key);
        if (v.is_number()) return v.get<double>();
        if (v.is_string()) {
            const auto& s = v.get_ref<const std::string&>();
            if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
            if (s == "inf") return std::numeric_limits<double>::infinity();
            if (s == "-inf") return -std::numeric_limits<double>::infinity();
        }
        wrong(key, "a number (or \"nan\", \"inf\", \"-inf\")", v);
    }
    std::string str(const char* key) const {
        const json& v = need(key);
        if (!v.is_string()) wrong(key, "a string", v);
        return v.get<std::string>();
    }
};

}  // namespace

Record telemetry_decode(std::string_view line) {
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
    json j;
    try {
        j = json::parse(line.begin(), line.end());
    } catch (const json::parse_error& e) {
        std::string head(line.substr(0, 60));
        throw InputError(str_cat("telemetry record: malformed JSON at byte ", e.byte,
                                 ": expected one JSON object per line, found '", head,
                                 line.size() > 60 ? "...'" : "'"));
    }
    if (!j.is_object())
        throw InputError(str_cat("telemetry record: expected a JSON object, found ", json_kind(j)));
    Fields f{j, "?"};
    const json& v = f.need("v");
    if (!v.is_number_integer()) f.wrong("v", "an integer version", v);
    if (v.get<int64_t>() != kTelemetryVersion)
        throw InputError(str_cat("telemetry record: unsupported version ", v.get<int64_t>(),
                                 " (this build reads version ", kTelemetryVersion, ")"));
    f.type = f.str("type");
    const std::string& t = f.type;
    if (t == "run_start")
        return RunStartRecord{f.str("name"),       f.str("config_text"), f.str("host"),
                              f.i32("world_size"), f.str("plan_json"),   f.f64("wall_time")};
    if (t == "metric")
        return MetricRecord{f.i64("step"), f.i32("rank"), f.str("name"), f.f64("value"),
                            f.f64("wall_time")};
    if (t == "span")
        return SpanRecord{f.i64("step"), f.i32("rank"),    f.i32("stage"), f.i32("micro_batch"),
                          f.str("kind"), f.f64("start_s"), f.f64("end_s")};
    if (t == "error")
        return ErrorRecord{f.i32("rank"), f.i64("step"), f.str("message"), f.f64("wall_time")};
    if (t == "checkpoint")
        return CheckpointRecord{f.i64("step"), f.str("path"), f.f64("wall_time")};
    if (t == "run_end")
        return RunEndRecord{f.str("status"), f.str("message"), f.i64("last_step"),
                            f.f64("wall_time")};
    if (t == "device")
        return DeviceRecord{f.i32("rank"), f.str("host"), f.str("name"), f.i64("memory_bytes"),
                            f.f64("wall_time")};
    if (t == "layer_time")
        return LayerTimeRecord{f.i64("step"),  f.i32("rank"),      f.i32("stage"),
                               f.i32("layer"), f.f64("forward_s"), f.f64("backward_s")};
    throw InputError(
        str_cat("telemetry record: key 'type': expected one of run_start, metric, "
                "span, error, checkpoint, run_end, device, layer_time, found '",
                t, "'"));
}

double telemetry_now() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

// ------------------------------------------------------------------------------------------------
// Stream sink

namespace {

class StreamSink final : public TelemetrySink {
  public:
    explicit StreamSink(int fd) : fd_(fd) {}
    void write(const Record& r) override {
        line_ = telemetry_encode(r);
        line_ += '\n';
        const char* p = line_.data();
        size_t left = line_.size();
        while (left > 0) {
            ssize_t n = ::write(fd_, p, left);
            if (n < 0) {
                if (errno == EINTR) continue;
                throw Error(
                    str_cat("telemetry: write to fd ", fd_, " failed: ", std::strerror(errno)));
            }
            p += n;
            left -= size_t(n);
        }
    }

  private:
    int fd_;
    std::string line_;  // reused buffer
};

}  // namespace

std::unique_ptr<TelemetrySink> telemetry_stream_sink(int fd) {
    return std::make_unique<StreamSink>(fd);
}

std::string telemetry_host_name() {
    char buf[256] = {0};
    ::gethostname(buf, sizeof buf - 1);
    return buf;
}

int64_t telemetry_host_memory_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : 0;
}

}  // namespace tessera
