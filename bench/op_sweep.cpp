// bench/op_sweep: the per-op costs the estimator prices a GPU step with (engine/plan/op_costs.h),
// measured on this GPU through the layers' own ops (layer_ops_cuda, bf16): GEMM forward, forward
// with the GELU epilogue and backward on a grid of (N, C, OC); flash attention forward and
// backward on a grid of (batch x heads, T) for head widths 64 and 128; every memory-bound op at
// a few sizes (fitted as fixed + per-unit time, least squares); AdamW, the squared-norm pass and
// zeroing per fp32 element; the host's kernel-launch rate. Writes the JSON the estimator embeds
// (resources/devices/<name>_ops.json) to the path given, and a summary to stdout.
//
//   build-gpu/bin/op_sweep resources/devices/h200_ops.json
//
// CUDA events around each op (2 warm-ups, then repeats until 5 ms or 20 runs); buffers hold
// random bf16 values (never time on zeros). Without a GPU it says so and exits 0.
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
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cuda_buffers.h"
#include "engine/kernels/cuda/adamw.cuh"
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device.cuh"
#include "engine/kernels/cuda/elementwise.cuh"
#include "engine/kernels/cuda/matmul.cuh"
#include "engine/kernels/fp8_workspace.h"
#include "engine/kernels/cpu/rope.h"
#include "engine/parallel/layer_ops.h"

using namespace tessera;
using nlohmann::json;

namespace {

void* dev(size_t bytes) { return bench::device_random(bytes); }

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

// least squares t = fixed + per_unit · size over the points
json fit_linear(const std::vector<std::pair<double, double>>& pts) {
    double n = pts.size(), sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (auto [x, y] : pts) sx += x, sy += y, sxx += x * x, sxy += x * y;
    double b = (n * sxy - sx * sy) / (n * sxx - sx * sx), a = (sy - b * sx) / n;
    if (a < 0) a = 0, b = sxy / sxx;  // through the origin when the intercept fits below zero
    json pj = json::array();
    for (auto [x, y] : pts) pj.push_back({x, y});
    return {{"fixed_s", a}, {"per_unit_s", b}, {"points", pj}};
}

}  // namespace

