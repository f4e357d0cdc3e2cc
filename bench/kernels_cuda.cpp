// bench/kernels: every CUDA op of the GPT-2 124M training step (B=16, T=1024, C=768, bf16) timed
// with CUDA events and set against its roofline, both measured in the same run: memory-bound ops
// against the measured device-to-device copy bandwidth (bytes moved / bandwidth), matmul-bound
// ops against the measured rate of a large bf16 GEMM (FLOPs / rate). Prints one table.
// One table alone: --attention, --norms (or --rmsnorm), --bias-grad (the column sums at GPT-2's
// widths), --gemm-algos (cuBLASLt's candidates at the models' shapes).
// Without a GPU it says so and exits 0 (it is a benchmark, not a test).
#ifdef TESSERA_HAVE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_buffers.h"
#include "engine/kernels/cuda/adamw.cuh"
#include "engine/kernels/cuda/attention.cuh"
#include "engine/kernels/cuda/cross_entropy.cuh"
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/device.cuh"
#include "engine/kernels/cuda/elementwise.cuh"
#include "engine/kernels/cuda/embedding.cuh"
#include "engine/kernels/cuda/gelu.cuh"
#include "engine/kernels/cuda/layernorm.cuh"
#include "engine/kernels/cuda/matmul.cuh"

using namespace tessera;

namespace {

void* dev(size_t bytes) {
    return bench::device_random(bytes);
}

void* dev_zero(size_t bytes) {  // token ids: valid (zero) indices
    void* p = dev(bytes);
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    return p;
}

// median-free: mean of `reps` runs after 3 warm-ups, in milliseconds
double time_ms(const std::function<void()>& f, int reps = 20) {
    cudaStream_t s = cuda_stream();
    for (int i = 0; i < 3; ++i) f();
    CudaEvent a = cuda_event_create(cudaEventDefault), b = cuda_event_create(cudaEventDefault);
    CUDA_CHECK(cudaEventRecord(a.get(), s));
    for (int i = 0; i < reps; ++i) f();
    CUDA_CHECK(cudaEventRecord(b.get(), s));
    CUDA_CHECK(cudaEventSynchronize(b.get()));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a.get(), b.get()));
    return ms / reps;
}

// the device-to-device copy's bandwidth, bytes read + written per second (1 GiB each way)
double copy_bandwidth() {
    const size_t big = 1ull << 30;
    DeviceBuffer<> x(dev(big)), y(dev(big));
    const double ms = time_ms([&] {
        CUDA_CHECK(cudaMemcpyAsync(y.get(), x.get(), big, cudaMemcpyDeviceToDevice, cuda_stream()));
    });
    return 2.0 * big / (ms * 1e-3);
}

}  // namespace

// The fused attention at the head layouts of the models Tessera trains (causal, bf16): forward
// and backward milliseconds and TFLOP/s (forward 4·B·NH·T²·hs/2 FLOPs, backward 2.5× that).
void attention_shapes() {
    struct Shape {
        const char* name;
        int B, T, NH, KV, hs;
    };
    const Shape shapes[] = {{"gpt2 (B16 T1024 12/12 hs64)", 16, 1024, 12, 12, 64},
                            {"gpt2 (B4 T1024 12/12 hs64)", 4, 1024, 12, 12, 64},
                            {"smollm-135m (B16 T2048 9/3 hs64)", 16, 2048, 9, 3, 64},
                            {"smollm-135m (B4 T2048 9/3 hs64)", 4, 2048, 9, 3, 64},
                            {"qwen2.5-0.5b (B8 T2048 14/2 hs64)", 8, 2048, 14, 2, 64},
                            {"llama-3.2-1b (B8 T2048 32/8 hs64)", 8, 2048, 32, 8, 64},
                            {"llama-3.2-1b (B2 T2048 32/8 hs64)", 2, 2048, 32, 8, 64},
                            {"qwen2.5-0.5b (B16 T2048 14/2 hs64)", 16, 2048, 14, 2, 64},
                            {"qwen3-0.6b (B8 T2048 16/8 hs128)", 8, 2048, 16, 8, 128}};
    cudaStream_t s = cuda_stream();
    std::printf("%-36s %9s %9s %9s %9s\n", "attention shape", "fwd ms", "TFLOP/s", "bwd ms",
                "TFLOP/s");
    for (const Shape& x : shapes) {
        const long N = (long)x.B * x.T, C = (long)x.NH * x.hs, W = C + 2L * x.KV * x.hs;
        DeviceBuffer<> qkv(dev(N * W * 2)), dqkv(dev(N * W * 2)), out(dev(N * C * 2)),
            dout(dev(N * C * 2)), lse(dev((size_t)x.B * x.NH * x.T * 4));
        const double flops = 4.0 * x.B * x.NH * (double)x.T * x.T * x.hs / 2;
        const double f = time_ms([&] {
            attention_forward_cuda<bf16>((bf16*)out.get(), (float*)lse.get(), (bf16*)qkv.get(), x.B,
                                         x.T, (int)C, x.NH, x.KV, s);
        });
        const double b = time_ms([&] {
            attention_backward_cuda<bf16>((bf16*)dqkv.get(), (bf16*)dout.get(), (bf16*)qkv.get(),
                                          (bf16*)out.get(), (float*)lse.get(), x.B, x.T, (int)C,
                                          x.NH, x.KV, s);
        });
        std::printf("%-36s %9.3f %9.1f %9.3f %9.1f\n", x.name, f, flops / (f * 1e-3) / 1e12, b,
                    2.5 * flops / (b * 1e-3) / 1e12);
    }
}

