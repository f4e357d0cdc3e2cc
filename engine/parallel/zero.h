// Parameter, gradient and optimizer-state storage for one rank's layers, with data-parallel
// gradient reduction and ZeRO sharding over the DP group:
//   zero 0: full parameters, gradients and AdamW moments on every DP rank; gradients all-reduced.
//   zero 1: moments sharded (each DP rank updates its 1/dp slice, then parameters all-gathered);
//           on NCCL the gradients are only reduce-scattered (each rank needs its slice).
// On NCCL (zero 0, and zero 1 in bf16) the gradients live in a symmetric window and are reduced
// by copy-engine exchanges into a staging buffer plus one small add kernel (no SMs held for the
// transfer during the backward); ZeRO-1/2's bf16 parameter images feed the GPU layers directly.
//   zero 2: also gradients: reduce-scattered into the rank's slice after each micro-batch.
//   zero 3: also parameters: only the slice persists; a layer's parameters are all-gathered just
//           before it runs (the next layer prefetched) and freed after.
// Storage is per unit: a layer's parameters except a vocab embedding, and each vocab embedding
// (wte) alone — so the first and last pipeline stages shard their tied copies identically and
// can all-reduce their gradients.
// Optimizer offload: AdamW's moments in host memory; on a GPU (ZeRO-Offload) also the fp32
// masters and a copy of the gradients (pinned; without DP they go down during the backward, each
// unit's once final), AdamW on the host's cores (the device kernel's bits), the updated range
// copied back; with bf16 layers and ZeRO 0-2 the device then keeps a bf16 image of the
// parameters only (image_only()), ZeRO-3 its fp32 slice.
// The same store runs in the estimator on the meta device (ZeroOptions::ops =
// device_ops_meta(), a meta Communicator from comm_meta.h): its buffers are meta tensors that
// report to the estimator's MetaMemory, nothing is initialised or moved, and the comm thread is
// lazy (CommWorker::Mode::lazy), so a predicted step allocates exactly what this code allocates.
#pragma once
#include <deque>
#include <future>
#include <memory>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/optim/optimizer.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/comm_worker.h"
#include "engine/parallel/tp_layers.h"

