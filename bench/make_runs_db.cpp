// make_runs_db: writes a runs.db of synthetic runs through engine/store (bench/synthetic_runs.h),
// the 1,000-run store the Compare page is measured on (bench/compare_scale) and that one can open
// in the studio. A sweep: lr in {3e-4, 1e-3, 3e-3}, seeds, dp in {1, 2, 4}, micro-batch 4 or 8;
// plus LONG runs of LONG_STEPS steps (train/loss only) for the overlay measurement.
//   usage: make_runs_db OUT.db [RUNS=1000] [STEPS=500] [LONG=20] [LONG_STEPS=100000]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench/synthetic_runs.h"

using namespace tessera;

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(
            stderr,
            "usage: make_runs_db OUT.db [RUNS=1000] [STEPS=500] [LONG=20] [LONG_STEPS=100000]\n");
        return 2;
    }
    const std::string path = argv[1];
    const int runs = argc > 2 ? std::atoi(argv[2]) : 1000;
    const int64_t steps = argc > 3 ? std::atoll(argv[3]) : 500;
    const int n_long = argc > 4 ? std::atoi(argv[4]) : 20;
    const int64_t long_steps = argc > 5 ? std::atoll(argv[5]) : 100000;
    if (std::filesystem::exists(path)) {
        std::fprintf(stderr, "make_runs_db: %s exists; not overwriting it\n", path.c_str());
        return 2;
    }
    const auto t0 = std::chrono::steady_clock::now();
    RunStore store = RunStore::open(path);
    const double lrs[] = {3e-4, 1e-3, 3e-3};
    const int dps[] = {1, 2, 4};
    for (int i = 0; i < runs; ++i) {
        bench::SyntheticRun r;
        r.lr = lrs[i % 3];
        r.dp = dps[(i / 3) % 3];
        r.micro_batch = (i / 9) % 2 ? 8 : 4;
        r.seed = i / 18;
        r.steps = steps;
        r.eval_every = 50;
        r.start_time = 1.7e9 + 600.0 * i;
        r.name = "sweep-" + std::to_string(i);
        bench::synthetic_run_add(store, r);
    }
    for (int i = 0; i < n_long; ++i) {
        bench::SyntheticRun r;
        r.name = "long-" + std::to_string(i);
        r.seed = i;
        r.steps = long_steps;
        r.start_time = 1.7e9 + 600.0 * (runs + i);
        const int64_t id = store.run_begin(
            RunStartRecord{r.name, bench::synthetic_config(r), "localhost", 1, "", r.start_time});
        std::vector<Record> batch;
        batch.reserve(10000);
        for (int64_t s = 1; s <= long_steps; ++s) {
            const double loss = 2 + 3 * std::exp(-3.0 * double(s) / double(long_steps)) +
                                0.02 * std::sin(s * 0.7 + i) +
                                (s % 9973 == i ? 2.0 : 0.0);  // a few spikes
            batch.push_back(MetricRecord{s, 0, std::string(metric::train_loss), loss,
                                         r.start_time + 0.5 * double(s)});
            if (batch.size() == 10000) {
                store.append(id, batch);
                batch.clear();
            }
        }
        batch.push_back(RunEndRecord{std::string(run_status::completed), "", long_steps,
                                     r.start_time + 0.5 * double(long_steps)});
        store.append(id, batch);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "make_runs_db: %s: %d runs of %lld steps + %d runs of %lld steps in %.1f s (%.1f MiB)\n",
        path.c_str(), runs, (long long)steps, n_long, (long long)long_steps, s,
        double(std::filesystem::file_size(path)) / (1 << 20));
    return 0;
}
