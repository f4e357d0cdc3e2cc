// The per-op cost sweep over a device's LayerOps (see op_sweep.h); the CPU's device glue.
#include "engine/plan/op_sweep.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <thread>

#include "engine/core/error.h"
#include "engine/kernels/cpu/adamw.h"
#include "engine/kernels/cpu/matmul.h"
#include "engine/kernels/cpu/rope.h"
#include "engine/kernels/cpu/threads.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/device_ops.h"
#include "engine/parallel/tcp_store.h"
#include "engine/plan/op_costs.h"

namespace tessera {

using nlohmann::json;

// ------------------------------------------------------------------------------------------
// Grids

OpSweepGrid op_sweep_grid_gpu() {
    OpSweepGrid g;
    g.gemm_N = {512, 1024, 2048, 4096, 8192, 16384, 32768};
    g.gemm_C = {256, 512, 768, 1024, 1280, 1600, 2048, 4096, 6400};
    g.gemm_OC = {256,  768,  1024, 1280, 1600, 2304,  3072,
                 3840, 4096, 4800, 5120, 6400, 12800, 50304};
    // B·H of the models' micro-batches (GPT-2 124M B16: 192; Llama-3.2-1B B8: 256; Qwen2.5-0.5B
    // B8: 112) fall between grid points at most 2x apart; groups of 1 (GPT-2: a key/value head
    // per query head) to 8 query heads per key/value head (Llama 3: 4, Qwen2.5-0.5B: 7)
    g.attn_BH = {8, 16, 32, 64, 128, 256, 512}, g.attn_T = {128, 256, 512, 1024, 2048, 4096},
    g.attn_head_dim = {64, 128}, g.attn_kv_group = {1, 2, 4, 8};
    g.rows_cols = {{4096, 768}, {16384, 768}, {16384, 1600}, {32768, 1280}};
    g.rows_vocab = {{1024, 50304}, {4096, 50304}, {16384, 50304}, {16384, 25216}};
    g.optimizer_elems = {10'000'000, 124'475'904};
    g.seq = 1024;
    return g;
}

OpSweepGrid op_sweep_grid_cpu() {
    // gpt-tiny (d_model 128), llama-tiny (64, ffn 128) and their TP halves, micro-batches of
    // 256 to 4096 rows; bytes to a few thousand tokens of vocabulary
    OpSweepGrid g;
    g.gemm_N = {256, 1024, 4096};
    g.gemm_C = {32, 64, 128, 256, 512};
    g.gemm_OC = {32, 64, 128, 256, 512, 1024};
    g.attn_BH = {4, 16, 64}, g.attn_T = {32, 64, 128, 256}, g.attn_head_dim = {16, 32, 64};
    g.rows_cols = {{512, 64}, {2048, 128}, {4096, 256}};
    g.rows_vocab = {{512, 256}, {2048, 256}, {2048, 1024}};
    g.optimizer_elems = {100'000, 1'000'000};
    g.seq = 128;
    return g;
}

// ------------------------------------------------------------------------------------------
// The sweep

json op_sweep_fit_linear(const std::vector<std::pair<double, double>>& pts) {
    double n = (double)pts.size(), sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (auto [x, y] : pts) sx += x, sy += y, sxx += x * x, sxy += x * y;
    double b = (n * sxy - sx * sy) / (n * sxx - sx * sx), a = (sy - b * sx) / n;
    if (a < 0) a = 0, b = sxy / sxx;  // through the origin when the intercept fits below zero
    if (b < 0) b = 0, a = sy / n;     // flat when the slope does (noise on sizes too small to grow)
    json pj = json::array();
    for (auto [x, y] : pts) pj.push_back({x, y});
    return {{"fixed_s", a}, {"per_unit_s", b}, {"points", pj}};
}

void op_sweep_keep_faster(json& into, const json& other) {
    const std::string diff = op_sweep_grid_difference(into, other);
    TS_CHECK(diff.empty(), "op_sweep_keep_faster: the sweeps are of different grids: ", diff);
    for (const char* section : {"gemm", "attention"})
        for (auto& [key, times] : into[section].items())
            if (key.size() > 2 && key.compare(key.size() - 2, 2, "_s") == 0)
                for (size_t i = 0; i < times.size(); ++i)
                    times[i] =
                        std::min(times[i].get<double>(), other[section][key][i].get<double>());
    for (const char* section : {"linear", "optimizer"})
        for (auto& [name, fit] : into[section].items()) {
            std::vector<std::pair<double, double>> pts;
            const json& theirs = other[section][name]["points"];
            for (size_t i = 0; i < fit["points"].size(); ++i)
                pts.push_back(
                    {fit["points"][i][0].get<double>(),
                     std::min(fit["points"][i][1].get<double>(), theirs[i][1].get<double>())});
            fit = op_sweep_fit_linear(pts);
        }
}

std::string op_sweep_grid_difference(const json& into, const json& other) {
    for (const auto& [section, axes] :
         {std::pair<const char*, std::vector<const char*>>{"gemm", {"N", "C", "OC"}},
          {"attention", {"head_dim", "kv_group", "BH", "T"}}}) {
        if (!other.contains(section) || !other[section].is_object())
            return str_cat("no ", section, " section");
        for (const char* axis : axes)  // kv_group: absent in both where only heads were timed
            if (other[section].value(axis, json()) != into[section].value(axis, json()))
                return str_cat(section, " ", axis, " ", other[section].value(axis, json()).dump(),
                               " (this sweep: ", into[section].value(axis, json()).dump(), ")");
        for (const auto& [key, times] : into[section].items())
            if (key.size() > 2 && key.compare(key.size() - 2, 2, "_s") == 0 &&
                (!other[section].contains(key) || !other[section][key].is_array() ||
                 other[section][key].size() != times.size() ||
                 !std::all_of(other[section][key].begin(), other[section][key].end(),
                              [](const json& t) { return t.is_number(); })))
                return str_cat(section, " ", key, ": not timed at this grid's ", times.size(),
                               " shapes");
    }
    for (const char* section : {"linear", "optimizer"})
        for (const auto& [name, fit] : into[section].items()) {
            if (!other.contains(section) || !other[section].contains(name) ||
                !other[section][name].is_object())
                return str_cat(section, " ", name, ": not timed");
            std::vector<double> xs, theirs;
            for (const auto& pt : fit["points"]) xs.push_back(pt[0].get<double>());
            for (const auto& pt : other[section][name].value("points", json::array()))
                theirs.push_back(pt.is_array() && pt.size() == 2 && pt[0].is_number() &&
                                         pt[1].is_number()
                                     ? pt[0].get<double>()
                                     : -1.0);
            if (xs != theirs) return str_cat(section, " ", name, ": timed at other sizes");
        }
    return "";
}

json op_sweep_run(OpSweepDevice& dev, const OpSweepGrid& g) {
    LayerOps& ops = dev.ops;
    auto say = [&](const char* what) {
        if (dev.progress) dev.progress(what);
    };
    const size_t es = dtype_size(ops.traits.act);
    const size_t maxN = *std::max_element(g.gemm_N.begin(), g.gemm_N.end());
    const size_t maxC = *std::max_element(g.gemm_C.begin(), g.gemm_C.end());
    const size_t maxOC = *std::max_element(g.gemm_OC.begin(), g.gemm_OC.end());
    // every activation-sized buffer holds the largest of: a GEMM's input or output, a memory-bound
    // op's (N, C), the classifier's logits, attention's q/k/v (B, T, 3C)
    size_t big = std::max(maxN * maxC, maxN * maxOC), rows = maxN;
    for (auto [N, C] : g.rows_cols)
        big = std::max(big, (size_t)N * C), rows = std::max(rows, (size_t)N);
    for (auto [N, V] : g.rows_vocab)
        big = std::max(big, (size_t)N * V), rows = std::max(rows, (size_t)N);
    const int maxBH = *std::max_element(g.attn_BH.begin(), g.attn_BH.end());
    const int maxT = *std::max_element(g.attn_T.begin(), g.attn_T.end());
    const int maxHD = *std::max_element(g.attn_head_dim.begin(), g.attn_head_dim.end());
    big = std::max(big, (size_t)maxBH * maxT * maxHD * 5);  // out, dout, dqkv (3) in one buffer
    size_t weights = maxOC * maxC;  // the fp32 weight gradients, also accumulate's operands
    for (auto [N, C] : g.rows_cols) weights = std::max(weights, (size_t)N * C);
    void* A = dev.buffer(big * es, false);
    void* A2 = dev.buffer(big * es, false);
    void* W = dev.buffer(maxOC * maxC * es, false);
    void* bias = dev.buffer(maxOC * es, false);
    void* O = dev.buffer(big * es, false);
    void* O2 = dev.buffer(big * es, false);
    float* dW = (float*)dev.buffer(weights * 4, false);
    float* db = (float*)dev.buffer(maxOC * 4, false);
    json out;

    // ---- GEMMs on a grid: forward, with the GELU epilogue, backward (the backward's output
    // gradient is O, its input A (N, C)); with the device's ops, then (GPUs) its FP8 ones. GPUs'
    // bf16 GEMMs also backward through a GELU (its pre-activation O2) and forward plus a residual
    // (O2), which their epilogues fuse; elsewhere those are the GEMM and a gelu_backward or an
    // add_bias_residual, priced from those.
    auto time_gemms = [&](LayerOps& o, json& section, bool fused) {
        json fwd = json::array(), fwdg = json::array(), bwd = json::array(), bwdg = json::array(),
             fwdr = json::array();
        for (int N : g.gemm_N)
            for (int C : g.gemm_C)
                for (int OC : g.gemm_OC) {
                    fwd.push_back(dev.time_s([&] { o.matmul_forward(O, A, W, bias, N, C, OC); }));
                    fwdg.push_back(
                        dev.time_s([&] { o.matmul_gelu_forward(O2, O, A, W, bias, N, C, OC); }));
                    bwd.push_back(dev.time_s(
                        [&] { o.matmul_backward(A2, dW, db, O, A, W, N, C, OC, false); }));
                    if (!fused) continue;
                    bwdg.push_back(dev.time_s(
                        [&] { o.matmul_gelu_backward(A2, dW, db, O, A, W, O2, N, C, OC, false); }));
                    fwdr.push_back(dev.time_s(
                        [&] { o.matmul_residual_forward(O, A, W, bias, O2, N, C, OC); }));
                }
        section["forward_s"] = fwd;
        section["forward_gelu_s"] = fwdg;
        section["backward_s"] = bwd;
        if (fused) {
            section["backward_gelu_s"] = bwdg;
            section["forward_residual_s"] = fwdr;
        }
    };
    say("gemm");
    out["gemm"] = {{"N", g.gemm_N},
                   {"C", g.gemm_C},
                   {"OC", g.gemm_OC},
                   {"layout", "index (n * |C| + c) * |OC| + oc"}};
    time_gemms(ops, out["gemm"], ops.traits.device == Device::cuda);
    if (dev.gemm_fp8) {
        say("gemm_fp8");
        out["gemm_fp8"] = {
            {"scaling", "per-tensor current scaling; e4m3 inputs and weights, e5m2 gradients"}};
        time_gemms(*dev.gemm_fp8, out["gemm_fp8"], false);
    }

    // ---- attention on (query heads per key/value head, batch x heads, T) per head width
    say("attention");
    json afwd = json::array(), abwd = json::array();
    const size_t stat_per_row =
        ops.traits.attention_scores ? (size_t)maxT : 1;  // probabilities or lse
    float* stats_att = (float*)dev.buffer((size_t)maxBH * maxT * stat_per_row * 4, false);
    for (int hd : g.attn_head_dim)
        for (int group : g.attn_kv_group)
            for (int bh : g.attn_BH)
                for (int T : g.attn_T) {
                    // B samples of NH query heads (8, or bh when fewer) sharing KV key/value
                    // heads; qkv (B, T, C + 2·KV·hd) in O, the output, its gradient and dqkv in O2
                    const int NH = std::min(bh, 8), B = bh / NH, C = NH * hd;
                    const int KV = std::max(1, NH / group);
                    const size_t btc = (size_t)B * T * C;
                    char* o = (char*)O2;
                    char* dout = o + btc * es;
                    char* dqkv = dout + btc * es;
                    afwd.push_back(dev.time_s(
                        [&] { ops.attention_forward(o, stats_att, O, B, T, C, NH, KV); }));
                    abwd.push_back(dev.time_s([&] {
                        ops.attention_backward(dqkv, dout, O, o, stats_att, B, T, C, NH, KV);
                    }));
                }
    out["attention"] = {{"head_dim", g.attn_head_dim},
                        {"BH", g.attn_BH},
                        {"T", g.attn_T},
                        {"forward_s", afwd},
                        {"backward_s", abwd},
                        {"layout", "index ((hd * |kv_group| + g) * |BH| + bh) * |T| + t"}};
    if (g.attn_kv_group != std::vector<int>{1}) out["attention"]["kv_group"] = g.attn_kv_group;

    // ---- memory-bound ops: fixed + per-unit (the unit per op: engine/plan/op_costs.cpp)
    say("memory-bound ops");
    json lin;
    int* tokens = (int*)dev.buffer(rows * 4, true);  // token ids, all 0
    float* stats = (float*)dev.buffer(rows * 16, false);
    const int S = g.seq;
    auto sweep = [&](const char* name, const std::function<void(int, int)>& f,
                     const std::function<double(int, int)>& units) {
        std::vector<std::pair<double, double>> pts;
        for (const auto& nc : g.rows_cols) {
            const int N = nc.first, C = nc.second;  // named copies: lambdas capture them
            pts.push_back({units(N, C), dev.time_s([&] { f(N, C); })});
        }
        lin[name] = op_sweep_fit_linear(pts);
    };
    auto NxC = [](int N, int C) { return (double)N * C; };
    sweep(
        "layernorm_forward",
        [&](int N, int C) { ops.layernorm_forward(O, stats, stats + N, A, W, W, N, C); }, NxC);
    sweep(
        "layernorm_backward",
        [&](int N, int C) { ops.layernorm_backward(O2, dW, db, O, A, W, stats, stats + N, N, C); },
        NxC);
    // the Llama family's: RMSNorm, rotary embeddings (heads of 16 or 64 in rows of C), SwiGLU (F =
    // C/2)
    sweep(
        "rmsnorm_forward", [&](int N, int C) { ops.rmsnorm_forward(O, stats, A, W, N, C, 1e-5f); },
        NxC);
    sweep(
        "rmsnorm_backward",
        [&](int N, int C) { ops.rmsnorm_backward(O2, dW, O, A, W, stats, N, C); }, NxC);
    const int rope_hd = std::min(64, g.rows_cols.front().second);
    const std::vector<float> inv_freq = rope_inv_freq(rope_hd, 1e4f, RopeScaling{});
    sweep(
        "rope",
        [&](int N, int C) { ops.rope(O, N / S, S, C / rope_hd, rope_hd, C, inv_freq, false); },
        [&](int N, int C) {
            const int whole_heads = C / rope_hd * rope_hd;
            return (double)N * whole_heads;
        });
    auto NxF = [](int N, int C) {
        const int F = C / 2;
        return (double)N * F;
    };
    sweep(
        "swiglu_forward", [&](int N, int C) { ops.swiglu_forward(O, A, N, C / 2); }, NxF);
    sweep(
        "swiglu_backward", [&](int N, int C) { ops.swiglu_backward(O2, O, A, N, C / 2); }, NxF);
    sweep(
        "gelu_forward", [&](int N, int C) { ops.gelu_forward(O, A, (int64_t)N * C); }, NxC);
    sweep(
        "gelu_backward", [&](int N, int C) { ops.gelu_backward(O, A, O, (int64_t)N * C); }, NxC);
    sweep(
        "relu_forward", [&](int N, int C) { ops.relu_forward(O, A, (int64_t)N * C); }, NxC);
    sweep(
        "relu_backward", [&](int N, int C) { ops.relu_backward(O, A, O, (int64_t)N * C); }, NxC);
    sweep(
        "add_bias_residual", [&](int N, int C) { ops.add_bias_residual(O, bias, A, N, C); }, NxC);
    sweep(
        "embedding_forward",
        [&](int N, int C) { ops.embedding_forward(O, tokens, W, W, 0, 50257, N / S, S, C); }, NxC);
    sweep(
        "embedding_backward",
        [&](int N, int C) { ops.embedding_backward(dW, dW, O, tokens, 0, 50257, N / S, S, C); },
        NxC);
    sweep(
        "accumulate",
        [&](int N, int C) { ops.accumulate(dW, dW + (size_t)N * C / 2, (int64_t)N * C / 2); },
        [](int N, int C) { return (double)N * C / 2; });
    if (ops.traits.act != DType::f32)  // fp32 layers compute with their masters: no casts
        sweep(
            "cast_weights", [&](int N, int C) { ops.cast_weights(O, dW, (int64_t)N * C / 2); },
            [](int N, int C) { return (double)N * C / 2; });
    sweep(
        "copy", [&](int N, int C) { ops.copy(O, A, (int64_t)N * C * 2); },
        [](int N, int C) { return (double)N * C * 2; });
    // the classifier over (N rows, padded vocabulary): loss and gradient
    {
        std::vector<std::pair<double, double>> ce;
        for (const auto& nv : g.rows_vocab) {
            const int N = nv.first, V = nv.second;
            const int Vl = ops.traits.vocab_align > 1 ? V - 47 : V;  // real columns, padded (GPUs)
            ce.push_back({(double)N * V, dev.time_s([&] {
                              ops.cross_entropy(stats + 3 * N, stats, nullptr, O, tokens, 0, N, Vl,
                                                V, TpGroup{}, 1e-6f, true);
                          })});
        }
        lin["cross_entropy"] = op_sweep_fit_linear(ce);
    }
    out["linear"] = lin;

    // ---- the optimizer's passes per fp32 element
    say("optimizer");
    {
        const int64_t n2 = *std::max_element(g.optimizer_elems.begin(), g.optimizer_elems.end());
        float* p = (float*)dev.buffer(n2 * 4, false);
        float* gr = (float*)dev.buffer(n2 * 4, false);
        float* m = (float*)dev.buffer(n2 * 4, false);
        float* v = (float*)dev.buffer(n2 * 4, false);
        std::vector<std::pair<double, double>> ad, sq, ze;
        for (int64_t n : g.optimizer_elems) {
            ad.push_back({(double)n, dev.time_s([&] { dev.adamw(p, gr, m, v, n); })});
            sq.push_back({(double)n, dev.time_s([&] { dev.sum_squares(gr, n); })});
            ze.push_back({(double)n, dev.time_s([&] { dev.zero(gr, n); })});
        }
        out["optimizer"] = {{"adamw", op_sweep_fit_linear(ad)},
                            {"sum_squares", op_sweep_fit_linear(sq)},
                            {"zero", op_sweep_fit_linear(ze)}};
    }
    return out;
}

// ------------------------------------------------------------------------------------------
// The CPU

namespace {

// Wall-clock seconds per run: one warm-up, then runs until 20 ms of them (at least 3, at most
// 15); the fastest. A run that lost its core to another process measures that process, not the
// op: the calibration is the host's own cost, and a busy host shows as a slower real run.
double cpu_time_s(const std::function<void()>& f) {
    using clock = std::chrono::steady_clock;
    f();
    double best = 1e30, total = 0;
    for (int runs = 0; runs < 15 && (runs < 3 || total < 0.02); ++runs) {
        const auto t0 = clock::now();
        f();
        const double t = std::chrono::duration<double>(clock::now() - t0).count();
        best = std::min(best, t);
        total += t;
    }
    return best;
}

// Two ranks' collectives as CPU ranks on one host exchange them (comm_create_groups: through
// shared memory, shm_group.h; over Gloo's loopback TCP with TESSERA_SHM=0): a sum all-reduce of a
// few sizes between two threads of this process, rank 0's median of 15 (each after a barrier).
// The median, not the fastest as for kernels: a collective waits for its peer, so its spread is
// its nature rather than a disturbance (Gloo on the idle 2-core host: 1 MB median 0.94 ms,
// fastest 0.47, 90th percentile 2.6), and a step pays the typical one. Fitted per byte a rank sends
// (a ring all-reduce of x bytes over 2 sends x) plus a fixed time per call: what every collective
// and pipeline message of a CPU step is priced with (the estimator: ring bytes,
// docs/parallelism.md).
//
// Then what a barrier-aligned call does not see (sync_sweep): in a step the ranks reach each
// collective from their own compute, so a call also waits out the ranks' spread over the work
// since the last one and the waiting rank's wake-up. Both ranks run a chunk of GEMMs (~1 ms and
// ~8 ms) K times, alone and then with a small all-reduce after each chunk; the second loop's time
// per chunk over the first's, less the aligned call's own time, is that wait. Fitted as a fixed
// time per synchronising call plus a fraction of the compute between calls ("sync").
struct SyncSample {
    double chunk_s = 0, synced_s = 0;  // a chunk alone; a chunk and its all-reduce
};

std::vector<SyncSample> sync_sweep(Communicator& c, int rank, int threads) {
    omp_set_num_threads(threads);  // this rank thread's pool, as a rank process has its own
    constexpr int D = 192;
    std::vector<float> a((size_t)D * D, 1e-2f), w((size_t)D * D, 1e-2f), o((size_t)D * D);
    std::vector<float> small(256, 1e-3f);
    using clock = std::chrono::steady_clock;
    auto since = [](clock::time_point t0) {
        return std::chrono::duration<double>(clock::now() - t0).count();
    };
    auto gemm = [&] { matmul_forward(o.data(), a.data(), w.data(), nullptr, D, D, D); };
    // one GEMM's time with both ranks busy, the ranks' mean, so both run the same chunk
    for (int i = 0; i < 5; ++i) gemm();
    c.barrier();
    auto t0 = clock::now();
    for (int i = 0; i < 40; ++i) gemm();
    float one = (float)(since(t0) / 40);
    c.all_reduce(&one, 1);
    one /= 2;
    std::vector<SyncSample> out;
    for (double target : {1e-3, 8e-3}) {
        const int reps = std::max(1, (int)std::lround(target / std::max(one, 1e-7f)));
        const int K = std::max(16, (int)(0.25 / target));
        std::vector<double> alone, synced;
        for (int round = 0; round < 3; ++round) {
            c.barrier();
            t0 = clock::now();
            for (int k = 0; k < K; ++k)
                for (int i = 0; i < reps; ++i) gemm();
            float t = (float)(since(t0) / K);
            c.all_reduce(&t, 1);  // the ranks' mean: each ran alone
            alone.push_back(t / 2);
            c.barrier();
            t0 = clock::now();
            for (int k = 0; k < K; ++k) {
                for (int i = 0; i < reps; ++i) gemm();
                c.all_reduce(small.data(), (int64_t)small.size());
            }
            synced.push_back(since(t0) / K);
        }
        std::sort(alone.begin(), alone.end());
        std::sort(synced.begin(), synced.end());
        if (rank == 0) out.push_back({alone[1], synced[1]});
    }
    return out;
}

json comm_sweep(int threads) {
    TcpStoreServer server("127.0.0.1", 0);
    const std::vector<int64_t> floats{256, 4096, 65536, 262144, 1048576};
    std::vector<double> typical(floats.size(), 1e30);
    std::vector<SyncSample> sync;
    std::exception_ptr failed[2];
    auto rank = [&](int r) {
        try {
            RankEnv env;
            env.rank = r, env.world_size = 2, env.master_addr = "127.0.0.1";
            env.master_port = server.port(), env.source = "tessera";
            ProcessGroups g = comm_create_groups(env, MeshShape{2, 1, 1}, CommOptions{});
            Communicator& c = *g.dp;
            std::vector<float> buf((size_t)floats.back(), 1e-3f);
            for (size_t i = 0; i < floats.size(); ++i) {
                c.all_reduce(buf.data(), floats[i]);  // warm-up (connections, buffers)
                std::vector<double> times;
                for (int k = 0; k < 15; ++k) {
                    c.barrier();
                    const auto t0 = std::chrono::steady_clock::now();
                    c.all_reduce(buf.data(), floats[i]);
                    times.push_back(
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                            .count());
                }
                std::nth_element(times.begin(), times.begin() + 7, times.end());
                if (r == 0) typical[i] = times[7];
            }
            std::vector<SyncSample> s = sync_sweep(c, r, threads);
            if (r == 0) sync = std::move(s);
        } catch (...) {
            failed[r] = std::current_exception();
        }
    };
    std::thread peer(rank, 1);
    rank(0);
    peer.join();
    for (auto& e : failed)
        if (e) std::rethrow_exception(e);
    std::vector<std::pair<double, double>> pts;
    for (size_t i = 0; i < floats.size(); ++i) pts.push_back({(double)floats[i] * 4, typical[i]});
    json collective = op_sweep_fit_linear(pts);
    const double aligned =
        collective["fixed_s"].get<double>() + collective["per_unit_s"].get<double>() * 256 * 4;
    std::vector<std::pair<double, double>> waits;
    json samples = json::array();
    for (const SyncSample& x : sync) {
        waits.push_back({x.chunk_s, std::max(0.0, x.synced_s - x.chunk_s - aligned)});
        samples.push_back({{"chunk_s", x.chunk_s}, {"synced_s", x.synced_s}});
    }
    return {{"group", 2},
            {"collective", collective},
            {"unit", "bytes a rank sends (ring: all-reduce 2(n-1)/n x, gather/scatter (n-1)/n x)"},
            {"sync", op_sweep_fit_linear(waits)},
            {"sync_unit", "per synchronising call, plus per second of compute between calls"},
            {"sync_samples", samples}};
}

}  // namespace

// ------------------------------------------------------------------------------------------
// The host's cores, for a GPU's optimizer offload (timed like the CPU's kernels: cpu_time_s)

json op_sweep_host_optimizer() {
    const std::vector<int64_t> sizes{16'000'000, 128'000'000};
    const int64_t n2 = sizes.back();
    std::vector<float> p(n2, 0.01f), g(n2, 1e-3f), m(n2, 0.0f), v(n2, 0.0f);
    const AdamWHyper h{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
    std::vector<std::pair<double, double>> pts;
    pts.reserve(sizes.size());
    // the team the parameter store's host thread takes from this rank's threads, on a thread of
    // its own like it
    const int threads = host_optimizer_threads(omp_get_max_threads());
    std::thread([&] {
        omp_set_num_threads(threads);
        for (int64_t n : sizes)
            pts.push_back({(double)n, cpu_time_s([&] {
                               adamw_update(p.data(), g.data(), m.data(), v.data(), n, h, 1.0f);
                           })});
    }).join();
    return {{"adamw", op_sweep_fit_linear(pts)}, {"threads", threads}};
}

json op_sweep_cpu(int threads, const std::function<void(const char*)>& progress) {
    const int n = threads_configure(threads);
    std::vector<std::unique_ptr<float[]>> keep;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    DeviceOps& dops = device_ops_cpu();
    OpSweepDevice dev{layer_ops_cpu(),
                      [&](size_t bytes, bool zeros) -> void* {
                          const size_t count = (bytes + 3) / 4;
                          keep.emplace_back(new float[count]);
                          float* p = keep.back().get();
                          for (size_t i = 0; i < count; ++i) p[i] = zeros ? 0.0f : dist(rng);
                          return p;
                      },
                      cpu_time_s,
                      [&](float* p, const float* g, float* m, float* v, int64_t count) {
                          const float norm2 = 1.0f;
                          dops.adamw_ranges({AdamWRange{p, g, m, v, count, 0.1f}},
                                            AdamWHyper{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1}, 1.0,
                                            &norm2);
                      },
                      [&](const float* g, int64_t count) {
                          dops.sum_squares_begin();
                          dops.sum_squares_add(g, count);
                      },
                      [&](float* g, int64_t count) { dops.zero(g, count); },
                      progress};
    const OpSweepGrid grid = op_sweep_grid_cpu();
    // two passes over the whole grid, each time the faster: a burst of other work on a shared
    // host then spoils one pass's stretch of shapes, not the calibration
    json out = op_sweep_run(dev, grid);
    if (progress) progress("second pass");
    op_sweep_keep_faster(out, op_sweep_run(dev, grid));
    if (progress) progress("collectives (Gloo, loopback)");
    out["comm"] = comm_sweep(n);
    const CpuHost host = cpu_host();
    out["device"] = "cpu";
    out["cpu_model"] = host.model;
    out["cores"] = host.cores;
    out["threads"] = n;
    out["launch_s"] = 0.0;
    std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    out["produced_by"] = str_cat("tessera plan --calibrate (the layers' CPU ops, fp32, ", n,
                                 " threads) on ", host.model, " (", host.cores, " cores), ", date);
    return out;
}

}  // namespace tessera
