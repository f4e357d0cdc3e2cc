// Telemetry wire format: every record type survives encode -> decode, and bad lines are refused
// with one InputError that says what was expected.
#include "engine/telemetry/telemetry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "engine/telemetry/background_sink.h"
#include "engine/telemetry/metric_names.h"

using namespace tessera;

namespace {

Record round_trip(const Record& r) {
    std::string line = telemetry_encode(r);
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    return telemetry_decode(line);
}

std::string decode_error(const std::string& line) {
    try {
        telemetry_decode(line);
    } catch (const InputError& e) {
        return e.what();
    }
    ADD_FAILURE() << "accepted: " << line;
    return "";
}

}  // namespace

// The vocabulary is on disk: these literals are what every existing runs.db holds.
TEST(TelemetryVocabulary, ValuesOnDiskNeverChange) {
    EXPECT_EQ(metric::train_loss, "train/loss");
    EXPECT_EQ(metric::train_lr, "train/lr");
    EXPECT_EQ(metric::train_grad_norm, "train/grad_norm");
    EXPECT_EQ(metric::train_epoch, "train/epoch");
    EXPECT_EQ(metric::val_loss, "val/loss");
    EXPECT_EQ(metric::val_accuracy, "val/accuracy");
    EXPECT_EQ(metric::perf_step_ms, "perf/step_ms");
    EXPECT_EQ(metric::perf_tok_per_s, "perf/tok_per_s");
    EXPECT_EQ(metric::perf_gflops, "perf/gflops");
    EXPECT_EQ(metric::perf_mfu, "perf/mfu");
    EXPECT_EQ(metric::mem_total_bytes, "mem/total_bytes");
    EXPECT_EQ(metric::mem_device_bytes, "mem/device_bytes");
    EXPECT_EQ(metric::gpu_util_percent, "gpu/util_percent");
    EXPECT_EQ(metric::gpu_memory_used_bytes, "gpu/memory_used_bytes");
    EXPECT_EQ(metric::gpu_power_watts, "gpu/power_watts");
    EXPECT_EQ(metric::gpu_temperature_c, "gpu/temperature_c");
    EXPECT_EQ(metric::gpu_sm_clock_mhz, "gpu/sm_clock_mhz");
    EXPECT_EQ(metric::host_cpu_percent, "host/cpu_percent");
    EXPECT_EQ(metric::host_memory_used_bytes, "host/memory_used_bytes");
    EXPECT_EQ(metric::pipeline_rank_idle, "pipeline/rank_idle");
    EXPECT_EQ(metric::launch_attempt, "launch/attempt");
    EXPECT_EQ(metric::mem_category_bytes(MemCategory::params), "mem/params_bytes");
    EXPECT_EQ(metric::mem_category_bytes(MemCategory::host), "mem/host_bytes");
    EXPECT_EQ(run_status::running, "running");
    EXPECT_EQ(run_status::completed, "completed");
    EXPECT_EQ(run_status::failed, "failed");
    EXPECT_EQ(run_status::stopped, "stopped");
}

TEST(TelemetryVocabulary, MemoryCategoryNamesRoundTrip) {
    for (int c = 0; c < kMemCategoryCount; ++c) {
        auto cat = static_cast<MemCategory>(c);
        auto back = metric::mem_category_of(metric::mem_category_bytes(cat));
        ASSERT_TRUE(back) << mem_category_name(cat);
        EXPECT_EQ(*back, cat);
    }
    for (std::string_view other :
         {metric::mem_total_bytes, metric::mem_device_bytes, metric::train_loss,
          std::string_view("mem/"), std::string_view("mem/_bytes"), std::string_view("mem/params"),
          std::string_view("xmem/params_bytes")})
        EXPECT_FALSE(metric::mem_category_of(other)) << other;
    EXPECT_TRUE(run_status::valid("stopped"));
    EXPECT_FALSE(run_status::valid("finished"));
    EXPECT_EQ(run_status::exit_code(run_status::completed), 0);
    EXPECT_EQ(run_status::exit_code(run_status::stopped), 130);
    EXPECT_EQ(run_status::exit_code(run_status::failed), 1);
}