// The norms' backward at the models' rows (bf16): both gradients in one call (one pass over the
// rows where a kernel takes them: in registers up to 1024 columns, wider in shared memory) against
// the two passes, timed as the dinp-only and the parameters-only calls, whose sum is what both
// cost without the one pass. LayerNorm at GPT-2's widths, RMSNorm at the Llama family's.
void norm_shapes() {
    struct Shape {
        const char* name;
        int N, C;
        bool layernorm;
    };
    const Shape shapes[] = {{"ln gpt2 (B16, 768)", 16 * 1024, 768, true},
                            {"ln gpt2-medium (B16, 1024)", 16 * 1024, 1024, true},
                            {"ln gpt2-large (B8, 1280)", 8 * 1024, 1280, true},
                            {"ln gpt2-xl (B8, 1600)", 8 * 1024, 1600, true},
                            {"rms smollm-135m (B16 T2048, 576)", 16 * 2048, 576, false},
                            {"rms qwen2.5-0.5b (B8 T2048, 896)", 8 * 2048, 896, false},
                            {"rms qwen3-0.6b (B8 T2048, 1024)", 8 * 2048, 1024, false},
                            {"rms llama-3.2-1b (B8 T2048, 2048)", 8 * 2048, 2048, false},
                            {"rms llama-3.1-8b (B1 T8192, 4096)", 8192, 4096, false}};
    cudaStream_t s = cuda_stream();
    std::printf("%-36s %10s %10s %10s %10s\n", "norm backward (bf16)", "both ms", "dinp ms",
                "params ms", "two/one");
    for (const Shape& x : shapes) {
        const long n = (long)x.N * x.C;
        DeviceBuffer<> dinp(dev(n * 2)), dout(dev(n * 2)), inp(dev(n * 2)), w(dev(x.C * 2)),
            dw(dev(x.C * 4 * 2)), stats(dev(x.N * 4 * 2));
        auto call = [&](bool want_dinp, bool want_dw) {
            bf16* di = want_dinp ? (bf16*)dinp.get() : nullptr;
            float* dwp = want_dw ? (float*)dw.get() : nullptr;
            const float* st = (const float*)stats.get();
            if (x.layernorm)
                layernorm_backward_cuda<bf16>(di, dwp, dwp ? dwp + x.C : nullptr, (bf16*)dout.get(),
                                              (bf16*)inp.get(), (bf16*)w.get(), st, st + x.N, x.N,
                                              x.C, s);
            else
                rmsnorm_backward_cuda<bf16>(di, dwp, (bf16*)dout.get(), (bf16*)inp.get(),
                                            (bf16*)w.get(), st, x.N, x.C, s);
        };
        const double both = time_ms([&] { call(true, true); });
        const double di = time_ms([&] { call(true, false); });
        const double dwt = time_ms([&] { call(false, true); });
        std::printf("%-36s %10.4f %10.4f %10.4f %9.2fx\n", x.name, both, di, dwt,
                    (di + dwt) / both);
    }
}

