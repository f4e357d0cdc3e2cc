// Plan estimator: runs one training step of a rank on the meta device as allocation events (the
// runtime's own layers, ParamStore and schedule walk: rank_sim.h), then derives FLOPs,
// communication and step time. See estimator.h and docs/parallelism.md ("The estimator") for the
// formulas.
#include "engine/plan/estimator.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/parallel_for.h"
#include "engine/core/str_join.h"
#include "engine/core/tensor.h"
#include "engine/kernels/cpu/threads.h"
#include "engine/model/gpt.h"
#include "engine/parallel/layer_ops.h"
#include "engine/parallel/schedule.h"
#include "engine/parallel/tp_layers.h"
#include "engine/parallel/zero.h"
#include "engine/plan/op_costs.h"
#include "engine/plan/partitioner.h"
#include "engine/plan/rank_sim.h"

namespace tessera {

// ------------------------------------------------------------------------------------------
// Devices

namespace {

// The GPUs: dense bf16 (no sparsity) datasheet figures; NVLink: half the bidirectional figure
// (the PCIe parts: through a bridge to one neighbour); network: one 400 Gb/s NDR port per GPU
// (A100: 200 Gb/s HDR); host link: PCIe Gen5 x16 (Gen4 for A100) at what pinned copies reach in
// practice, about 85% of the nominal 64 (32) GB/s per direction. Efficiency: DeviceSpec's
// default but where measured.
struct GpuRow {
    const char* name;
    double tflops, hbm_gb_s, memory_gib, nvlink_gb_s, network_gb_s, host_link_gb_s;
    double efficiency;
};
const double kDefaultEfficiency = DeviceSpec{}.efficiency;
const GpuRow kGpus[] = {
    {"H100", 989, 3350, 80, 450, 50, 55, kDefaultEfficiency},  // the SXM part
    {"H100-PCIe", 756, 2000, 80, 300, 50, 55, kDefaultEfficiency},
    {"H100-NVL", 835, 3900, 94, 300, 50, 55, kDefaultEfficiency},
    // efficiency: Tessera's measured MFU on one H200 (GPT-2 124M, bf16, micro-batch 16)
    {"H200", 989, 4800, 141, 450, 50, 55, 0.43},
    {"A100-80GB", 312, 2039, 80, 300, 25, 27, kDefaultEfficiency},
    {"A100-40GB", 312, 1555, 40, 300, 25, 27, kDefaultEfficiency},
};

}  // namespace

const std::vector<std::string>& device_names() {
    static const std::vector<std::string> n = [] {
        std::vector<std::string> v;
        for (const GpuRow& g : kGpus) v.emplace_back(g.name);
        v.emplace_back("cpu");
        return v;
    }();
    return n;
}

double cpu_sgemm_flops() {
    static const double rate = [] {
        const int n = 384;
        std::vector<float> a((size_t)n * n, 0.5f), b((size_t)n * n, 0.25f), c((size_t)n * n);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                    n, 0.0f, c.data(), n);  // warm-up (thread pool start)
        double best = 1e30;
        for (int r = 0; r < 5; ++r) {
            auto t0 = std::chrono::steady_clock::now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n,
                        b.data(), n, 0.0f, c.data(), n);
            best = std::min(
                best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        return 2.0 * n * n * n / std::max(best, 1e-9);
    }();
    return rate;
}

DeviceSpec device_spec(const std::string& name) {
    const double T = 1e12, G = 1e9;
    const int64_t GiB = 1LL << 30;
    DeviceSpec d;
    d.name = name;
    const auto row = std::find_if(std::begin(kGpus), std::end(kGpus),
                                  [&name](const GpuRow& g) { return name == g.name; });
    if (row != std::end(kGpus)) {
        d.peak_flops = row->tflops * T, d.hbm_bytes_per_s = row->hbm_gb_s * G;
        d.memory_bytes = (int64_t)(row->memory_gib * (double)GiB);
        d.nvlink_bytes_per_s = row->nvlink_gb_s * G, d.network_bytes_per_s = row->network_gb_s * G;
        d.host_link_bytes_per_s = row->host_link_gb_s * G;
        d.efficiency = row->efficiency;
    } else if (name == "cpu") {
        d.peak_flops = cpu_sgemm_flops();
        d.hbm_bytes_per_s = 20 * G;  // a typical dual-channel DDR figure; not measured
        d.memory_bytes = (int64_t)sysconf(_SC_PHYS_PAGES) * (int64_t)sysconf(_SC_PAGE_SIZE);
        d.nvlink_bytes_per_s = 5 * G;  // Gloo over loopback TCP
        d.network_bytes_per_s = 5 * G;
        d.gpus_per_node = 1 << 20;
        d.efficiency = 0.6;  // non-matmul kernels (attention, layernorm, AdamW) at lower rates
        d.shared_host = true;
    } else {
        const std::string known = str_join(device_names(), ", ");
        throw InputError(str_cat("--device: expected one of ", known, ", found '", name, "'"));
    }
    if (name != "cpu") {
        // bench/device_overhead.py on one H200 (driver 580.159.04, CUDA runtime 13.0, NVML per
        // process): a bare context (2026-12-01), and a tiny GPT's run beyond it and beyond its
        // pool's segments (2026-12-03, since tensors are placed by Tessera's own pool). Measured
        // on the H200 only; the other GPUs use these figures until measured there.
        d.context_bytes = 543162368;
        d.libraries_bytes = 41943040;
    }
    return d;
}

bool device_spec_for_gpu(const std::string& n, DeviceSpec* out) {
    auto has = [&n](const char* part) { return n.find(part) != std::string::npos; };
    if (has("H200"))
        *out = device_spec("H200");
    else if (has("H100") && has("PCIe"))  // "NVIDIA H100 PCIe"
        *out = device_spec("H100-PCIe");
    else if (has("H100") && has("NVL"))  // "NVIDIA H100 NVL"
        *out = device_spec("H100-NVL");
    else if (has("H100"))  // the SXM part: "NVIDIA H100 80GB HBM3"
        *out = device_spec("H100");
    else if (has("A100") && has("40GB"))
        *out = device_spec("A100-40GB");
    else if (has("A100"))
        *out = device_spec("A100-80GB");
    else
        return false;
    return true;
}

bool device_spec_for_recorded(const std::string& n, DeviceSpec* out) {
    if (n == "cpu") {
        *out = device_spec("cpu");
        return true;
    }
    return device_spec_for_gpu(n, out);
}

std::string device_default_name(const RunConfig& cfg) {
    return cfg.runtime.device == "cpu" ? "cpu" : "H200";
}

int plan_vocab_size(const ModelConfig& m) {
    if (m.vocab_size > 0) return m.vocab_size;  // the Llama family's embedding rows
    return config_tokenizer_vocab_size(m.vocab);
}

std::vector<int> plan_blocks_per_chunk(const RunConfig& cfg) {
    const int chunks = cfg.parallel.pp * cfg.parallel.virtual_stages;
    const int L = cfg.model.n_layer;
    if (!cfg.parallel.stages.empty()) {
        if ((int)cfg.parallel.stages.size() != chunks)
            throw InputError(str_cat(cfg.source_path, ": parallel.stages: expected ", chunks,
                                     " entries (pp x virtual_stages), found ",
                                     cfg.parallel.stages.size()));
        int sum = 0;
        for (int s : cfg.parallel.stages) sum += s;
        if (sum != L)
            throw InputError(str_cat(cfg.source_path,
                                     ": parallel.stages: expected entries summing to "
                                     "n_layer ",
                                     L, ", found ", sum));
        return cfg.parallel.stages;
    }
    if (cfg.model.preset == "mlp") {  // not pipelined: one chunk
        if (chunks != 1)
            throw InputError(str_cat(cfg.source_path,
                                     ": parallel.pp: an MLP is not pipelined: "
                                     "expected pp 1, found ",
                                     cfg.parallel.pp));
        return {model_shape(cfg.model, 0).n_blocks()};
    }
    // Balanced by compute: the contiguous split minimising the slowest chunk's training FLOPs,
    // the LM head counted on the last chunk. Deterministic (no measured rates): every rank of
    // the job computes the same split. The memory-aware balance (balance_stages) is what
    // `tessera plan` and the studio suggest for a device.
    const std::vector<LayerSpec> specs =
        model_shape(cfg.model, plan_vocab_size(cfg.model)).layer_specs();
    ChunkCostModel m;
    m.block_s = specs[1].flops_per_token;
    m.fixed_s.assign(chunks, 0.0);
    m.fixed_s[0] += specs.front().flops_per_token;
    m.fixed_s[chunks - 1] += specs.back().flops_per_token;
    m.mem_base.assign(chunks, 0.0);
    m.mem_per_block.assign(chunks, 0.0);
    m.capacity_bytes = INT64_MAX;
    return balance_blocks(L, m);
}

namespace {

constexpr int64_t kF = 4;  // bytes per fp32 element (parameters, gradients, moments)
using plan_sim::LayerKind;
using plan_sim::RankSim;

// ------------------------------------------------------------------------------------------
// Every rank, one or many: RankRunner's step on the meta device (rank_sim.h)

// Ring all-reduce sends 2 (n-1)/n of the buffer per rank; all-gather / reduce-scatter (n-1)/n.
double ring_all_reduce(double bytes, int n) {
    return n > 1 ? 2.0 * (n - 1) / n * bytes : 0.0;
}
double ring_gather(double bytes, int n) {
    return n > 1 ? (double)(n - 1) / n * bytes : 0.0;
}

// OpCosts::op_s over a trace: a step repeats the same call for every micro-batch and every
// identical block, so each distinct call is priced once (the sums are the same: the same values
// in the same order).
class TracePrices {
  public:
    explicit TracePrices(const OpCosts& costs) : costs_(costs) {}
    double operator()(const OpCall& c) {
        auto [it, fresh] = prices_.try_emplace(c, 0.0);
        if (fresh) it->second = costs_.op_s(c);
        return it->second;
    }