TEST(Telemetry, EncodeStartsWithVersionAndType) {
    std::string line = telemetry_encode(MetricRecord{7, 1, "train/loss", 2.5, 100.25});
    EXPECT_EQ(line.rfind("{\"v\":1,\"type\":\"metric\",", 0), 0u) << line;
}

TEST(Telemetry, RunStartRoundTrip) {
    RunStartRecord in{
        "gpt-tiny \"quoted\"", "model:\n  preset: gpt-tiny\n", "node-0", 4, "{\"stages\":2}",
        1700000000.123456};
    auto out = std::get<RunStartRecord>(round_trip(in));
    EXPECT_EQ(out.name, in.name);
    EXPECT_EQ(out.config_text, in.config_text);
    EXPECT_EQ(out.host, in.host);
    EXPECT_EQ(out.world_size, 4);
    EXPECT_EQ(out.plan_json, in.plan_json);
    EXPECT_EQ(out.wall_time, in.wall_time);
}

TEST(Telemetry, MetricRoundTripIncludingNonFinite) {
    for (double v : {0.1, -3.0e300, 1e-310, std::nan(""), double(INFINITY), -double(INFINITY)}) {
        MetricRecord in{int64_t(1) << 40, 3, "train/loss", v, 1700000000.5};
        auto out = std::get<MetricRecord>(round_trip(in));
        EXPECT_EQ(out.step, in.step);
        EXPECT_EQ(out.rank, 3);
        EXPECT_EQ(out.name, "train/loss");
        if (std::isnan(v))
            EXPECT_TRUE(std::isnan(out.value));
        else
            EXPECT_EQ(out.value, v);
        EXPECT_EQ(out.wall_time, in.wall_time);
    }
}

TEST(Telemetry, SpanErrorCheckpointRunEndRoundTrip) {
    auto s = std::get<SpanRecord>(round_trip(SpanRecord{12, 2, 1, 5, "backward", 0.25, 0.75}));
    EXPECT_EQ(s.step, 12);
    EXPECT_EQ(s.rank, 2);
    EXPECT_EQ(s.stage, 1);
    EXPECT_EQ(s.micro_batch, 5);
    EXPECT_EQ(s.kind, "backward");
    EXPECT_EQ(s.start_s, 0.25);
    EXPECT_EQ(s.end_s, 0.75);
    auto none = std::get<SpanRecord>(round_trip(SpanRecord{1, 0, 0, -1, "optimizer", 1, 2}));
    EXPECT_EQ(none.micro_batch, -1);

    auto e = std::get<ErrorRecord>(round_trip(ErrorRecord{1, 9, "CUDA: out of memory\nline 2", 5}));
    EXPECT_EQ(e.rank, 1);
    EXPECT_EQ(e.step, 9);
    EXPECT_EQ(e.message, "CUDA: out of memory\nline 2");
    EXPECT_EQ(e.wall_time, 5);

    auto c = std::get<CheckpointRecord>(round_trip(CheckpointRecord{100, "ckpt/step_100", 6}));
    EXPECT_EQ(c.step, 100);
    EXPECT_EQ(c.path, "ckpt/step_100");
    EXPECT_EQ(c.wall_time, 6);

    auto r = std::get<RunEndRecord>(round_trip(RunEndRecord{"failed", "rank 1 died", 42, 7}));
    EXPECT_EQ(r.status, "failed");
    EXPECT_EQ(r.message, "rank 1 died");
    EXPECT_EQ(r.last_step, 42);
    EXPECT_EQ(r.wall_time, 7);
}

TEST(Telemetry, DeviceRoundTripAndMissingKey) {
    DeviceRecord in{3, "node-1", "NVIDIA H200", int64_t(150754820096), 1700000000.25};
    std::string line = telemetry_encode(in);
    EXPECT_EQ(line.rfind("{\"v\":1,\"type\":\"device\",", 0), 0u) << line;
    auto out = std::get<DeviceRecord>(telemetry_decode(line));
    EXPECT_EQ(out.rank, 3);
    EXPECT_EQ(out.host, "node-1");
    EXPECT_EQ(out.name, "NVIDIA H200");
    EXPECT_EQ(out.memory_bytes, in.memory_bytes);
    EXPECT_EQ(out.wall_time, in.wall_time);
    std::string e = decode_error(
        "{\"v\":1,\"type\":\"device\",\"rank\":0,\"host\":\"h\","
        "\"name\":\"cpu\",\"wall_time\":1}");
    EXPECT_NE(e.find("missing key 'memory_bytes'"), std::string::npos) << e;
    EXPECT_GT(telemetry_host_memory_bytes(), 0);
}

