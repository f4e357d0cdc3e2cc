// The estimator's memory replay of one parallel rank (internal to engine/plan): one training
// step of RankRunner (engine/train/parallel_trainer.cpp) as allocation events, in the order and
// at the sizes the runtime allocates them — the parameter store (engine/parallel/zero.cpp) and
// the layers, either the CPU ones (engine/parallel/tp_layers.cpp, fp32) or the GPU ones
// (engine/parallel/tp_layers_cuda.cpp: bf16 or fp32 activations, flash attention, fused
// classifier, weight-copy caches, asynchronous activation offload). No CUDA here: the studio
// runs it on machines without GPUs.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "engine/core/memory.h"
#include "engine/parallel/schedule.h"
#include "engine/parallel/tp_layers.h"

namespace tessera::plan_sim {

// Current and peak bytes per category, as MemoryTracker keeps them.
struct Timeline {
    std::array<int64_t, kMemCategoryCount> cur{}, peak{};
    int64_t total = 0, total_peak = 0;
    int64_t device_peak = 0;  // peak of the total without the host category
    void alloc(MemCategory c, int64_t bytes);
    void free(MemCategory c, int64_t bytes);
};

enum class LayerKind { embedding, block, head };

struct SimTensor {
    int64_t bytes;
    MemCategory cat;
};

// A ParamStore unit (fp32 on every device): len elements, S per DP rank, padded to S·dp.
struct SimUnit {
    int64_t len = 0, S = 0, pad = 0;
    bool full = false, gather_posted = false, grad_full = false;
    size_t gather_task = 0;
};

struct SimLayer {
    LayerKind kind;
    std::vector<SimUnit> units;
    SimLayer* tied = nullptr;  // the head's tied embedding (pp = 1)
    std::map<int, std::vector<SimTensor>> saved;
    // GPU layers: the low-precision weight copy and the padded LM-head weight exist once made;
    // token ids have one device buffer per (micro-batch), kept across steps
    bool weight_cache = false, head_pad = false;
    std::set<int> token_slots;
};

struct RankSim {
    // dims (Cl, NHl, Vl: this TP rank's shares)
    int64_t B, T, C, Cl, NHl, N, Vl;
    int dp, zero, pp, v, stage, m;
    Recompute rc;
    bool offload_act, offload_opt;
    // the device the rank runs on: GPU layers with `act_bytes` per activation element (bf16: 2)
    bool gpu = false;
    int64_t act_bytes = 4;
    std::vector<std::vector<SimLayer>> chunks;  // this rank's chunks (local index) -> layers
    std::vector<int> global_chunk;
    Timeline tl;
    int64_t offloaded_bytes = 0;  // activation bytes sent to the host in the replayed step
    std::vector<SimTensor> sends;  // tensors held by pending isends until the step ends

    void store_init();
    // Replays the stage's schedule, the gradient finish and the optimizer step; returns the most
    // micro-batches with saved activations at once.
    int run_step(const StageSchedule& sched);

    // ZeRO-1/2 on bf16 GPU layers: parameters gathered as bf16 in a persistent symmetric buffer
    bool gathers_bf16() const { return gpu && act_bytes == 2 && (zero == 1 || zero == 2) && dp > 1; }
    // ZeRO-0 (and ZeRO-1 gathering in bf16) on GPUs: the full gradients in a symmetric buffer,
    // with a staging buffer as large, reduced through copy-engine exchanges
    bool symmetric_grads() const { return gpu && dp > 1 && (zero == 0 || (zero == 1 && gathers_bf16())); }

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

    // ---- layers: forward returns the output; backward takes the incoming gradient (allocated;
    // empty for the head) and returns the outgoing one
    SimTensor layer_forward(SimLayer& l, int micro, SimTensor x);
    SimTensor layer_backward(SimLayer& l, int micro, SimTensor dout);
    SimTensor cpu_forward(SimLayer& l, int micro, SimTensor x);
    SimTensor cpu_backward(SimLayer& l, int micro, SimTensor dout);
    SimTensor gpu_forward(SimLayer& l, int micro, SimTensor x);
    void cache_weights(SimLayer& l);
    SimTensor gpu_backward(SimLayer& l, int micro, SimTensor dout);
    void free_saved(SimLayer& l, int micro);
    int64_t f32(int64_t n) const { return 4 * n; }
    int64_t act(int64_t n) const { return act_bytes * n; }

    // ---- activation offload. CPU: plain copies. GPU (GptLayer::offload / fetch_begin): a copy's
    // source stays allocated until the copy is reaped; a copy counts as finished once a layer's
    // compute has been issued after it (the forward also waits for the previous layer's copies).
    struct Pending {
        SimTensor keep;
        int64_t issued_after;  // layer computes issued before the copy
    };
    std::vector<Pending> copies;
    int64_t computes = 0;
    void reap_copies(size_t upto);
    void offload(SimLayer& l, int micro);
    void fetch(SimLayer& l, int micro);

    // ---- the rank loop (parallel_trainer.cpp RankRunner::forward / backward)
    void forward(int micro, int c);
    void backward(int micro, int c);
};

}  // namespace tessera::plan_sim
