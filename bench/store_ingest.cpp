// store_ingest: rows/s for metric rows going into runs.db through store_sink (goal >= 200k rows/s),
// next to its peer on the same path, the launcher's JSON-line decode rate. Prints; never asserts.
//   usage: store_ingest [ROWS=2000000] [BATCH=512]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"

using namespace tessera;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
    int64_t rows = argc > 1 ? std::atoll(argv[1]) : 2000000;
    int batch = argc > 2 ? std::atoi(argv[2]) : 512;
    const std::string_view names[] = {metric::train_loss, metric::train_lr, metric::train_grad_norm,
                                      metric::perf_tok_per_s};
    std::string dir = (std::filesystem::temp_directory_path() / "tessera_store_ingest").string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::string path = dir + "/runs.db";

    // ---- store_sink: rows -> SQLite (WAL, one transaction per batch) ----
    double sink_s = 0;
    {
        RunStore store = RunStore::open(path);
        int64_t run = store.run_begin(RunStartRecord{"bench", "", "localhost", 1, "", 0});
        auto sink = store_sink(store, run, batch);
        auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < rows; ++i)
            sink->write(
                MetricRecord{i / 4, 0, std::string(names[i % 4]), 1.0 / double(i + 1), 1.7e9 + i});
        sink->write(RunEndRecord{std::string(run_status::completed), "", rows / 4, 0});
        sink_s = seconds_since(t0);
        if (store.metrics(run, metric::train_loss, 0).size() != size_t((rows + 3) / 4))
            std::fprintf(stderr, "store_ingest: row count mismatch\n");
    }
    auto db_bytes = std::filesystem::file_size(path);

    // ---- peer: telemetry_encode + telemetry_decode (the rank -> launcher pipe) ----
    int64_t n_json = std::min<int64_t>(rows, 500000);
    auto t1 = std::chrono::steady_clock::now();
    double check = 0;
    for (int64_t i = 0; i < n_json; ++i) {
        std::string line = telemetry_encode(
            MetricRecord{i / 4, 0, std::string(names[i % 4]), 1.0 / double(i + 1), 1.7e9 + i});
        check += std::get<MetricRecord>(telemetry_decode(line)).value;
    }
    double json_s = seconds_since(t1);

    std::printf("store_ingest: %lld metric rows, batch %d\n", (long long)rows, batch);
    std::printf("  store_sink -> runs.db    %10.0f rows/s  (%.2f s, db %.1f MiB; goal >= 200000)\n",
                double(rows) / sink_s, sink_s, double(db_bytes) / (1 << 20));
    std::printf("  json encode+decode       %10.0f rows/s  (%lld rows, %.2f s; checksum %.3f)\n",
                double(n_json) / json_s, (long long)n_json, json_s, check);
    std::filesystem::remove_all(dir);
    return 0;
}