TEST(Telemetry, LayerTimeRoundTripAndMissingKey) {
    LayerTimeRecord in{41, 2, 1, 7, 0.00125, 0.0031};
    std::string line = telemetry_encode(in);
    EXPECT_EQ(line.rfind("{\"v\":1,\"type\":\"layer_time\",", 0), 0u) << line;
    auto out = std::get<LayerTimeRecord>(telemetry_decode(line));
    EXPECT_EQ(out.step, 41);
    EXPECT_EQ(out.rank, 2);
    EXPECT_EQ(out.stage, 1);
    EXPECT_EQ(out.layer, 7);
    EXPECT_EQ(out.forward_s, in.forward_s);
    EXPECT_EQ(out.backward_s, in.backward_s);
    std::string e = decode_error(
        "{\"v\":1,\"type\":\"layer_time\",\"step\":0,\"rank\":0,\"stage\":0,"
        "\"forward_s\":1,\"backward_s\":2}");
    EXPECT_NE(e.find("missing key 'layer'"), std::string::npos) << e;
}

TEST(Telemetry, DecodeIgnoresUnknownKeysAndTrailingNewline) {
    Record r = telemetry_decode(
        "{\"v\":1,\"type\":\"checkpoint\",\"step\":3,\"path\":\"p\",\"wall_time\":1,"
        "\"added_later\":[1,2]}\n");
    EXPECT_EQ(std::get<CheckpointRecord>(r).step, 3);
}

TEST(Telemetry, DecodeRejectsBadLines) {
    EXPECT_NE(decode_error("").find("malformed JSON"), std::string::npos);
    EXPECT_NE(decode_error("{\"v\":1,\"type\":\"metric\"").find("malformed JSON"),
              std::string::npos);
    EXPECT_NE(decode_error("[1,2]").find("expected a JSON object"), std::string::npos);
    EXPECT_NE(decode_error("{\"type\":\"metric\"}").find("missing key 'v'"), std::string::npos);
    std::string v2 =
        decode_error("{\"v\":2,\"type\":\"checkpoint\",\"step\":3,\"path\":\"p\",\"wall_time\":1}");
    EXPECT_NE(v2.find("unsupported version 2"), std::string::npos) << v2;
    std::string unk = decode_error("{\"v\":1,\"type\":\"bogus\"}");
    EXPECT_NE(unk.find("found 'bogus'"), std::string::npos) << unk;
    std::string missing = decode_error(
        "{\"v\":1,\"type\":\"metric\",\"step\":1,\"rank\":0,"
        "\"name\":\"x\",\"wall_time\":1}");
    EXPECT_NE(missing.find("missing key 'value'"), std::string::npos) << missing;
    std::string typed = decode_error(
        "{\"v\":1,\"type\":\"metric\",\"step\":\"one\",\"rank\":0,"
        "\"name\":\"x\",\"value\":1,\"wall_time\":1}");
    EXPECT_NE(typed.find("key 'step': expected an integer, found string"), std::string::npos)
        << typed;
    std::string big = decode_error(
        "{\"v\":1,\"type\":\"error\",\"rank\":99999999999,\"step\":0,"
        "\"message\":\"m\",\"wall_time\":1}");
    EXPECT_NE(big.find("key 'rank'"), std::string::npos) << big;
    std::string val = decode_error(
        "{\"v\":1,\"type\":\"metric\",\"step\":1,\"rank\":0,"
        "\"name\":\"x\",\"value\":\"NaN?\",\"wall_time\":1}");
    EXPECT_NE(val.find("key 'value'"), std::string::npos) << val;
}

