// The estimator's run of one parallel rank (internal to engine/plan): one training step of the
// runtime on the meta device, as allocation events. Everything that allocates is the runtime's
// own code: the layers (engine/parallel/tp_layers.cpp, on the meta LayerOps standing in for the
// run's device: LayerTraits — the CPU's fp32 layers, or the GPU's bf16/fp32 ones with flash
// attention, the padded classifier, weight copies, token buffers and asynchronous activation
// offload), the ParamStore (engine/parallel/zero.cpp: units, ZeRO gathers and frees, gradient
// reductions, symmetric buffers, optimizer offload, the optimizer step; on the meta DeviceOps,
// a meta Communicator answering as Gloo or NCCL, and a lazy comm thread: a task runs when it is
// waited for or a later one is) and the schedule walk (engine/parallel/stage_runner.h, the
// same as RankRunner's). This file only wires them: meta batches, the step's sends held until
// its end, and the Timeline and op trace they report to. No CUDA: the studio runs it on
// machines without GPUs.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/core/device_pool.h"
#include "engine/core/memory.h"
#include "engine/core/tensor.h"
#include "engine/parallel/schedule.h"
#include "engine/parallel/stage_runner.h"
#include "engine/parallel/tp_layers.h"
#include "engine/parallel/zero.h"

namespace tessera::plan_sim {

// Current and peak bytes per category: a MemoryTracker of the rank's own, which the meta device
// reports to. A GPU rank's tensors are placed by a DevicePool of its own over address ranges that
// hold nothing (use_pool): the same placement as the runtime's, so its slack (`cached`) and the
// device's total are the real run's. The pool's layout settles over a few steps, as the run's
// does: repeat_step replays the recorded step's transient tensors until its segments stop growing.
struct Timeline final : MetaMemory {
    MemoryTracker mem;
    int64_t host_allocated = 0;  // host-category bytes allocated so far
    void use_pool();
    void alloc(MemCategory c, int64_t bytes) override;
    void free(MemCategory c, int64_t bytes) override;
    void* tensor_alloc(MemCategory c, int64_t bytes) override;
    void tensor_free(MemCategory c, int64_t bytes, void* addr) override;
    // Records the pool's tensors from here (on) or stops; repeat_step then replays what was
    // recorded and freed again within it, in order, until the pool reserves nothing more (a few
    // times at most).
    void record(bool on);
    void repeat_step();

  private:
    struct Event {
        bool alloc;
        MemCategory cat;
        int64_t bytes;
        int64_t of;  // a free: the index of its tensor's alloc event (-1: made before recording)
    };
    std::unique_ptr<DevicePool> pool_;
    uintptr_t next_segment_ = uintptr_t(1) << 45;  // the meta segments' addresses
    bool recording_ = false;
    std::vector<Event> events_;
    std::unordered_map<uintptr_t, int64_t> live_event_;  // address -> its alloc event
};

enum class LayerKind { embedding, block, head };

// A ParamStore unit's sizes (fp32 on every device): len elements, S per DP rank, padded to S·dp.
struct SimUnit {
    int64_t len = 0, S = 0, pad = 0;
    bool is_wte = false;
    int params = 0;
    // ParamStore::grad_parts' buffers the store zeroes when it allocates them (elements): all
    // but those the layer writes whole
    std::vector<int64_t> zeroed_parts;
};

struct SimLayer {
    LayerKind kind;
    std::vector<SimUnit> units;  // ParamStore::unit_groups of the layer
    Layer* layer = nullptr;      // the runtime's layer, on the meta device (owned by layers)
};

// Create a RankSim, set its plan, build the stage's layers, store_init, then run_step. It must
// outlive nothing it made: its layers' meta tensors report to its own timeline.
struct RankSim final : private StageEdges {
    RankSim();
    ~RankSim() override;
    RankSim(const RankSim&) = delete;
    int64_t B = 1, T = 1, N = 1;
    int dp = 1, zero = 0, pp = 1, v = 1, stage = 0, m = 1;
    bool offload_act = false, offload_opt = false;
    // the device the rank runs on (its layers' traits: the CPU's, or the GPU's in bf16 or fp32)
    LayerTraits device;
    bool gpu() const { return device.device == Device::cuda; }
    StageLayers layers;                         // the stage's layers (stage_layers_build)
    std::vector<std::vector<SimLayer>> chunks;  // the same per local chunk, with their units
    Timeline tl;
    OpTrace trace;  // the layers' op calls during run_step (the step time is priced from them)
    int64_t offloaded_bytes = 0;  // activation bytes sent to the host in the step

    // The stage's chunks of `model` (blocks per global chunk as the runtime splits them), sharded
    // for TP rank `tp` of `tp_size`, built as the rank builds them (stage_layers_build).
    void build(const ModelShape& model, const std::vector<int>& blocks_per_chunk, int tp,
               int tp_size, Recompute rc);
    // The rank's ParamStore over the chunks' layers (DP rank 0 of dp).
    void store_init();
    // Runs the stage's schedule, the gradient finish and the optimizer step; returns the most
    // micro-batches with saved activations at once.
    int run_step(const StageSchedule& sched);

    // The store's symmetric buffers (ParamStore::symmetric_layout), which GPUs' NCCL provides:
    // ZeRO-1/2 parameters gathered as bf16 in a persistent symmetric buffer; zero 0 (and ZeRO-1
    // gathering in bf16) full gradients in one, with a staging buffer as large
    ParamStore::SymmetricLayout symmetric() const {
        if (!gpu()) return {};
        return ParamStore::symmetric_layout(zero, device.act == DType::bf16, dp > 1);
    }
    bool gathers_bf16() const { return symmetric().images16; }

  private:
    // StageEdges: receives fill nothing, sends are held until the step ends, losses are dropped
    void recv_post(Tensor&, int, int, int, bool) override {}
    void recv_wait(int, int, int, bool) override {}
    void send(Tensor x, int, int, int, bool) override { sends_.push_back(std::move(x)); }
    void losses(const Tensor&, bool) override {}
    void layer_issued(int) override { ++tl.computes; }

    ModelShape model_;
    Batch batch_;                            // a micro-batch of token ids (zeros)
    MetaMemory* outer_ = nullptr;            // the meta memory installed before this run
    std::vector<Tensor> sends_;              // tensors held by pending isends until the step ends
    std::unique_ptr<Communicator> dp_comm_;  // null when dp = 1
    std::unique_ptr<ParamStore> store_;
    std::unique_ptr<StageRunner> runner_;
};

}  // namespace tessera::plan_sim