  private:
    // equal calls (OpCall::operator==, every field) hash equal; a field left out here only
    // makes more calls share a bucket
    struct Hash {
        size_t operator()(const OpCall& c) const {
            uint64_t h = 0, share = 0;
            std::memcpy(&share, &c.share, sizeof share);
            for (uint64_t x :
                 {(uint64_t)c.kind, (uint64_t)c.N, (uint64_t)c.C, (uint64_t)c.OC, (uint64_t)c.B,
                  (uint64_t)c.T, (uint64_t)c.NH, (uint64_t)c.dtype, (uint64_t)c.fp8, share})
                h = (h ^ x) * 0x9e3779b97f4a7c15ull, h ^= h >> 29;
            return (size_t)h;
        }
    };
    const OpCosts& costs_;
    std::unordered_map<OpCall, double, Hash> prices_;
};

// A GPU rank's busy time from its step's op trace and the parameter store's passes, priced
// with the device's measured costs (OpCosts): r.compute_s and its parts. The host launches
// every kernel: a step of many small ops takes at least their launch time.
// Returns false (r untouched) when the trace holds an op the device's sweep did not time.
bool price_ops(const OpCosts& costs, const RankSim& sim, int zero, double host_link_bytes_per_s,
               RankEstimate& r) {
    for (const OpCall& c : sim.trace.calls)
        if (!costs.prices(c)) return false;
    const bool host_optimizer = sim.offload_opt && sim.gpu();  // ParamStore's optimizer offload
    if (host_optimizer && (!costs.host_adamw_measured || host_link_bytes_per_s <= 0)) return false;
    r.gemm_s = r.attention_s = r.other_ops_s = 0;
    TracePrices price(costs);
    for (const OpCall& c : sim.trace.calls) {
        const double t = price(c);
        if (op_is_gemm(c.kind))
            r.gemm_s += t;
        else if (c.kind == OpKind::attention_forward || c.kind == OpKind::attention_backward)
            r.attention_s += t;
        else
            r.other_ops_s += t;
    }
    // per unit: its gradients zeroed (split: each of its buffers but those the backward's first
    // GEMM overwrites); the squared norm over every unit's ranges (one a parameter where split,
    // else one a unit) in launches of up to 128; one batched AdamW over the rank's slices
    // (engine/parallel/zero.cpp)
    const bool split = ParamStore::split_grads(zero, sim.dp, sim.m);
    double opt_elems = 0, zero_calls = 0, norm_ranges = 0;
    size_t units = 0;
    r.optimizer_s = 0;
    for (const auto& ch : sim.chunks)
        for (const auto& l : ch)
            for (const auto& u : l.units) {
                const double n = (double)(zero >= 1 ? u.S : u.len);
                opt_elems += n;
                ++units;
                if (split) {
                    for (int64_t part : u.zeroed_parts)
                        r.optimizer_s += costs.zero.at((double)part);
                    zero_calls += (double)u.zeroed_parts.size();
                    norm_ranges += u.params;
                } else {
                    r.optimizer_s += costs.zero.at((double)(zero >= 2 ? u.S : u.pad));
                    zero_calls += 1;
                    norm_ranges += 1;
                }
            }
    const double norm_launches = std::ceil(norm_ranges / 128.0);
    r.optimizer_s +=
        norm_launches * costs.sum_squares.fixed_s + costs.sum_squares.per_unit_s * opt_elems;
    if (host_optimizer) {
        // the gradients down and the updated values back on the copy stream (one after the
        // other; without DP the gradients go down during the backward, as each unit's are final),
        // AdamW on the host's cores unit by unit in between: the longer of the two; the next step's
        // first forward runs under it, each layer once its unit has landed (all of it hidden but
        // about the last unit's share)
        const double copy_s = (ParamStore::downloads_in_backward(zero, sim.dp) ? 1.0 : 2.0) *
                              sizeof(float) * opt_elems / host_link_bytes_per_s;
        const double host_s = std::max(copy_s, costs.host_adamw.at(opt_elems));
        const double forward0_s = (r.gemm_s + r.attention_s + r.other_ops_s) / (3.0 * sim.m);
        const double hidden_s =
            std::min(host_s, forward0_s * (1.0 - 1.0 / (double)std::max<size_t>(units, 1)));
        r.optimizer_s += host_s - hidden_s;
    } else {
        r.optimizer_s += costs.adamw.at(opt_elems);
    }
    const double device_s = r.gemm_s + r.attention_s + r.other_ops_s + r.optimizer_s;
    const double host_s =
        ((double)sim.trace.calls.size() + zero_calls + 2 * norm_launches + 1) * costs.launch_s;
    r.compute_s = std::max(device_s, host_s);
    return true;
}

// The efficiency model's correction for small micro-batches: the rank's GEMMs priced with the
// device's measured bf16 costs at their own token count N, over the same GEMMs at the token count
// the device's efficiency was measured at (kEfficiencyTokens: GPT-2 124M at micro-batch 16 x
// 1024), scaled by the work. 1 at that shape; above 1 where the GEMMs are too small to fill the
// GPU (micro-batch 1 of a short sequence). 1 when the trace has no GEMM the sweep timed.
constexpr double kEfficiencyTokens = 16 * 1024;
double small_batch_gemm_factor(const OpCosts& costs, const RankSim& sim) {
    double at_n = 0, at_ref = 0;
    TracePrices price(costs);
    for (OpCall c : sim.trace.calls) {
        if (!op_is_gemm(c.kind)) continue;
        if (!costs.measured[(size_t)c.kind] || c.N < 1) continue;
        c.fp8 = false;
        at_n += price(c);
        const double n = (double)c.N;
        c.N = (int64_t)kEfficiencyTokens;
        at_ref += price(c) * n / kEfficiencyTokens;
    }
    return at_n > 0 && at_ref > 0 ? at_n / at_ref : 1.0;
}

// A CPU rank's exposed communication per step, priced with the host's measured collectives
// (OpCosts::collective: a fixed time per call and a time per byte the rank sends): each TP
// all-reduce of the trace; the parameter store's per-unit DP collectives (all-reduce below ZeRO-2,
// the all-gather after ZeRO-1/2's update, ZeRO-2/3's reduce-scatter per micro-batch, ZeRO-3's two
// gathers per micro-batch); one pipeline message per micro-batch and chunk boundary each way; the
// tied embedding's all-reduce; the step's scalars. Every one of those calls synchronises the
// ranks, so each also waits out their spread and a wake-up (OpCosts::sync: per call, and per
// second of the rank's compute). No overlap with compute (each rank has its cores busy).
double price_cpu_comm(const OpCosts& costs, const RankSim& sim, const ParallelConfig& par, int m,
                      const RankEstimate& r, int world) {
    if (world < 2) return 0;
    double calls = 1, bytes = 0;  // the step's scalars: loss, gradient norm and stop votes
    for (const OpCall& c : sim.trace.calls)
        if (c.kind == OpKind::tp_all_reduce) {
            calls += 1;
            bytes += ring_all_reduce((double)c.N, (int)c.NH);
        }
    double units = 0;
    for (const auto& ch : sim.chunks)
        for (const auto& l : ch) units += (double)l.units.size();
    if (par.dp > 1) {
        const int z = par.zero;
        calls += units * ((z < 2) + (z == 1 || z == 2) + (z >= 2 ? m : 0) + (z >= 3 ? 2 * m : 0));
        bytes += r.comm_dp_bytes;
    }
    if (r.comm_pp_bytes > 0) {
        const int G = par.pp * par.virtual_stages;
        double boundaries = 0;  // messages per micro-batch: outputs on, input gradients back
        for (int g : sim.layers.global) boundaries += (g < G - 1) + (g > 0);
        calls += boundaries * m;
        bytes += r.comm_pp_bytes;
    }
    if (r.comm_embedding_bytes > 0) {
        calls += 1;
        bytes += r.comm_embedding_bytes;
    }
    return calls * (costs.collective.fixed_s + costs.sync.fixed_s) +
           bytes * costs.collective.per_unit_s + r.compute_s * costs.sync.per_unit_s;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// estimate_plan

PlanEstimate estimate_plan(const RunConfig& cfg, const DeviceSpec& dev) {
    if (dev.shared_host) return estimate_plan(cfg, dev, op_costs_for_cpu(plan_cpu_threads(cfg)));
    return estimate_plan(cfg, dev, op_costs_for(dev.name));
}

int64_t device_rank_capacity(const DeviceSpec& dev, int world) {
    return dev.shared_host ? dev.memory_bytes / std::max(1, world) : dev.memory_bytes;
}

const char* device_rank_noun(const DeviceSpec& dev) {
    return dev.shared_host ? "rank" : "GPU";
}

int64_t plan_rank_capacity(const PlanEstimate& e) {
    return device_rank_capacity(e.device, e.world);
}

int64_t plan_fullest_bytes(const PlanEstimate& e) {
    int64_t m = 0;
    for (const auto& r : e.ranks) m = std::max(m, r.device_peak_bytes);
    return m;
}

int plan_cpu_threads(const RunConfig& cfg) {
    if (cfg.train.threads > 0) return cfg.train.threads;
    const int world = cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp;
    return default_threads_per_rank(cpu_host().cores, world);  // as tessera train sets them
}

PlanEstimate estimate_plan(const RunConfig& cfg, const DeviceSpec& dev, const OpCosts* measured) {
    const ModelConfig& mc = cfg.model;
    const ParallelConfig& par = cfg.parallel;
    const ModelShape shape = model_shape(mc, plan_vocab_size(mc));
    const bool gpt = shape.family == ModelShape::Family::gpt;
    const GptDims& d = shape.gpt;
    if (gpt && (d.n_layer < 1 || d.n_head < 1 || d.d_model < 1 || d.seq_len < 1))
        throw InputError(str_cat(cfg.source_path,
                                 ": model: expected positive n_layer, n_head, "
                                 "d_model, seq_len, found ",
                                 d.n_layer, ", ", d.n_head, ", ", d.d_model, ", ", d.seq_len));
    if (gpt && (d.d_model % d.n_head != 0 || d.n_head % par.tp != 0))
        throw InputError(str_cat(cfg.source_path, ": parallel.tp: expected n_head (", d.n_head,
                                 ") divisible by tp and d_model (", d.d_model,
                                 ") by n_head, found tp ", par.tp));
    const bool mlp = shape.family == ModelShape::Family::mlp,
               llama = shape.family == ModelShape::Family::llama;
    if (mlp && par.tp != 1)
        throw InputError(str_cat(cfg.source_path,
                                 ": parallel.tp: an MLP is not tensor-split: "
                                 "expected tp 1, found ",
                                 par.tp));
    if (llama &&
        (shape.llama.n_head % par.tp || shape.llama.n_kv_head % par.tp || shape.llama.ffn % par.tp))
        throw InputError(str_cat(cfg.source_path, ": parallel.tp: expected tp dividing n_head (",
                                 shape.llama.n_head, "), n_kv_head (", shape.llama.n_kv_head,
                                 ") and ffn (", shape.llama.ffn, "), found tp ", par.tp));
    for (int h : shape.sizes)
        if (h < 1)
            throw InputError(
                str_cat(cfg.source_path, ": model.hidden: expected positive sizes, found ", h));
    const MeshShape mesh{par.dp, par.tp, par.pp};
    const int world = mesh.world(), m = cfg.train.grad_accum, B = cfg.train.micro_batch;
    const int64_t T = shape.targets_per_sample(), N = (int64_t)B * T;
    const int64_t C = mlp ? 0 : shape.d_model();
    const int64_t q_width = gpt     ? d.d_model
                            : llama ? shape.llama.q_width()
                                    : 0;  // attention's width
    PlanEstimate est;
    est.device = dev;
    est.world = world;
    est.tokens_per_step = N * m * par.dp;
    // model FLOPs per target (forward), as the Model's train_flops_per_target
    const std::vector<LayerSpec> specs = shape.layer_specs();
    double fwd_tok = 0;
    for (const LayerSpec& l : specs) fwd_tok += l.flops_per_token;
    est.model_flops_per_step = 3.0 * fwd_tok * (double)est.tokens_per_step;
    const double per_rank_peak = dev.shared_host ? dev.peak_flops / world : dev.peak_flops;
    const double rate = per_rank_peak * dev.efficiency;
    const int64_t capacity = device_rank_capacity(dev, world);

    // every run takes the parallel runtime, one rank included (engine/cli/train.cpp)
    const bool gpu = cfg.runtime.device == "cuda";
    const int64_t act_bytes = gpu && cfg.runtime.bf16_activations() ? 2 : 4;
    // measured per-op costs price a GPU step where the device has them (bf16 only), and CPU ranks
    // where this host was calibrated at the threads each rank gets
    const OpCosts* costs =
        gpu ? (act_bytes == 2 ? measured : nullptr) : (dev.shared_host ? measured : nullptr);
    bool all_priced = true;  // every rank class's ops were measured
    if (costs) {
        est.step_model = "ops";
        est.step_model_note = str_cat("per-op costs from ", costs->source);
    } else if (!gpu && dev.shared_host) {
        est.step_model_note = str_cat(
            "no CPU calibration for this host at ", plan_cpu_threads(cfg), " threads per rank (",
            cpu_costs_path(plan_cpu_threads(cfg)), "): FLOPs at the efficiency ", dev.efficiency,
            " of sgemm's rate; `tessera plan --calibrate` measures the ops");
    } else {
        est.step_model_note =
            str_cat("FLOPs at the efficiency ", dev.efficiency, " of the ", dev.name, "'s peak");
        if (const OpCosts* curve = gpu ? (measured ? measured : op_costs_for("H200")) : nullptr)
            est.step_model_note +=
                str_cat(", GEMMs smaller than ", (int)kEfficiencyTokens, " tokens slowed by ",
                        curve->source, "'s measured bf16 costs");
    }
    // CPU ranks sharing the host's cores: more threads than cores (ranks x threads) stretch every
    // op
    const double oversubscribed =
        !gpu && dev.shared_host
            ? std::max(1.0, (double)world * plan_cpu_threads(cfg) / cpu_host().cores)
            : 1.0;
    {
        const ScheduleKind sk = schedule_kind_parse(par.schedule);
        const int v = par.virtual_stages;
        auto sched = schedule_build(sk, par.pp, m, v);
        // unit times: a forward 1, a backward 2 = B 1 + W 1; zb-h1 defers W only where the blocks
        // split their backward (GPT's and the Llama family's; with qk_norm they run whole: W 0)
        const bool w_splits = gpt || (llama && !shape.llama.qk_norm);
        est.bubble_fraction =
            par.pp > 1 ? schedule_bubble_fraction(sched, par.pp, 1.0, w_splits ? 1.0 : 2.0,
                                                  w_splits ? 1.0 : 0.0)
                       : 0.0;
        const std::vector<int> blocks = plan_blocks_per_chunk(cfg);
        const int G = par.pp * v;
        if (!par.recompute.empty() && par.recompute.size() != 1 &&
            (int)par.recompute.size() != par.pp)
            throw InputError(str_cat(cfg.source_path, ": parallel.recompute: expected 1 or pp (",
                                     par.pp, ") entries, found ", par.recompute.size()));
        // memory and FLOPs depend on (stage, tp rank) only: DP ranks are identical
        std::vector<RankEstimate> cls((size_t)par.pp * par.tp);
        // the efficiency model's small-batch GEMM factor per class (small_batch_gemm_factor)
        std::vector<double> small_batch(cls.size(), 1.0);
        const OpCosts* gemm_curve = gpu ? (measured ? measured : op_costs_for("H200")) : nullptr;
        // the stages are simulated side by side (each its own RankSim, its own slots); the
        // model's parameter table is built here, once, and shared by every layer's copy of shape
        shape.param_table();
        std::vector<char> stage_priced((size_t)par.pp, 1);
        parallel_for((size_t)par.pp, [&](size_t stage_index) {
            const int s = (int)stage_index;
            Recompute rc = recompute_parse(par.recompute_of(s));
            for (int t = 0; t < par.tp; ++t) {
                auto [v0, v1] =
                    mlp ? std::pair<int64_t, int64_t>{0, 0} : vocab_shard(shape.vocab(), t, par.tp);
                const int64_t Vl = v1 - v0;
                // TP ranks differ only in their vocabulary shard: a rank with the first's shard
                // size is the first's twin (heads, kv heads and the MLP split evenly)
                if (t > 0) {
                    auto [f0, f1] = mlp ? std::pair<int64_t, int64_t>{0, 0}
                                        : vocab_shard(shape.vocab(), 0, par.tp);
                    if (f1 - f0 == Vl) {
                        cls[(size_t)s * par.tp + t] = cls[(size_t)s * par.tp];
                        small_batch[(size_t)s * par.tp + t] = small_batch[(size_t)s * par.tp];
                        continue;
                    }
                }
                RankSim sim;
                sim.B = B, sim.T = T, sim.N = N;
                sim.dp = par.dp, sim.zero = par.zero, sim.pp = par.pp, sim.v = v, sim.stage = s;
                sim.m = m;
                sim.offload_act = par.offload_activations, sim.offload_opt = par.offload_optimizer;
                sim.device = layer_traits(gpu ? Device::cuda : Device::cpu,
                                          act_bytes == 2 ? DType::bf16 : DType::f32,
                                          cfg.runtime.fp8_gemms());
                double flops_tok = 0;  // executed forward+backward(+recompute) FLOPs per token
                int layers = 0;
                sim.build(shape, blocks, t, par.tp, rc);
                for (size_t c = 0; c < sim.layers.chunks.size(); ++c) {
                    for (int li = sim.layers.lo[c]; li < sim.layers.hi[c]; ++li) {
                        // a GPT block's columns and rows split evenly over TP, the head by its
                        // vocabulary shard; recompute repeats the forward (full) or attention's
                        // score part (selective)
                        const int L = shape.n_blocks();
                        double f = specs[li].flops_per_token / par.tp, extra = 0.0;
                        if (!mlp && li > L) f = 2.0 * C * Vl;
                        if (!mlp && li > 0 && li <= L)
                            extra = rc == Recompute::full        ? f
                                    : rc == Recompute::selective ? 2.0 * 2 * T * q_width / par.tp
                                                                 : 0.0;
                        flops_tok += 3 * f + extra;
                        ++layers;
                    }
                }
                if (gpu) {  // outside the allocator, measured on the device (DeviceSpec)
                    sim.tl.alloc(MemCategory::context, dev.context_bytes);
                    sim.tl.alloc(MemCategory::libraries, dev.libraries_bytes);
                }
                sim.store_init();
                RankEstimate r;
                r.max_in_flight = sim.run_step(sched[s]);
                for (int c = 0; c < kMemCategoryCount; ++c) {
                    r.peak_bytes[c] = sim.tl.mem.peak_bytes((MemCategory)c);
                    r.at_peak_bytes[c] = sim.tl.mem.at_device_peak_bytes((MemCategory)c);
                }
                r.total_peak_bytes = sim.tl.mem.total_peak_bytes();
                r.device_peak_bytes = sim.tl.mem.device_peak_bytes();
                r.layers = layers;
                r.flops_per_step = flops_tok * (double)N * m;
                r.compute_s = r.flops_per_step / rate;
                // the efficiency model on a GPU: the device's efficiency holds at the shape it was
                // measured at; smaller micro-batches run their GEMMs slower per FLOP, by the
                // device's measured GEMM costs (the H200's curve for a GPU never swept)
                if (gemm_curve)
                    small_batch[(size_t)s * par.tp + t] = small_batch_gemm_factor(*gemm_curve, sim);
                if (!costs) r.compute_s *= small_batch[(size_t)s * par.tp + t];
                if (costs && !price_ops(*costs, sim, par.zero, dev.host_link_bytes_per_s, r))
                    stage_priced[(size_t)s] = 0;
                if (costs && oversubscribed > 1) {
                    for (double* x :
                         {&r.compute_s, &r.gemm_s, &r.attention_s, &r.other_ops_s, &r.optimizer_s})
                        *x *= oversubscribed;
                }
                // ---- communication per step (bytes sent by this rank)
                double unit_bytes = 0, wte_bytes = 0;
                for (auto& ch : sim.chunks)
                    for (auto& l : ch)
                        for (const auto& u : l.units) {
                            unit_bytes += (double)u.pad * kF;
                            if (u.is_wte) wte_bytes += (double)(par.zero >= 2 ? u.S : u.len) * kF;
                        }
                const int dpn = par.dp;
                // ZeRO-1 on GPUs (NCCL) reduce-scatters instead of all-reducing; bf16 GPU layers
                // get their ZeRO-1/2 parameters gathered in bf16 (ParamStore)
                if (par.zero == 1 && sim.gpu())
                    r.comm_dp_bytes += ring_gather(unit_bytes, dpn);
                else if (par.zero < 2)
                    r.comm_dp_bytes += ring_all_reduce(unit_bytes, dpn);
                if (par.zero == 1 || par.zero == 2)
                    r.comm_dp_bytes +=
                        ring_gather(sim.gathers_bf16() ? unit_bytes / 2 : unit_bytes, dpn);
                if (par.zero >= 2) r.comm_dp_bytes += m * ring_gather(unit_bytes, dpn);
                if (par.zero >= 3) r.comm_dp_bytes += 2.0 * m * ring_gather(unit_bytes, dpn);
                const double act = (double)N * C * act_bytes;
                int n_blocks = 0;
                for (auto& ch : sim.chunks)
                    for (auto& l : ch) n_blocks += l.kind == LayerKind::block;
                double tp_per_micro = n_blocks * (4 + (rc == Recompute::full ? 2 : 0)) * act;
                for (int c = 0; c < v; ++c) {
                    int g = c * par.pp + s;
                    if (g == 0) tp_per_micro += act;
                    if (g == G - 1) tp_per_micro += act + 3.0 * N * kF;
                    if (g < G - 1) r.comm_pp_bytes += act * m;  // forward outputs sent on
                    if (g > 0) r.comm_pp_bytes += act * m;      // input gradients sent back
                }
                r.comm_tp_bytes = m * ring_all_reduce(tp_per_micro, par.tp);
                if (par.pp > 1 && wte_bytes > 0 && shape.tied())
                    r.comm_embedding_bytes = ring_all_reduce(wte_bytes, 2);
                const bool dp_cross_node = (int64_t)par.tp * par.dp > dev.gpus_per_node;
                const double dp_bw =
                    dp_cross_node ? dev.network_bytes_per_s : dev.nvlink_bytes_per_s;
                const double pp_bw =
                    world > dev.gpus_per_node ? dev.network_bytes_per_s : dev.nvlink_bytes_per_s;
                r.comm_s = r.comm_tp_bytes / dev.nvlink_bytes_per_s + r.comm_pp_bytes / pp_bw +
                           r.comm_dp_bytes / dp_bw + r.comm_embedding_bytes / pp_bw;
                if (costs && costs->comm_measured && !gpu)
                    r.comm_s = price_cpu_comm(*costs, sim, par, m, r, world);
                r.offload_bytes = (double)sim.offloaded_bytes;
                cls[(size_t)s * par.tp + t] = r;
            }
        });
        for (char priced : stage_priced) all_priced = all_priced && priced;
        // one model prices every rank: when a class's trace holds an op the device's sweep did
        // not time, all classes take the efficiency model (a step mixing both would compare
        // stages priced two ways)
        if (costs && !all_priced) {
            est.step_model = "efficiency";
            est.step_model_note =
                str_cat("a rank's trace holds an op ", costs->source,
                        " has no cost for: FLOPs at the efficiency ", dev.efficiency);
            for (size_t i = 0; i < cls.size(); ++i) {
                RankEstimate& r = cls[i];
                r.compute_s = r.flops_per_step / rate * small_batch[i];
                r.gemm_s = r.attention_s = r.other_ops_s = r.optimizer_s = 0;
            }
        }
        // activation offload: the copies overlap compute, but the forward waits for the previous
        // layer's copies to the host and the backward for each layer's copy back, so each phase
        // takes the longer of its compute (forward a third of it, the backward the rest) and its
        // copies over the host link
        for (RankEstimate& r : cls)
            if (r.offload_bytes > 0 && dev.host_link_bytes_per_s > 0) {
                const double copy_s = r.offload_bytes / dev.host_link_bytes_per_s;
                const double pass = r.compute_s - r.optimizer_s;  // forward + backward
                const double fwd = pass / 3, bwd = pass - fwd;
                r.offload_s = std::max(fwd, copy_s) - fwd + std::max(bwd, copy_s) - bwd;
            }
        est.ranks.resize(world);
        double slowest = 0;
        for (int rank = 0; rank < world; ++rank) {
            MeshCoord c = mesh_coord(mesh, rank);
            RankEstimate r = cls[(size_t)c.pp * par.tp + c.tp];
            r.rank = rank;
            r.coord = c;
            est.ranks[rank] = r;
            est.flops_per_step += r.flops_per_step;
            // the pipeline's passes stretched by the bubble; the optimizer after them
            slowest =
                std::max(slowest, (r.compute_s - r.optimizer_s) / (1.0 - est.bubble_fraction) +
                                      r.optimizer_s + r.comm_s + r.offload_s);
        }
        est.step_s = slowest;
    }
    for (auto& r : est.ranks) {
        if (est.fits && r.device_peak_bytes > capacity) {
            est.fits = false;
            est.reason = str_cat("rank ", r.rank, " (", mesh_coord_str(r.coord), ") needs ",
                                 r.device_peak_bytes, " bytes, more than the ", dev.name, "'s ",
                                 capacity, " bytes");
        }
    }
    est.tokens_per_s = est.step_s > 0 ? est.tokens_per_step / est.step_s : 0;
    // MFU against the peak the step was priced from: CPU ranks with a calibration take its fastest
    // GEMM where that beats the sgemm timed in this process (timed on a busy host, that one is
    // low, and a step priced from a quiet host's sweep read as over 100%)
    const double mfu_peak = costs && dev.shared_host
                                ? std::max(per_rank_peak, costs->gemm_peak_flops())
                                : per_rank_peak;
    est.mfu = est.step_s > 0 ? est.model_flops_per_step / (est.step_s * world * mfu_peak) : 0;
    return est;
}

}  // namespace tessera