int main(int argc, char** argv) {
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
    out["produced_by"] = std::string("bench/op_sweep.cpp (the layers' CUDA ops, bf16 and FP8) on ") + cuda_device_name() + ", " + date;

    // ---- GEMMs on a grid
    const std::vector<int> Ns{512, 1024, 2048, 4096, 8192, 16384, 32768};
    const std::vector<int> Cs{256, 512, 768, 1024, 1280, 1600, 2048, 4096, 6400};
    const std::vector<int> OCs{256, 768, 1024, 1280, 1600, 2304, 3072, 3840, 4096, 4800, 5120, 6400, 12800, 50304};
    const size_t maxN = Ns.back(), maxC = Cs.back(), maxOC = OCs.back();
    void* A = dev(maxN * maxC * 2);
    void* A2 = dev(maxN * maxC * 2);
    void* W = dev(maxOC * maxC * 2);
    void* bias = dev(maxOC * 2);
    void* O = dev(maxN * maxOC * 2);
    void* O2 = dev(maxN * maxOC * 2);
    float* dW = (float*)dev(maxOC * maxC * 4);
    float* db = (float*)dev(maxOC * 4);
    json fwd = json::array(), fwdg = json::array(), bwd = json::array();
    for (int N : Ns)
        for (int C : Cs)
            for (int OC : OCs) {
                // the backward's output gradient is O, its input A (N, C)
                fwd.push_back(time_s([&] { ops.matmul_forward(O, A, W, bias, N, C, OC); }));
                fwdg.push_back(time_s([&] { ops.matmul_gelu_forward(O2, O, A, W, bias, N, C, OC); }));
                bwd.push_back(time_s([&] { ops.matmul_backward(A2, dW, db, O, A, W, N, C, OC); }));
            }
    out["gemm"] = {{"N", Ns}, {"C", Cs}, {"OC", OCs}, {"forward_s", fwd}, {"forward_gelu_s", fwdg},
                   {"backward_s", bwd}, {"layout", "index (n * |C| + c) * |OC| + oc"}};
    std::printf("gemm: %zu shapes\n", fwd.size());

    // ---- the same GEMMs in FP8 (runtime.precision fp8), quantization and workspace included;
    // shapes below Fp8Workspace's cut-off run in bf16 there, as in training
    LayerOps& ops8 = layer_ops_cuda(DType::bf16, true);
    json fwd8 = json::array(), fwdg8 = json::array(), bwd8 = json::array();
    for (int N : Ns)
        for (int C : Cs)
            for (int OC : OCs) {
                fwd8.push_back(time_s([&] { ops8.matmul_forward(O, A, W, bias, N, C, OC); }));
                fwdg8.push_back(time_s([&] { ops8.matmul_gelu_forward(O2, O, A, W, bias, N, C, OC); }));
                bwd8.push_back(time_s([&] { ops8.matmul_backward(A2, dW, db, O, A, W, N, C, OC); }));
            }
    out["gemm_fp8"] = {{"forward_s", fwd8}, {"forward_gelu_s", fwdg8}, {"backward_s", bwd8},
                       {"scaling", "per-tensor current scaling; e4m3 inputs and weights, e5m2 gradients"}};
    // The cut-off: FP8 forced (Fp8Workspace ignored) against bf16, forward + backward, N 8192
    std::printf("fp8 against bf16, forward + backward, N 8192, C = OC = D:\n");
    void* ws = dev(Fp8Workspace::of(8192, 8192, 8192, true).bytes);
    for (int D : {256, 384, 512, 768, 1024, 1536, 2048, 4096}) {
        const int N = 8192;
        auto run = [&](void* w8) {
            matmul_forward_cuda<bf16>((bf16*)O, (bf16*)A, (bf16*)W, nullptr, N, D, D, cuda_stream(), false,
                                      nullptr, w8);
            matmul_backward_cuda<bf16>((bf16*)A2, dW, nullptr, (bf16*)O, (bf16*)A, (bf16*)W, N, D, D,
                                       cuda_stream(), w8);
        };
        const double t16 = time_s([&] { run(nullptr); }), t8 = time_s([&] { run(ws); });
        std::printf("  D %5d: bf16 %8.1f us, fp8 %8.1f us, %.2fx\n", D, t16 * 1e6, t8 * 1e6, t16 / t8);
    }

    // ---- flash attention on (batch x heads, T), head width 64 and 128
    const std::vector<int> BHs{8, 32, 128, 512}, Ts{128, 256, 512, 1024, 2048, 4096}, HDs{64, 128};
    json afwd = json::array(), abwd = json::array();
    float* lse = (float*)dev((size_t)512 * 4096 * 4);
    for (int hd : HDs)
        for (int bh : BHs)
            for (int T : Ts) {
                // B samples of NH heads: NH = 8 (bh >= 8), B = bh / 8; qkv (B, T, 3C) in O, the
                // output, its gradient and dqkv in O2
                const int NH = 8, B = bh / NH, C = NH * hd;
                const size_t btc = (size_t)B * T * C;
                bf16* out = (bf16*)O2;
                bf16* dout = out + btc;
                bf16* dqkv = dout + btc;
                afwd.push_back(time_s([&] { ops.attention_forward(out, lse, O, B, T, C, NH, NH); }));
                abwd.push_back(time_s([&] { ops.attention_backward(dqkv, dout, O, out, lse, B, T, C, NH, NH); }));
            }
    out["attention"] = {{"head_dim", HDs}, {"BH", BHs}, {"T", Ts}, {"forward_s", afwd}, {"backward_s", abwd},
                        {"layout", "index (hd * |BH| + bh) * |T| + t"}};
    std::printf("attention: %zu shapes\n", afwd.size());

    // ---- memory-bound ops: fixed + per-unit (the unit per op: engine/plan/op_costs.cpp)
    json lin;
    const std::vector<std::pair<int, int>> NC{{4096, 768}, {16384, 768}, {16384, 1600}, {32768, 1280}};
    int* tokens = (int*)dev(maxN * 4);
    CUDA_CHECK(cudaMemset(tokens, 0, maxN * 4));
    float* stats = (float*)dev(maxN * 16);
    auto sweep = [&](const char* name, const std::function<void(int, int)>& f, const std::function<double(int, int)>& units) {
        std::vector<std::pair<double, double>> pts;
        for (auto [N, C] : NC) pts.push_back({units(N, C), time_s([&] { f(N, C); })});
        lin[name] = fit_linear(pts);
    };
    auto NxC = [](int N, int C) { return (double)N * C; };
    sweep("layernorm_forward", [&](int N, int C) { ops.layernorm_forward(O, stats, stats + N, A, W, W, N, C); }, NxC);
    sweep("layernorm_backward", [&](int N, int C) {
        ops.layernorm_backward(O2, dW, db, O, A, W, stats, stats + N, N, C); }, NxC);
    // the Llama family's: RMSNorm, rotary embeddings (heads of 64 in rows of C), SwiGLU (F = C/2)
    sweep("rmsnorm_forward", [&](int N, int C) { ops.rmsnorm_forward(O, stats, A, W, N, C, 1e-5f); }, NxC);
    sweep("rmsnorm_backward", [&](int N, int C) { ops.rmsnorm_backward(O2, dW, O, A, W, stats, N, C); }, NxC);
    const std::vector<float> inv_freq = rope_inv_freq(64, 1e4f, RopeScaling{});
    sweep("rope", [&](int N, int C) { ops.rope(O, N / 1024, 1024, C / 64, 64, C, inv_freq, false); },
          [](int N, int C) { return (double)N * (C / 64 * 64); });
    auto NxF = [](int N, int C) { return (double)N * (C / 2); };
    sweep("swiglu_forward", [&](int N, int C) { ops.swiglu_forward(O, A, N, C / 2); }, NxF);
    sweep("swiglu_backward", [&](int N, int C) { ops.swiglu_backward(O2, O, A, N, C / 2); }, NxF);
    sweep("gelu_forward", [&](int N, int C) { ops.gelu_forward(O, A, (int64_t)N * C); }, NxC);
    sweep("gelu_backward", [&](int N, int C) { ops.gelu_backward(O, A, O, (int64_t)N * C); }, NxC);
    sweep("relu_forward", [&](int N, int C) { ops.relu_forward(O, A, (int64_t)N * C); }, NxC);
    sweep("relu_backward", [&](int N, int C) { ops.relu_backward(O, A, O, (int64_t)N * C); }, NxC);
    sweep("add_bias_residual", [&](int N, int C) { ops.add_bias_residual(O, bias, A, N, C); }, NxC);
    sweep("embedding_forward", [&](int N, int C) {
        ops.embedding_forward(O, tokens, W, W, 0, 50257, N / 1024, 1024, C); }, NxC);
    sweep("embedding_backward", [&](int N, int C) {
        ops.embedding_backward(dW, dW, O, tokens, 0, 50257, N / 1024, 1024, C); }, NxC);
    sweep("accumulate", [&](int N, int C) { ops.accumulate(dW, dW + (size_t)N * C / 2, (int64_t)N * C / 2); },
          [](int N, int C) { return (double)N * C / 2; });
    sweep("cast_weights", [&](int N, int C) { ops.cast_weights(O, dW, (int64_t)N * C / 2); },
          [](int N, int C) { return (double)N * C / 2; });
    sweep("copy", [&](int N, int C) { ops.copy(O, A, (int64_t)N * C * 2); },
          [](int N, int C) { return (double)N * C * 2; });
    // the classifier over (N rows, padded vocabulary)
    {
        std::vector<std::pair<double, double>> st, lo;
        for (auto [N, V] : std::vector<std::pair<int, int>>{{1024, 50304}, {4096, 50304}, {16384, 50304}, {16384, 25216}}) {
            st.push_back({(double)N * V, time_s([&] {
                              ops.cross_entropy_stats(stats, nullptr, O, tokens, 0, N, V - 47, V, TpGroup{});
                          })});
            lo.push_back({(double)N * V, time_s([&] {
                              ops.cross_entropy_loss(stats + 3 * N, O, stats, tokens, 0, N, V - 47, V, 1e-6f, true);
                          })});
        }
        lin["cross_entropy_stats"] = fit_linear(st);
        lin["cross_entropy_loss"] = fit_linear(lo);
    }
    out["linear"] = lin;

    // ---- the optimizer's passes per fp32 element
    {
        const long n1 = 10'000'000, n2 = 124'475'904;
        float* p = (float*)dev(n2 * 4);
        float* g = (float*)dev(n2 * 4);
        float* m = (float*)dev(n2 * 4);
        float* v = (float*)dev(n2 * 4);
        double* acc = nullptr;
        CUDA_CHECK(cudaMalloc(&acc, 8));
        cudaStream_t s = cuda_stream();
        std::vector<std::pair<double, double>> ad, sq, ze;
        for (long n : {n1, n2}) {
            ad.push_back({(double)n, time_s([&] { adamw_cuda(p, g, m, v, n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f, s); })});
            sq.push_back({(double)n, time_s([&] { sum_squares_cuda(acc, g, n, s); })});
            ze.push_back({(double)n, time_s([&] { CUDA_CHECK(cudaMemsetAsync(g, 0, n * 4, s)); })});
        }
        out["optimizer"] = {{"adamw", fit_linear(ad)}, {"sum_squares", fit_linear(sq)}, {"zero", fit_linear(ze)}};
    }

    // ---- the host's launch rate: back-to-back tiny kernels, host wall clock
    {
        cudaStream_t s = cuda_stream();
        for (int i = 0; i < 100; ++i) ops.accumulate(dW, db, 1);
        CUDA_CHECK(cudaStreamSynchronize(s));
        const int n = 5000;
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; ++i) ops.accumulate(dW, db, 1);
        double host = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CUDA_CHECK(cudaStreamSynchronize(s));
        out["launch_s"] = host / n;
    }
    std::ofstream(argv[1]) << out.dump(1) << "\n";
    std::printf("op_sweep: wrote %s in %.0f s (launch %.2f us)\n", argv[1],
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(),
                out["launch_s"].get<double>() * 1e6);
    return 0;
}
#else
#include <cstdio>
int main() {
    std::printf("op_sweep: built without CUDA; nothing measured\n");
    return 0;
}
#endif