// The bias gradients alone (column sums of dout, matmul_backward_cuda with no dinp or dweight) at
// GPT-2's Linear widths and throughput micro-batches, against the device-to-device copy's
// bandwidth measured in the same run (the sums read dout once: bytes / copy bandwidth).
void bias_grad_shapes() {
    struct Shape {
        const char* name;
        int N, OC, layers;  // layers: calls per step at that width
    };
    const Shape shapes[] = {
        {"gpt2 B16: qkv", 16384, 2304, 12},   {"gpt2 B16: proj", 16384, 768, 24},
        {"gpt2 B16: fc", 16384, 3072, 12},    {"gpt2-xl B8: qkv", 8192, 4800, 48},
        {"gpt2-xl B8: proj", 8192, 1600, 96}, {"gpt2-xl B8: fc", 8192, 6400, 48},
    };
    cudaStream_t s = cuda_stream();
    const double bw = copy_bandwidth();
    std::printf("bias gradient (bf16 dout)    %10s %10s %9s %12s\n", "ms", "GB/s", "roofline",
                "ms per step");
    for (const Shape& x : shapes) {
        const long n = (long)x.N * x.OC;
        DeviceBuffer<> dout(dev(n * 2)), db(dev((size_t)x.OC * 4));
        const double ms = time_ms([&] {
            matmul_backward_cuda<bf16>(nullptr, nullptr, (float*)db.get(), (bf16*)dout.get(),
                                       nullptr, nullptr, x.N, 1, x.OC, s);
        });
        std::printf("%-28s %10.4f %10.0f %8.0f%% %12.3f\n", x.name, ms, 2.0 * n / (ms * 1e-3) / 1e9,
                    100.0 * (2.0 * n / bw) / (ms * 1e-3), ms * x.layers);
    }
}

// cuBLASLt's heuristic candidates at the models' GEMM shapes (bf16, their throughput benches'
// micro-batches): the heuristic's first choice, the fastest of its first 8, and the one matmul.cu
// runs (the host's choice, timed on its first call), and what the choice is worth per training
// step (each shape times its layers; the head once).
void gemm_algos() {
    struct Model {
        const char* name;
        int N, layers;
        std::vector<std::array<int, 2>> linears;  // (C, OC) per block; the head last, once
    };
    const Model models[] = {
        {"gpt2 B16",
         16 * 1024,
         12,
         {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}, {768, 50304}}},
        {"gpt2-xl B8",
         8 * 1024,
         48,
         {{1600, 4800}, {1600, 1600}, {1600, 6400}, {6400, 1600}, {1600, 50304}}},
        {"qwen2.5-0.5b B8",
         8 * 2048,
         24,
         {{896, 1152}, {896, 896}, {896, 9728}, {4864, 896}, {896, 151936}}},
        {"llama-3.2-1b B8",
         8 * 2048,
         16,
         {{2048, 3072}, {2048, 2048}, {2048, 16384}, {8192, 2048}, {2048, 128256}}},
    };
    const char* kinds[] = {"fwd", "dinp", "dw"};
    std::printf("%-18s %-14s %-5s %9s %9s %5s %9s %5s %5s\n", "model", "C x OC", "gemm", "first ms",
                "best ms", "best", "run ms", "run", "cand");
    for (const Model& m : models) {
        double first_step = 0, best_step = 0, run_step = 0;
        for (size_t i = 0; i < m.linears.size(); ++i) {
            const int C = m.linears[i][0], OC = m.linears[i][1];
            const int times = i + 1 == m.linears.size() ? 1 : m.layers;
            for (int k = 0; k < 3; ++k) {
                const auto c = matmul_candidates_cuda(k, m.N, C, OC, 8, 10);
                if (c.empty()) continue;
                int best = 0, run = 0;
                for (size_t j = 0; j < c.size(); ++j) {
                    if (c[j].ms > 0 && (c[best].ms < 0 || c[j].ms < c[best].ms)) best = (int)j;
                    if (c[j].chosen) run = (int)j;
                }
                std::printf("%-18s %6d x %-6d %-5s %9.4f %9.4f %5d %9.4f %5d %5zu\n", m.name, C, OC,
                            kinds[k], c[0].ms, c[best].ms, best, c[run].ms, run, c.size());
                first_step += times * c[0].ms;
                best_step += times * c[best].ms;
                run_step += times * c[run].ms;
            }
        }
        std::printf(
            "%-18s GEMMs per step: heuristic's first %.2f ms, fastest %.2f ms (%.1f%% less), "
            "run %.2f ms (%.1f%% less)\n",
            m.name, first_step, best_step, 100.0 * (1 - best_step / first_step), run_step,
            100.0 * (1 - run_step / first_step));
    }
}

