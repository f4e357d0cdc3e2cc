// The estimator's run of one parallel rank: the runtime's layers, ParamStore and stage loop on the
// meta device, wired to a Timeline (see rank_sim.h).
#include "engine/plan/rank_sim.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/optim/optimizer.h"
#include "engine/parallel/comm_meta.h"
#include "engine/parallel/device_ops.h"

namespace tessera::plan_sim {

// ------------------------------------------------------------------------------------------
// Timeline

void Timeline::alloc(MemCategory c, int64_t bytes) {
    if (c == MemCategory::host) host_allocated += bytes;
    mem.add(c, bytes);
}

void Timeline::free(MemCategory c, int64_t bytes) {
    mem.sub(c, bytes);
}

void Timeline::use_pool() {
    DevicePool::Backing b;
    b.ctx = this;
    b.reserve = [](void* ctx, size_t bytes) {
        auto* t = static_cast<Timeline*>(ctx);
        const uintptr_t at = t->next_segment_;
        t->next_segment_ += bytes;
        return at;
    };
    b.release = [](void*, uintptr_t, size_t) {};
    pool_ = std::make_unique<DevicePool>(b);
}

// As the runtime counts it (engine/core/tensor.cpp): the pool's slack changes first when a cached
// block is reused, so the total never overshoots. Host-category tensors (offloaded state) stand
// for host memory: outside the device's pool.
void* Timeline::tensor_alloc(MemCategory c, int64_t bytes) {
    if (!pool_ || c == MemCategory::host) return MetaMemory::tensor_alloc(c, bytes);
    int64_t cached = 0;
    const uintptr_t at = pool_->alloc((size_t)bytes, &cached);
    if (cached) alloc(MemCategory::cached, cached);
    alloc(c, bytes);
    if (recording_) {
        live_event_[at] = (int64_t)events_.size();
        events_.push_back({true, c, bytes, -1});
    }
    return reinterpret_cast<void*>(at);
}

void Timeline::tensor_free(MemCategory c, int64_t bytes, void* addr) {
    free(c, bytes);
    if (!pool_ || !addr) return;  // no address: placed outside the pool
    const auto at = reinterpret_cast<uintptr_t>(addr);
    int64_t cached = 0;
    pool_->free(at, &cached);
    if (cached) alloc(MemCategory::cached, cached);
    if (recording_) {
        auto it = live_event_.find(at);
        events_.push_back({false, c, bytes, it == live_event_.end() ? -1 : it->second});
        if (it != live_event_.end()) live_event_.erase(it);
    }
}

void Timeline::record(bool on) {
    if (on) events_.clear(), live_event_.clear();
    recording_ = on;
}

// The step again: what the recorded step allocated and freed again (its transient tensors), in
// its order; what it kept (the optimizer's state, caches) stays as it is, as in the run's later
// steps.
void Timeline::repeat_step() {
    if (!pool_ || events_.empty()) return;
    std::vector<bool> transient(events_.size(), false);
    for (const Event& e : events_)
        if (!e.alloc && e.of >= 0) transient[(size_t)e.of] = true;
    for (int round = 0; round < 8; ++round) {
        const int64_t reserved0 = pool_->reserved_bytes();
        std::vector<void*> placed(events_.size(), nullptr);  // alloc event -> its address
        for (size_t i = 0; i < events_.size(); ++i) {
            const Event& e = events_[i];
            if (e.alloc && transient[i]) {
                placed[i] = tensor_alloc(e.cat, e.bytes);
            } else if (!e.alloc && e.of >= 0) {
                void*& at = placed[(size_t)e.of];
                TS_CHECK(at, "Timeline::repeat_step: a free before its alloc");
                tensor_free(e.cat, e.bytes, at);
                at = nullptr;
            }
        }
        if (pool_->reserved_bytes() == reserved0) return;
    }
}

// ------------------------------------------------------------------------------------------
// The rank on the meta device

RankSim::RankSim() {
    outer_ = meta_memory_install(&tl);
}

RankSim::~RankSim() {
    // everything reports to tl until here
    sends_.clear();
    runner_.reset();
    store_.reset();
    chunks.clear();
    layers = StageLayers{};
    meta_memory_install(outer_);
}

void RankSim::build(const ModelShape& model, const std::vector<int>& blocks_per_chunk, int tp,
                    int tp_size, Recompute rc) {
    tl.async_copies = device.async_copies;
    if (gpu()) tl.use_pool();
    model_ = model;
    batch_.batch_size = (int)B;
    batch_.seq_len = (int)T;
    batch_.inputs.assign(N, 0);
    batch_.targets.assign(N, 0);
    ShardSpec spec{model, TpGroup{nullptr, tp, tp_size}, rc, &layer_ops_meta(device), 1.0f};
    layers = stage_layers_build(spec, blocks_per_chunk, pp, stage);
    for (size_t c = 0; c < layers.chunks.size(); ++c) {
        auto& ch = chunks.emplace_back();
        for (int li = layers.lo[c]; li < layers.hi[c]; ++li) {
            SimLayer l;
            l.kind = li == 0                     ? LayerKind::embedding
                     : li + 1 < model.n_layers() ? LayerKind::block
                                                 : LayerKind::head;
            l.layer = layers.chunks[c][(size_t)(li - layers.lo[c])].get();
            const auto& es = l.layer->table().entries();
            for (const auto& group : ParamStore::unit_groups(*l.layer)) {
                SimUnit u;
                for (int pi : group.params) u.len += es[pi].numel;
                u.is_wte = group.is_wte;
                u.params = (int)group.params.size();
                for (const auto& part : ParamStore::grad_parts(*l.layer, group, gpu())) {
                    if (ParamStore::part_written_whole(*l.layer, group.params, part)) continue;
                    int64_t n = 0;
                    for (int k : part) n += es[group.params[k]].numel;
                    u.zeroed_parts.push_back(n);
                }
                l.units.push_back(u);
            }
            ch.push_back(std::move(l));
        }
    }
}

void RankSim::store_init() {
    for (auto& ch : chunks)
        for (SimLayer& l : ch)
            for (SimUnit& u : l.units) {
                u.S = (u.len + dp - 1) / dp;
                u.pad = u.S * dp;
            }
    // DP rank 0 of dp: every DP rank allocates the same
    if (dp > 1) dp_comm_ = comm_meta_create(gpu() ? MetaBackend::nccl : MetaBackend::gloo, 0, dp);
    ZeroOptions zo{.stage = zero,
                   .ops = &device_ops_meta(),
                   .offload_optimizer = offload_opt,
                   .seed = 0,
                   .gather_bf16 = gpu() && device.act == DType::bf16,
                   .gpu = gpu(),
                   .micro_batches = m};
    store_ = std::make_unique<ParamStore>(layers.all(), zo, dp_comm_.get(), 0,
                                          pp > 1 && stage == pp - 1);
    StageRunner::Options so;
    so.pp = pp, so.v = v, so.n_micro = m, so.act = device.act, so.device = Device::meta;
    so.offload_activations = offload_act;
    so.recv_ahead = recv_ahead_on(gpu());
    StageEdges& edges = *this;
    runner_ = std::make_unique<StageRunner>(model_, layers.views(), *store_, edges, so);
}

int RankSim::run_step(const StageSchedule& sched) {
    TS_CHECK(runner_, "RankSim::run_step before store_init");
    const int64_t host0 = tl.host_allocated;
    tl.record(true);
    store_->zero_grads();
    runner_->step_begin();
    OpTrace* outer_trace = op_trace_install(&trace);
    const int max_in_flight = runner_->run(sched, [this](int) -> const Batch& { return batch_; });
    op_trace_install(outer_trace);
    offloaded_bytes = tl.host_allocated - host0;
    sends_.clear();                     // the sends are done
    store_->finish_gradients(nullptr);  // the tied copies' all-reduce moves nothing here
    DeviceOps& ops = device_ops_meta();
    store_->optimizer_step(OptimizerConfig{}, 0, ops.step_scalars(0.0f));
    // the next step's start, where the run releases the gradients its backward allocated (ZeRO 0
    // without DP: ParamStore::split_grads): transient in the replay, as in the run
    store_->zero_grads();
    // optimizer offload: a run lands each unit's update as its next forward first binds it,
    // after that release; the one simulated step lands them all here (a transient staging buffer
    // each)
    store_->land_updates();
    tl.record(false);
    tl.repeat_step();  // the pool's layout in the run's later steps
    return max_in_flight;
}

}  // namespace tessera::plan_sim