namespace tessera {

class DeviceOps;

struct ZeroOptions {
    int stage = 0;
    DeviceOps* ops = nullptr;        // where the buffers live (null: the CPU)
    bool offload_optimizer = false;  // AdamW moments in the host pool (GPUs: the masters too)
    uint64_t seed = 0;               // parameter initialisation (counter-based, plan-independent)
    // ZeRO-1/2: the updated slices are all-gathered as bf16, half the bytes. For layers that
    // compute with bf16 copies of the weights only (the GPU layers in bf16 mode): the gathered
    // image is the same bits as those copies cast after an fp32 gather, so the layers compute
    // with it directly (Layer::param16_ptr; without a symmetric buffer it is widened into
    // the other ranks' fp32 slices instead), while each rank's own slice keeps its fp32 master.
    bool gather_bf16 = false;
    bool gpu = false;  // the device is a GPU (on the meta device: the one modelled)
    // The DP collectives run on the main thread when it waits for them (CommWorker::Mode::lazy)
    // instead of on a comm thread: CPU ranks (cpu_comm_thread says why).
    bool comm_in_place = false;
    // A step's micro-batches on this rank (gradient accumulation; see ParamStore::split_grads)
    int micro_batches = 1;
};

class ParamStore {
  public:
    // ZeRO-2/3: reduce-scatters in flight before a new full gradient is allocated.
    static constexpr size_t kMaxReductions = 1;
    // A unit's part of a symmetric buffer (DP on NCCL): its bytes rounded up to a page, the
    // alignment NCCL windows need.
    static constexpr int64_t symmetric_part_bytes(int64_t bytes) {
        return (bytes + 4095) / 4096 * 4096;
    }
    // How a layer's parameters form units (each reduced, sharded and gathered as one buffer):
    // the (tied) token embedding alone, then the rest; indices in layer.table().
    struct UnitGroup {
        std::vector<int> params;
        bool is_wte = false;
    };
    static std::vector<UnitGroup> unit_groups(const Layer& l);
    // Where a unit's gradients are split (split_grads): on a GPU each parameter larger than a
    // small block of the pool (1 MiB of fp32) in a buffer of its own, the smaller ones packed
    // together in one more, in the unit's order; on the CPU each parameter alone. Positions in
    // group.params, one list a buffer.
    static std::vector<std::vector<int>> grad_parts(const Layer& l, const UnitGroup& group,
                                                    bool gpu);
    // Whether a part (positions in `params`, a unit's parameter indices) is left unzeroed when
    // allocated: one parameter whose gradient the layer's backward writes whole
    // (Layer::grad_written_whole; the first write overwrites it).
    static bool part_written_whole(const Layer& l, const std::vector<int>& params,
                                   const std::vector<int>& part) {
        return part.size() == 1 && l.grad_written_whole(params[part[0]]);
    }
    // Whether a plan splits its gradients (ZeRO 0, or 1, without DP, one micro-batch a step): no
    // reduction then needs a unit's gradients in one buffer (optimizer offload downloads them a
    // parameter range at a time), so each part is allocated when the backward first needs it
    // and released at the next step's start. The parts fit the holes the freed activations
    // leave (a unit's one buffer, larger than any activation, would take a segment of its own),
    // so the gradients never add to the forward's peak. With several micro-batches those holes
    // are what the next micro-batch's forward needs: gpt2-xl B8 x4 peaked 2.1 GiB higher split
    // (49.4 GiB on an H100) than with one buffer a unit, and allocating the parts at the step's
    // start instead was predicted higher still (55.3).
    static bool split_grads(int stage, int dp, int micro_batches) {
        return stage < 2 && dp == 1 && micro_batches == 1;
    }
    // Optimizer offload on a GPU: whether each unit's gradients go to the host as its last
    // backward of the step ends, under the rest of the backward (ZeRO 0/1 without DP: nothing
    // reduces them first), rather than after the backward
    static bool downloads_in_backward(int stage, int dp) { return stage < 2 && dp == 1; }
    // Which of the store's buffers are symmetric (NCCL windows, where the DP communicator
    // provides them): the bf16 parameter images of ZeRO-1/2 gathering in bf16, and the full
    // gradients (and their staging) of zero 0 and of ZeRO-1 with those images (RankSim asks too,
    // for the communication it prices).
    struct SymmetricLayout {
        bool images16 = false, grads = false;
    };
    static SymmetricLayout symmetric_layout(int stage, bool gather_bf16, bool dp_group) {
        SymmetricLayout l;
        l.images16 = gather_bf16 && dp_group && (stage == 1 || stage == 2);
        l.grads = dp_group && (stage == 0 || (stage == 1 && l.images16));
        return l;
    }
    // layers: this rank's layers in forward order. dp: the DP communicators (null when dp = 1):
    // `dp_async` runs on the worker thread. tp_rank: for counting replicated parameters once.
    // last_stage_copy: this rank is the last pipeline stage of pp > 1 (its wte is the tied copy).
    ParamStore(std::vector<Layer*> layers, const ZeroOptions& o, Communicator* dp_async,
               int tp_rank, bool last_stage_copy);
    ~ParamStore();

    // Binds a layer's parameter pointers (ZeRO-3: gathers them, and prefetches `next`).
    void before_forward(Layer* layer, Layer* next);
    void after_forward(Layer* layer);
    // Binds parameters and gradient buffers for a backward pass (allocate_grads where the layer
    // has none yet).
    void before_backward(Layer* layer, Layer* next);
    // After a layer's backward on one micro-batch: `last_micro` tells whether it was the last of
    // the step (zero 0/1 reduce then); zero 2/3 reduce-scatter every micro-batch.
    void after_backward(Layer* layer, bool last_micro);

    void zero_grads();
    // Orders the rest of the step after every gradient reduction, all-reduces the tied
    // embedding copies over `embedding` (null when pp = 1), and accumulates this rank's share
    // of the squared gradient norm (each element of the model counted once over the whole
    // world) in the DeviceOps' sum_squares accumulator, without a host round trip.
    void finish_gradients(Communicator* embedding);
    // AdamW on this rank's slices, the gradients clipped by the global squared norm at *norm2
    // (device memory on GPUs); zero 1/2 then all-gather the updated parameters.
    void optimizer_step(const OptimizerConfig& oc, int64_t step, const float* norm2);
    // Optimizer offload on a GPU: the last step's updates onto the device, every unit's (the
    // next forward lands each as it first binds it; the estimator, which stops after the step,
    // calls this)
    void land_updates();