TEST(Telemetry, StreamSinkWritesOneLinePerRecord) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    {
        auto sink = telemetry_stream_sink(fds[1]);
        sink->write(MetricRecord{1, 0, "train/loss", 3.5, telemetry_now()});
        sink->write(RunEndRecord{"completed", "", 1, telemetry_now()});
        sink->flush();
    }
    close(fds[1]);
    std::string all;
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) all.append(buf, size_t(n));
    close(fds[0]);
    size_t nl = all.find('\n');
    ASSERT_NE(nl, std::string::npos);
    ASSERT_EQ(all.back(), '\n');
    EXPECT_EQ(std::get<MetricRecord>(telemetry_decode(all.substr(0, nl))).value, 3.5);
    EXPECT_EQ(std::get<RunEndRecord>(telemetry_decode(all.substr(nl + 1))).status, "completed");
    EXPECT_GT(telemetry_now(), 1.6e9);
}

// ---- BackgroundSink: the step hands its records over, a thread writes them

namespace {

// Keeps the steps of the metrics it was given, in order; flush() blocks while `hold` is set and
// counts (5 s at most); write() throws once `fail_at` records were written.
class RecordingSink final : public TelemetrySink {
  public:
    void write(const Record& r) override {
        std::lock_guard<std::mutex> lk(mu);
        if ((int)steps.size() == fail_at) throw Error("runs.db: database or disk is full");
        steps.push_back(std::get<MetricRecord>(r).step);
    }
    void flush() override {
        // a sink whose flush() waited for this one would stall here: give up after 5 s, so that
        // the test fails on its counts rather than hanging
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (hold.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        flushes.fetch_add(1);
    }
    std::vector<int64_t> written() {
        std::lock_guard<std::mutex> lk(mu);
        return steps;
    }
    std::atomic<bool> hold{false};
    std::atomic<int> flushes{0};
    int fail_at = -1;

  private:
    std::mutex mu;
    std::vector<int64_t> steps;
};

MetricRecord step_metric(int64_t step) {
    return MetricRecord{step, 0, "train/loss", 1.0, 0.0};
}

}  // namespace

TEST(BackgroundSink, FlushDoesNotWaitForTheWriteAndDrainDoes) {
    RecordingSink inner;
    BackgroundSink sink(inner);
    inner.hold = true;  // the inner sink's flush will not return until released
    for (int64_t s = 1; s <= 3; ++s) sink.write(step_metric(s));
    sink.flush();  // returns although the thread is stuck in the inner flush
    for (int64_t s = 4; s <= 5; ++s) sink.write(step_metric(s));
    sink.flush();
    EXPECT_EQ(inner.flushes.load(), 0);
    inner.hold = false;
    sink.drain();
    EXPECT_EQ(inner.written(), (std::vector<int64_t>{1, 2, 3, 4, 5}));
    EXPECT_GE(inner.flushes.load(), 1);
}

TEST(BackgroundSink, TheInnerSinksFailureIsRethrownByTheNextDrain) {
    RecordingSink inner;
    inner.fail_at = 2;
    BackgroundSink sink(inner);
    for (int64_t s = 1; s <= 4; ++s) sink.write(step_metric(s));
    try {
        sink.drain();
        ADD_FAILURE() << "the inner sink's failure was not reported";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("disk is full"), std::string::npos) << e.what();
    }
    EXPECT_EQ(inner.written(), (std::vector<int64_t>{1, 2}));
}

TEST(BackgroundSink, DestroyingItWritesWhatWasBuffered) {
    RecordingSink inner;
    {
        BackgroundSink sink(inner);
        for (int64_t s = 1; s <= 3; ++s) sink.write(step_metric(s));  // never flushed
    }
    EXPECT_EQ(inner.written(), (std::vector<int64_t>{1, 2, 3}));
    EXPECT_EQ(inner.flushes.load(), 1);
}

TEST(BackgroundSink, AFullQueueHoldsTheNextFlushBack) {
    RecordingSink inner;
    BackgroundSink sink(inner, 2);  // at most 2 records waiting for the thread
    inner.hold = true;
    for (int64_t s = 1; s <= 3; ++s) sink.write(step_metric(s));
    sink.flush();  // the thread takes these and waits in the inner flush
    for (int64_t s = 4; s <= 6; ++s) sink.write(step_metric(s));
    sink.flush();  // queued: 3 records, more than 2
    std::thread release([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        inner.hold = false;
    });
    sink.write(step_metric(7));
    sink.flush();  // must wait until the thread took 4-6, after the inner flush returned
    EXPECT_GE(inner.flushes.load(), 1) << "flush() returned while the queue was full";
    release.join();
    sink.drain();
    EXPECT_EQ(inner.written(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}));
}