int main(int argc, char** argv) {
    if (cuda_device_count() == 0) {
        std::printf("kernels_cuda: no CUDA GPU visible; nothing measured\n");
        return 0;
    }
    cuda_device_init(0);
    if (argc > 1 && std::strcmp(argv[1], "--gemm-algos") == 0) {
        gemm_algos();
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--attention") == 0) {  // only the attention table
        attention_shapes();
        return 0;
    }
    if (argc > 1 && (std::strcmp(argv[1], "--norms") == 0 ||
                     std::strcmp(argv[1], "--rmsnorm") == 0)) {  // only the norms' table
        norm_shapes();
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--bias-grad") == 0) {  // only the bias gradients
        bias_grad_shapes();
        return 0;
    }
    cudaStream_t s = cuda_stream();
    const int B = 16, T = 1024, C = 768, NH = 12, V = 50257, Vp = 50304;  // Vp: the head's padding
    const long N = (long)B * T;
    // ---- ceilings, measured now
    const double bw = copy_bandwidth();
    const int G = 8192;
    auto* ga = (bf16*)dev((size_t)G * G * 2);
    auto* gb = (bf16*)dev((size_t)G * G * 2);
    auto* gc = (bf16*)dev((size_t)G * G * 2);
    double gemm_ms =
        time_ms([&] { matmul_forward_cuda<bf16>(gc, ga, gb, nullptr, G, G, G, s); }, 10);
    const double rate = 2.0 * G * G * G / (gemm_ms * 1e-3);
    std::printf("ceilings: copy %.0f GB/s (read+write), bf16 GEMM %.0f TFLOP/s (8192^3)\n\n",
                bw / 1e9, rate / 1e12);

    // ---- buffers of one GPT-2 layer's step
    auto* act = (bf16*)dev(N * 4 * C * 2);
    auto* act2 = (bf16*)dev(N * 4 * C * 2);
    auto* act3 = (bf16*)dev(N * 4 * C * 2);
    auto* w = (bf16*)dev((size_t)4 * C * C * 2);
    auto* bias = (bf16*)dev(4 * C * 2);
    auto* wf = (float*)dev((size_t)4 * C * C * 4);
    auto* bf = (float*)dev(4 * C * 4);
    auto* stats = (float*)dev(N * 16);
    auto* lse = (float*)dev((size_t)B * NH * T * 4);
    auto* qkv = (bf16*)dev(N * 3 * C * 2);
    auto* dqkv = (bf16*)dev(N * 3 * C * 2);
    auto* logits = (bf16*)dev((size_t)N * Vp * 2);
    auto* tokens = (int*)dev_zero(N * 4);
    auto* zipf_tokens = (int*)dev(N * 4);
    auto* dwte = (float*)dev_zero((size_t)Vp * C * 4);
    auto* dwpe = (float*)dev_zero((size_t)T * C * 4);
    auto* wte = (bf16*)dev((size_t)Vp * C * 2);
    auto* p = (float*)dev(124475904ull * 4);
    auto* g = (float*)dev(124475904ull * 4);
    auto* m = (float*)dev(124475904ull * 4);
    auto* vv = (float*)dev(124475904ull * 4);

    struct Row {
        std::string name;
        double ms, bytes, flops;
    };
    std::vector<Row> rows;
    auto add = [&](const std::string& name, double bytes, double flops,
                   const std::function<void()>& f) {
        rows.push_back({name, time_ms(f), bytes, flops});
    };
    const double e = 2;  // bytes per bf16 element
    add("matmul fwd qkv (N,768)x(768,2304)", e * (N * C + C * 3 * C + N * 3 * C),
        2.0 * N * C * 3 * C, [&] { matmul_forward_cuda<bf16>(qkv, act, w, bias, N, C, 3 * C, s); });
    add("matmul fwd fc + gelu epilogue", e * (N * C + C * 4 * C + 2 * N * 4 * C),
        2.0 * N * C * 4 * C,
        [&] { matmul_forward_cuda<bf16>(act2, act, w, bias, N, C, 4 * C, s, true, act3); });
    add("matmul bwd fc (dinp, dweight, dbias)", e * (2 * N * 4 * C + N * C) + 4.0 * 3 * 4 * C * C,
        4.0 * N * C * 4 * C,
        [&] { matmul_backward_cuda<bf16>(act, wf, bf, act2, act3, w, N, C, 4 * C, s); });
    add("lm head fwd (N,768)x(768,50304)", e * (N * C + (double)Vp * C + (double)N * Vp),
        2.0 * N * C * Vp,
        [&] { matmul_forward_cuda<bf16>(logits, act, wte, nullptr, N, C, Vp, s); });
    add("attention fwd (flash)", e * (N * 3 * C + N * C), 2.0 * 2 * B * NH * (double)T * T * 64 / 2,
        [&] { attention_forward_cuda<bf16>(act, lse, qkv, B, T, C, NH, NH, s); });
    add("attention bwd (flash)", e * (2 * N * 3 * C + 2 * N * C),
        2.5 * 2 * 2 * B * NH * (double)T * T * 64 / 2,
        [&] { attention_backward_cuda<bf16>(dqkv, act, qkv, act2, lse, B, T, C, NH, NH, s); });
    add("layernorm fwd", e * 2 * N * C, 0,
        [&] { layernorm_forward_cuda<bf16>(act2, stats, stats + N, act, bias, bias, N, C, s); });
    add("layernorm bwd", e * 3 * N * C, 0, [&] {
        layernorm_backward_cuda<bf16>(act3, bf, bf + C, act2, act, bias, stats, stats + N, N, C, s);
    });
    add("gelu bwd", e * 3 * N * 4 * C, 0,
        [&] { gelu_backward_cuda<bf16>(act, act2, act3, N * 4 * C, s); });
    add("add bias + residual", e * 3 * N * C, 0,
        [&] { add_bias_residual_cuda<bf16>(act, bias, act2, N, C, s); });
    add("embedding fwd", e * 2 * N * C, 0,
        [&] { embedding_forward_cuda<bf16>(act, tokens, wte, wte, 0, V, B, T, C, s); });
    // The backward sums each token's rows in order: text's frequent tokens make long runs. Zipf
    // over the vocabulary (exponent 1: the commonest token ~9% of the rows, more than GPT-2 BPE
    // gives English text) and the worst case, every row one token.
    {
        std::mt19937 rng(7);
        std::vector<double> weights(V);
        for (int v = 0; v < V; ++v) weights[v] = 1.0 / (v + 1);
        std::discrete_distribution<int> zipf(weights.begin(), weights.end());
        std::vector<int> host((size_t)N);
        for (int& t : host) t = zipf(rng);
        CUDA_CHECK(cudaMemcpy(zipf_tokens, host.data(), sizeof(int) * N, cudaMemcpyHostToDevice));
    }
    add("embedding bwd (Zipf tokens)", e * N * C + 4.0 * 2 * (N + T) * C, 0,
        [&] { embedding_backward_cuda<bf16>(dwte, dwpe, act, zipf_tokens, 0, V, B, T, C, s); });
    add("embedding bwd (one token)", e * N * C + 4.0 * 2 * (1 + T) * C, 0,
        [&] { embedding_backward_cuda<bf16>(dwte, dwpe, act, tokens, 0, V, B, T, C, s); });
    add("classifier: row stats (one pass)", e * (double)N * V, 0, [&] {
        ce_row_stats_cuda<bf16>(stats, stats + N, stats + 2 * N, logits, tokens, 0, N, V, s, Vp);
    });
    add("classifier: loss + grad in place", 2 * e * (double)N * Vp, 0, [&] {
        ce_loss_and_grad_cuda<bf16>(stats, logits, stats, stats + N, stats + 2 * N, tokens, 0,
                                    1e-6f, N, V, s, Vp);
    });
    add("classifier: train, one pass (in place)", 2 * e * (double)N * Vp, 0,
        [&] { ce_train_cuda<bf16>(nullptr, stats, logits, tokens, 1e-6f, N, V, s, Vp); });
    add("AdamW (124M fp32)", 4.0 * 124475904 * 7, 0,
        [&] { adamw_cuda(p, g, m, vv, 124475904, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f, s); });
    add("cast fp32 -> bf16 (124M)", 6.0 * 124475904, 0,
        [&] { cast_f32_to_bf16_cuda((bf16*)g, p, 124475904, s); });

    std::printf("%-40s %9s %10s %11s %9s %s\n", "kernel", "ms", "GB/s", "TFLOP/s", "roofline",
                "bound");
    for (const auto& r : rows) {
        double t_mem = r.bytes / bw, t_flop = r.flops / rate;
        double ideal = std::max(t_mem, t_flop);
        std::printf("%-40s %9.3f %10.0f %11.1f %8.0f%% %s\n", r.name.c_str(), r.ms,
                    r.bytes / (r.ms * 1e-3) / 1e9, r.flops / (r.ms * 1e-3) / 1e12,
                    100.0 * ideal / (r.ms * 1e-3), t_flop > t_mem ? "matmul" : "memory");
    }
    std::printf("\n");
    attention_shapes();
    return 0;
}
#else
#include <cstdio>
int main() {
    std::printf("kernels_cuda: built without CUDA; nothing measured\n");
    return 0;
}
#endif
