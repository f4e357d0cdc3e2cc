// CPU training-step throughput of the reference GPT (engine/model/gpt.cpp, the equivalence
// matrix's oracle, not the training path): achieved GFLOP/s of a full step (forward, backward,
// AdamW) next to OpenBLAS sgemm's GFLOP/s on the same GEMM shapes, measured in the same run. The
// product's step (the runtime's layers, one rank included) is bench/cpu_step_time.py's.
// usage: cpu_train_step [n_layer d_model n_head seq_len micro_batch] (default: the quickstart)
#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "engine/model/gpt.h"
#include "engine/optim/optimizer.h"

using namespace tessera;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

int main(int argc, char** argv) {
    GptDims d;  // gpt-tiny, bytes
    int B = 16;
    if (argc == 6) {
        d.n_layer = std::atoi(argv[1]);
        d.d_model = std::atoi(argv[2]);
        d.n_head = std::atoi(argv[3]);
        d.seq_len = std::atoi(argv[4]);
        B = std::atoi(argv[5]);
    }
    const int T = d.seq_len, C = d.d_model, V = d.vocab, N = B * T;
    const int threads = omp_get_max_threads();

    // ---- the reference's training step (OpenMP slices, single-threaded BLAS, as the runtime's
    // kernels)
    openblas_set_num_threads(1);
    GptModel model(d);
    model.init_params(1);
    OptimizerConfig oc;
    AdamW opt(model.param_table(), oc);
    Batch b;
    b.batch_size = B;
    b.seq_len = T;
    std::mt19937 rng(1);
    for (int i = 0; i < N; ++i) {
        b.inputs.push_back(rng() % V);
        b.targets.push_back(rng() % V);
    }
    auto step = [&](int s) {
        model.zero_grads();
        model.forward_backward(b, 1.0f / N);
        double norm = grad_global_norm(model.grads().f32(), model.param_table().total_numel());
        opt.step(model.params().f32(), model.grads().f32(), s, norm);
    };
    for (int s = 0; s < 3; ++s) step(s);
    const int iters = 20;
    auto t0 = Clock::now();
    for (int s = 0; s < iters; ++s) step(s);
    double step_s = since(t0) / iters;
    double flops = model.train_flops_per_target() * N;
    double step_gflops = flops / step_s / 1e9;

    // ---- the peer: OpenBLAS sgemm (its own threads) on the step's GEMM shapes
    openblas_set_num_threads(threads);
    struct Shape3 {
        int M, N, K, count;
    };
    std::vector<Shape3> shapes;
    for (int oc2 : {3 * C, C, 4 * C}) {            // qkv, attn proj, fc
        shapes.push_back({N, oc2, C, d.n_layer});  // forward
        shapes.push_back({N, C, oc2, d.n_layer});  // dinp
        shapes.push_back({oc2, C, N, d.n_layer});  // dweight
    }
    shapes.push_back({N, C, 4 * C, d.n_layer});  // fc proj forward
    shapes.push_back({N, 4 * C, C, d.n_layer});  // fc proj dinp
    shapes.push_back({C, 4 * C, N, d.n_layer});  // fc proj dweight
    shapes.push_back({N, V, C, 1});              // lm head forward
    shapes.push_back({N, C, V, 1});              // lm head dinp
    shapes.push_back({V, C, N, 1});              // lm head dweight
    double gemm_flops = 0, gemm_s = 0;
    for (const auto& s : shapes) {
        std::vector<float> A((size_t)s.M * s.K, 0.01f), Bm((size_t)s.K * s.N, 0.02f),
            Cm((size_t)s.M * s.N);
        auto run = [&] {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.M, s.N, s.K, 1.0f, A.data(),
                        s.K, Bm.data(), s.N, 0.0f, Cm.data(), s.N);
        };
        run();
        int reps = 10;
        auto g0 = Clock::now();
        for (int r = 0; r < reps; ++r) run();
        double t = since(g0) / reps;
        gemm_s += t * s.count;
        gemm_flops += 2.0 * s.M * s.N * s.K * s.count;
    }
    double sgemm_gflops = gemm_flops / gemm_s / 1e9;

    std::printf("model: %s, micro-batch %d, %d threads\n", model.describe().c_str(), B, threads);
    std::printf("%-44s %10s %12s\n", "measure", "ms", "GFLOP/s");
    std::printf("%-44s %10.2f %12.1f\n", "reference GPT step (fwd+bwd+AdamW)", step_s * 1e3,
                step_gflops);
    std::printf("%-44s %10.2f %12.1f\n", "OpenBLAS sgemm, same GEMM shapes (peer)", gemm_s * 1e3,
                sgemm_gflops);
    std::printf("ratio step / sgemm: %.2f (goal >= 0.5); tokens/s %.0f\n",
                step_gflops / sgemm_gflops, N / step_s);
    return 0;
}