    // Checkpoints: visits every element this rank holds authoritatively (its DP slice, TP shard
    // counted once, tied copy excluded) — `fn(layer, param index, local flat index in the
    // parameter, value pointers {param, m, v})`.
    struct Held {
        Layer* layer;
        int param;
        int64_t begin, end;  // local element range within the parameter
        const float* param_values;
        const float* m;
        const float* v;
        bool params_on_host, moments_on_host;  // else on the store's device
    };
    std::vector<Held> held();
    // Loads parameters and moments for every element this rank stores (its slices) from full
    // tensors: get(name, which, shard, local range) fills a host buffer; it is then uploaded.
    void load(const std::function<void(const std::string& name, int which /*0 param 1 m 2 v*/,
                                       const ParamShard& shard, int64_t local_begin,
                                       int64_t local_end, float* dst)>& get);
    int64_t optimizer_steps() const { return t_; }
    void set_optimizer_steps(int64_t t) { t_ = t; }

  private:
    struct Unit;
    Unit* unit_of(Layer* l, int param);
    void settle(Unit& u);
    void allocate_grads(Unit& u);
    void settle_unwritten(Unit& u);
    void land_update(Unit& u);
    void download_grads(Unit& u);
    void refresh_images();
    void gather(Unit& u);
    void bind(Layer* layer);
    void flush_accumulates();
    void count_symmetric(MemCategory cat, int64_t bytes);  // bytes < 0: freed
    void set_values(Unit& u, const float* host, int64_t k0, int64_t k1);
    void optimizer_step_host(const OptimizerConfig& oc, const AdamWHyper& h, const float* norm2);
    void gather_updated(Unit& u);
    // the range of a unit this rank's optimizer updates: all of it (zero 0) or its slice
    int64_t update_begin(const Unit& u) const;
    int64_t update_end(const Unit& u) const;
    // Optimizer offload on a GPU (ZeRO-Offload): the fp32 masters, AdamW's moments and a copy of
    // the gradients in pinned host memory, AdamW on the host's cores, the updated values copied
    // back. With layers in bf16 and ZeRO 0-2 the device then keeps only bf16 images.
    bool image_only() const { return host_master_ && o_.gather_bf16 && o_.stage < 3; }
    // Layers in bf16 whose every parameter this rank's AdamW updates on the device (ZeRO 0, or
    // 1/2 without DP): the update writes the layers' bf16 copies as well
    // (Layer::copy_kept_by_optimizer).
    bool optimizer_writes_copies() const {
        return o_.gather_bf16 && !host_master_ && (o_.stage == 0 || (o_.stage < 3 && !dp_));
    }
    std::deque<std::shared_future<void>> in_flight_;      // ZeRO-2/3 reduce-scatters
    std::vector<std::unique_ptr<CommRequest>> reducing_;  // background reductions (GPU DP)
    std::vector<std::unique_ptr<Unit>> units_;
    std::vector<Layer*> layers_;
    ZeroOptions o_;
    Communicator* dp_;
    int dp_rank_ = 0, dp_size_ = 1, tp_rank_ = 0;
    bool last_stage_copy_;
    std::unique_ptr<CommWorker> worker_;
    std::unique_ptr<CommWorker> host_worker_;  // optimizer offload on a GPU: the host's AdamW
    // the symmetric buffers' sizes (0: none): zero 0/1's gradients and their staging, ZeRO-1/2's
    // bf16 images
    int64_t gsym_bytes_ = 0, stage_bytes_ = 0, gather16_bytes_ = 0;
    DeviceOps* ops_;
    Device dev_;
    bool host_master_ = false;  // optimizer offload on a GPU (or on the meta device for one)
    int64_t t_ = 0;
    uint64_t version_ = 1;  // parameter values' version (see Layer::weights_version)
};

}  // namespace tessera
