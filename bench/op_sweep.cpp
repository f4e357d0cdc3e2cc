// bench/op_sweep: the per-op costs the estimator prices a step with (engine/plan/op_costs.h),
// measured through the layers' own ops by the one sweep (engine/plan/op_sweep.h): GEMM forward,
// forward with the GELU epilogue and backward on a grid of (N, C, OC); attention forward and
// backward on a grid of (batch x heads, T) per head width; every memory-bound op at a few sizes
// (fitted as fixed + per-unit time, least squares); AdamW, the squared-norm pass and zeroing per
// fp32 element. On the GPU (layer_ops_cuda, bf16, the grid of GPT-2 shapes) also the host's
// kernel-launch rate, and it writes the JSON the estimator embeds
// (resources/devices/<name>_ops.json) to the path given; with --cpu THREADS, this CPU's kernels
// (fp32) at that many threads, as `tessera plan --calibrate` runs them, to the path given (the
// estimator reads them from cpu_costs_path: engine/plan/op_costs.h).
//
//   build-gpu/bin/op_sweep resources/devices/h200_ops.json
//   build/bin/op_sweep --cpu 2 /tmp/cpu_ops.json
//
// GPU: CUDA events around each op (2 warm-ups, then repeats until 5 ms or 20 runs); buffers hold
// random bf16 values (never time on zeros). Without a GPU (and without --cpu) it says so and
// exits 0.
#include "engine/plan/op_sweep.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

// --host-optimizer OUT.json: only the host's AdamW (the "host_optimizer" section of a GPU's file)
// --cpu THREADS OUT.json: the CPU's sweep (engine/plan/op_sweep.cpp), written where asked
int cpu_sweep(int argc, char** argv) {
    if (argc != 4 || std::atoi(argv[2]) < 1) {
        std::fprintf(stderr, "usage: op_sweep --cpu THREADS OUT.json\n");
        return 2;
    }
    const nlohmann::json out =
        tessera::op_sweep_cpu(std::atoi(argv[2]), [](const char* w) { std::printf("%s\n", w); });
    std::ofstream(argv[3]) << out.dump(1) << "\n";
    std::printf("op_sweep: wrote %s (%s)\n", argv[3],
                out["produced_by"].get<std::string>().c_str());
    return 0;
}

}  // namespace

#ifdef TESSERA_HAVE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_buffers.h"
#include "engine/kernels/cuda/adamw.cuh"
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device.cuh"
#include "engine/kernels/cuda/elementwise.cuh"
#include "engine/kernels/cuda/matmul.cuh"
#include "engine/kernels/fp8_workspace.h"
#include "engine/parallel/layer_ops.h"
#include "engine/plan/op_sweep.h"

using namespace tessera;
using nlohmann::json;

