// The estimator's memory replay of one parallel rank (internal to engine/plan): one training
// step of RankRunner (engine/train/parallel_trainer.cpp) as allocation events. The layers are the
// runtime's own (engine/parallel/tp_layers.cpp) on the meta device standing in for the run's
// device (LayerTraits: the CPU's fp32 layers, or the GPU's bf16/fp32 ones with flash attention,
// the padded classifier, weight copies, token buffers and asynchronous activation offload): they
// allocate what the real run allocates, in the same order, and launch nothing. The parameter
// store (engine/parallel/zero.cpp) and the rank loop are replayed here. No CUDA: the studio runs
// it on machines without GPUs.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "engine/core/memory.h"
#include "engine/core/tensor.h"
#include "engine/parallel/schedule.h"
#include "engine/parallel/tp_layers.h"
#include "engine/parallel/zero.h"

namespace tessera::plan_sim {

// Current and peak bytes per category, as MemoryTracker keeps them; the meta device reports to it.
struct Timeline final : MetaMemory {
    std::array<int64_t, kMemCategoryCount> cur{}, peak{};
    int64_t total = 0, total_peak = 0;
    int64_t device_peak = 0;  // peak of the total without the host category
    int64_t host_allocated = 0;  // host-category bytes allocated so far
    void alloc(MemCategory c, int64_t bytes) override;
    void free(MemCategory c, int64_t bytes) override;
};

enum class LayerKind { embedding, block, head };

// A ParamStore unit (fp32 on every device): len elements, S per DP rank, padded to S·dp.
struct SimUnit {
    int64_t len = 0, S = 0, pad = 0;
    bool is_wte = false;
    bool full = false, gather_posted = false, grad_full = false;
    size_t gather_task = 0;
};

struct SimLayer {
    LayerKind kind;
    std::vector<SimUnit> units;  // ParamStore::unit_groups of the layer
    SimLayer* tied = nullptr;    // the head's tied embedding (pp = 1)
    std::unique_ptr<Layer> layer;  // the runtime's layer, on the meta device
};

// Create a RankSim, set its plan, call add_chunk for each of the stage's chunks, then run_step.
// It must outlive nothing it made: its layers' meta tensors report to its own timeline.
struct RankSim {
    RankSim();
    ~RankSim();
    RankSim(const RankSim&) = delete;
    int64_t B = 1, T = 1, N = 1;
    Shape hidden;  // what a stage receives and sends (pp > 1)
    int dp = 1, zero = 0, pp = 1, v = 1, stage = 0, m = 1;
    bool offload_act = false, offload_opt = false;
    // the device the rank runs on (its layers' traits: the CPU's, or the GPU's in bf16 or fp32)
    LayerTraits device;
    bool gpu() const { return device.device == Device::cuda; }
    std::vector<std::vector<SimLayer>> chunks;  // this rank's chunks (local index) -> layers
    std::vector<int> global_chunk;
    Timeline tl;
    OpTrace trace;  // the layers' op calls during run_step (the step time is priced from them)
    int64_t offloaded_bytes = 0;  // activation bytes sent to the host in the replayed step

    // The layers [lo, hi) of `model` as global chunk g, sharded for TP rank `tp` of `tp_size`.
    void add_chunk(int g, const ModelShape& model, int lo, int hi, int tp, int tp_size, Recompute rc);
    void store_init();
    // Replays the stage's schedule, the gradient finish and the optimizer step; returns the most
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
    bool symmetric_grads() const { return symmetric().grads; }

private:
    // ---- ParamStore. Its DP comm thread is modelled as lazy: a posted task runs only when the
    // main thread waits for it or for a later task (FIFO), or drains the queue.
    std::vector<std::function<void()>> tasks;
    std::deque<size_t> in_flight;
    size_t tasks_done = 0;
    size_t post(std::function<void()> f);
    void run_until(size_t k);
    void drain();
    void gather(SimUnit& u);
    std::vector<SimLayer*> with_tied(SimLayer* l);
    void before_forward(SimLayer* l, SimLayer* next);
    void after_forward(SimLayer* l);
    void before_backward(SimLayer* l, SimLayer* next);
    void after_backward(SimLayer* l);
    void optimizer_step();

    static int64_t f32(int64_t n) { return 4 * n; }
    // ---- the layers' inputs: a micro-batch of token ids (zeros), fake parameter storage
    Batch batch_;
    std::vector<float> no_storage_;
    MetaMemory* outer_ = nullptr;  // the meta memory installed before this replay
    std::vector<Tensor> sends_;     // tensors held by pending isends until the step ends
    SimLayer* embedding_ = nullptr;  // the embedding layer, once added
    // ---- the rank loop (parallel_trainer.cpp RankRunner::forward / backward)
    void forward(int micro, int c);
    void backward(int micro, int c);
};

}  // namespace tessera::plan_sim
