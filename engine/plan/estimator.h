// The plan estimator: for a RunConfig (a struct — no YAML in the hot path) and a device, predicts
// every rank's memory by category (the MemoryTracker categories the runtime reports), FLOPs,
// communication volume, the pipeline bubble and the step time. Memory comes from running the
// rank's training step on the meta device with the runtime's own layers (engine/parallel: GPT,
// the Llama family or the MLP), ParamStore and schedule walk (StageRunner; engine/plan/rank_sim.h),
// one rank included (it trains through the same runtime). Formulas: docs/parallelism.md, "The
// estimator".
// Qt-free: the CLI (`tessera plan`) and the studio both call it.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/core/memory.h"
#include "engine/parallel/mesh.h"

namespace tessera {

// A device the step time is predicted for. Constants (per GPU) are documented in
// docs/parallelism.md; "cpu" is measured (OpenBLAS sgemm on this host, cached per process).
struct DeviceSpec {
    std::string name;                  // H100 | H200 | A100-80GB | A100-40GB | cpu
    double peak_flops = 0;             // dense bf16 tensor-core FLOP/s (cpu: fp32 sgemm, all cores)
    double hbm_bytes_per_s = 0;        // device memory bandwidth
    int64_t memory_bytes = 0;          // capacity per device (cpu: physical RAM of the host)
    double nvlink_bytes_per_s = 0;     // per-GPU intra-node bandwidth, one direction
    double network_bytes_per_s = 0;    // per-GPU inter-node bandwidth (InfiniBand), one direction
    double host_link_bytes_per_s = 0;  // device <-> pinned host memory (PCIe), one direction;
                                       // 0: none (CPU ranks: offload is a memory copy)
    int gpus_per_node = 8;             // beyond this, DP groups cross nodes
    double efficiency = 0.5;           // fraction of peak a training step sustains (MFU ceiling)
    bool shared_host = false;          // cpu: every rank shares peak_flops and memory_bytes
    // What a GPU process holds outside Tessera's allocator, measured on the device by
    // bench/device_overhead.py (MemCategory::context and ::libraries): the CUDA context, and
    // cuBLASLt, the kernel modules and scratch. 0 on the CPU.
    int64_t context_bytes = 0;
    int64_t libraries_bytes = 0;
};

// Throws InputError naming the known devices for an unknown name.
DeviceSpec device_spec(const std::string& name);
// The table's entry for a GPU as the driver names it ("NVIDIA H200", "NVIDIA A100-SXM4-80GB"),
// or false when the table has none.
bool device_spec_for_gpu(const std::string& driver_name, DeviceSpec* out);
// The table's entry for the device a run recorded (RunStore::devices): "cpu", or a GPU by its
// driver's name (device_spec_for_gpu). False when the table has none.
bool device_spec_for_recorded(const std::string& recorded_name, DeviceSpec* out);
// The device a config is estimated for when none is named or recorded: "cpu" for runtime.device
// cpu, else "H200" (`tessera plan`, the Plan page, the Monitor page for a run with no record).
std::string device_default_name(const RunConfig& cfg);
const std::vector<std::string>& device_names();
// Measured single-precision sgemm FLOP/s of this host (all threads), once per process.
double cpu_sgemm_flops();

// One rank's prediction. All memory figures are peaks over a training step, in bytes.
struct RankEstimate {
    int rank = 0;
    MeshCoord coord;
    std::array<int64_t, kMemCategoryCount> peak_bytes{};  // per MemCategory (peak of each)
    // per MemCategory at the moment of the device's peak: they add up to device_peak_bytes
    std::array<int64_t, kMemCategoryCount> at_peak_bytes{};
    int64_t total_peak_bytes = 0;   // peak of the sum (what mem/total_bytes reports)
    int64_t device_peak_bytes = 0;  // total peak without the host category (vs capacity)
    int max_in_flight = 0;          // most micro-batches with saved activations at once
    int layers = 0;                 // layers (embedding, blocks, head) this rank holds
    double flops_per_step = 0;      // executed, recompute included
    double comm_dp_bytes = 0;       // bytes this rank sends per step, by group
    double comm_tp_bytes = 0;
    double comm_pp_bytes = 0;
    double comm_embedding_bytes = 0;
    double compute_s = 0;  // busy compute time per step (no bubble), optimizer included
    // With measured op costs (OpCosts), compute_s in parts: the forward and backward passes'
    // GEMMs, attention and other (memory-bound) ops, and the optimizer's passes
    double gemm_s = 0, attention_s = 0, other_ops_s = 0, optimizer_s = 0;
    double comm_s = 0;         // exposed communication time per step
    double offload_bytes = 0;  // activation bytes copied to the host per step (and back)
    double offload_s = 0;      // exposed time of those copies per step
};

struct PlanEstimate {
    DeviceSpec device;
    int world = 1;
    std::vector<RankEstimate> ranks;  // indexed by global rank (mesh order)
    double flops_per_step = 0;        // all ranks, executed
    double model_flops_per_step = 0;  // 6 N + attention per token, no recompute (for MFU)
    int64_t tokens_per_step = 0;
    double bubble_fraction = 0;  // schedule_bubble_fraction(f = 1, b = 1, w = 1)
    double step_s = 0;
    double tokens_per_s = 0;
    double mfu = 0;
    // How compute time was predicted: "ops" (each op priced from the device's measured costs,
    // OpCosts) or "efficiency" (FLOPs at DeviceSpec::efficiency of peak)
    std::string step_model = "efficiency";
    std::string step_model_note;  // where the costs came from, or why the efficiency model
    bool fits = true;             // every rank's device_peak_bytes <= plan_rank_capacity
    std::string reason;           // why not, when !fits
};

// The memory one of `world` ranks may use: the device's, or on CPU ranks (shared_host) its share
// of the host's RAM.
int64_t device_rank_capacity(const DeviceSpec& dev, int world);
// What one rank runs on, for labels: "GPU", or "rank" for CPU ranks (shared_host).
const char* device_rank_noun(const DeviceSpec& dev);
// That capacity for the plan's ranks, and the fullest rank's device peak.
int64_t plan_rank_capacity(const PlanEstimate& e);
int64_t plan_fullest_bytes(const PlanEstimate& e);

// Throws InputError for configs it cannot estimate (indivisible heads, a split MLP, bad
// parallel.stages, a schedule that cannot be built).
PlanEstimate estimate_plan(const RunConfig& cfg, const DeviceSpec& dev);
// The same with these measured per-op costs (null: the efficiency model) instead of the
// device table's own (op_costs_for(dev.name)): what-if pricing, and tests.
struct OpCosts;
PlanEstimate estimate_plan(const RunConfig& cfg, const DeviceSpec& dev, const OpCosts* measured);

// The OpenMP threads each CPU rank of the plan runs (threads_configure, as `tessera train` calls
// it with every rank on this host): train.threads, or default_threads_per_rank (threads.h).
// A CPU step is priced with the calibration at this thread count (op_costs_for_cpu).
int plan_cpu_threads(const RunConfig& cfg);

// Blocks per model chunk, the split the runtime builds its stages from (engine/train's
// pipeline_blocks_per_chunk calls this): parallel.stages, or the contiguous split that balances
// the chunks' training FLOPs (the LM head counted on the last).
std::vector<int> plan_blocks_per_chunk(const RunConfig& cfg);
// Vocabulary size of a GPT config's tokenizer (bytes: 256, gpt2: 50257).
int plan_vocab_size(const ModelConfig& m);

}  // namespace tessera