namespace {

void* dev(size_t bytes) {
    return bench::device_random(bytes);
}

// seconds per run: 2 warm-ups, then repeats until 5 ms of work or 20 runs
double time_s(const std::function<void()>& f) {
    cudaStream_t s = cuda_stream();
    CudaEvent a = cuda_event_create(cudaEventDefault), b = cuda_event_create(cudaEventDefault);
    f();
    CUDA_CHECK(cudaEventRecord(a.get(), s));
    f();
    CUDA_CHECK(cudaEventRecord(b.get(), s));
    CUDA_CHECK(cudaEventSynchronize(b.get()));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a.get(), b.get()));
    const int reps = std::clamp((int)(5.0 / std::max(ms, 1e-3f)), 2, 20);
    CUDA_CHECK(cudaEventRecord(a.get(), s));
    for (int i = 0; i < reps; ++i) f();
    CUDA_CHECK(cudaEventRecord(b.get(), s));
    CUDA_CHECK(cudaEventSynchronize(b.get()));
    CUDA_CHECK(cudaEventElapsedTime(&ms, a.get(), b.get()));
    return ms * 1e-3 / reps;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "--cpu") == 0) return cpu_sweep(argc, argv);
    if (argc == 3 && std::strcmp(argv[1], "--host-optimizer") == 0) {  // that section alone
        std::ofstream(argv[2]) << tessera::op_sweep_host_optimizer().dump(1) << "\n";
        return 0;
    }
    if (cuda_device_count() == 0) {
        std::printf("op_sweep: no CUDA GPU visible; nothing measured\n");
        return 0;
    }
    if (argc != 2) {
        std::fprintf(stderr, "usage: op_sweep OUT.json\n");
        return 2;
    }
    cuda_device_init(0);
    LayerOps& ops = layer_ops_cuda(DType::bf16);
    const auto t_start = std::chrono::steady_clock::now();
    json out;
    out["device"] = cuda_device_name();
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    out["cuda_driver"] = driver;
    out["cuda_runtime"] = runtime;
    std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    out["produced_by"] =
        std::string("bench/op_sweep.cpp (the layers' CUDA ops, bf16 and FP8) on ") +
        cuda_device_name() + ", " + date;

    // ---- GEMMs, attention, memory-bound ops, the optimizer (engine/plan/op_sweep.cpp)
    cudaStream_t s = cuda_stream();
    double* acc = nullptr;
    CUDA_CHECK(cudaMalloc(&acc, 8));
    uint16_t* image = nullptr;
    int64_t image_n = 0;
    OpSweepDevice sweep_dev{
        ops,
        [](size_t bytes, bool zeros) -> void* {
            void* p = dev(bytes);
            if (zeros) CUDA_CHECK(cudaMemset(p, 0, bytes));
            return p;
        },
        time_s,
        // as a bf16 run updates: the multi-range kernel, writing the layers' bf16 image too
        [&](float* p, const float* g, float* m, float* v, int64_t n) {
            if (n > image_n) {
                image = (uint16_t*)dev((size_t)n * 2);
                image_n = n;
            }
            const AdamWRange r{p, g, m, v, n, 0.1f, image};
            adamw_multi_cuda(&r, 1, 1e-4f, 0.9f, 0.95f, 1e-8f, 1, 1.0f, s);
        },
        [&](const float* g, int64_t n) { sum_squares_cuda(acc, g, n, s); },
        [&](float* g, int64_t n) { CUDA_CHECK(cudaMemsetAsync(g, 0, n * 4, s)); },
        [](const char* what) { std::printf("%s\n", what); }};
    sweep_dev.gemm_fp8 = &layer_ops_cuda(DType::bf16, true);
    const json sections = op_sweep_run(sweep_dev, op_sweep_grid_gpu());
    out.update(sections);
    float* dW = (float*)dev(4096);
    float* db = (float*)dev(4096);

    // ---- FP8's cut-off: FP8 forced (whatever Fp8Workspace says) against bf16, forward +
    // backward, N 8192, C = OC = D (engine/kernels/fp8_workspace.h records the result)
    {
        const int N = 8192;
        bf16* X = (bf16*)dev((size_t)N * 4096 * 2);
        bf16* Y = (bf16*)dev((size_t)N * 4096 * 2);
        bf16* Z = (bf16*)dev((size_t)N * 4096 * 2);
        bf16* Wt = (bf16*)dev((size_t)4096 * 4096 * 2);
        float* G = (float*)dev((size_t)4096 * 4096 * 4);
        void* ws = dev(Fp8Workspace::of(N, 4096, 4096, true).bytes);
        std::printf("fp8 against bf16, forward + backward, N %d, C = OC = D:\n", N);
        for (int D : {256, 384, 512, 768, 1024, 1536, 2048, 4096}) {
            auto run = [&](void* w8) {
                matmul_forward_cuda<bf16>(Y, X, Wt, nullptr, N, D, D, s, false, nullptr, w8);
                matmul_backward_cuda<bf16>(Z, G, nullptr, Y, X, Wt, N, D, D, s, w8);
            };
            const double t16 = time_s([&] { run(nullptr); }), t8 = time_s([&] { run(ws); });
            std::printf("  D %5d: bf16 %8.1f us, fp8 %8.1f us, %.2fx\n", D, t16 * 1e6, t8 * 1e6,
                        t16 / t8);
        }
        const Fp8Counts c = matmul_fp8_counts();
        std::printf("FP8 GEMMs run in the sweep: forward %ld, dinp %ld, dweight %ld\n", c.forward,
                    c.dinp, c.dweight);
    }

    // ---- the host's launch rate: back-to-back tiny kernels, host wall clock
    {
        for (int i = 0; i < 100; ++i) ops.accumulate(dW, db, 1);
        CUDA_CHECK(cudaStreamSynchronize(s));
        const int n = 5000;
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; ++i) ops.accumulate(dW, db, 1);
        double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CUDA_CHECK(cudaStreamSynchronize(s));
        out["launch_s"] = host / n;
    }
    // ---- AdamW on the host's cores (optimizer offload)
    out["host_optimizer"] = tessera::op_sweep_host_optimizer();
    std::ofstream(argv[1]) << out.dump(1) << "\n";
    std::printf("op_sweep: wrote %s in %.0f s (launch %.2f us)\n", argv[1],
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(),
                out["launch_s"].get<double>() * 1e6);
    return 0;
}
#else
int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "--cpu") == 0) return cpu_sweep(argc, argv);
    std::printf(
        "op_sweep: built without CUDA; nothing measured on a GPU (--cpu THREADS OUT.json: the "
        "CPU)\n");
    return 0;
}
#endif
