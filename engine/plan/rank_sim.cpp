// The estimator's replay of one parallel rank: the parameter store and the rank loop, driving the
// runtime's layers on the meta device.
#include "engine/plan/rank_sim.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/parallel/zero.h"

namespace tessera::plan_sim {

namespace {
const MemCategory kParams = MemCategory::params, kGrads = MemCategory::grads,
                  kOpt = MemCategory::optimizer, kComm = MemCategory::comm,
                  kHost = MemCategory::host;
}  // namespace

// ------------------------------------------------------------------------------------------
// Timeline

void Timeline::alloc(MemCategory c, int64_t bytes) {
    int i = (int)c;
    if (c == MemCategory::host) host_allocated += bytes;
    cur[i] += bytes;
    peak[i] = std::max(peak[i], cur[i]);
    total += bytes;
    total_peak = std::max(total_peak, total);
    device_peak = std::max(device_peak, total - cur[(int)MemCategory::host]);
}

void Timeline::free(MemCategory c, int64_t bytes) {
    cur[(int)c] -= bytes;
    total -= bytes;
}

// ------------------------------------------------------------------------------------------
// ParamStore (zero.cpp). ZeRO-2/3 keep at most ParamStore::kMaxReductions reduce-scatters in
// flight: before a new full gradient is allocated the older ones are waited for.

size_t RankSim::post(std::function<void()> f) {
    tasks.push_back(std::move(f));
    return tasks.size() - 1;
}

void RankSim::run_until(size_t k) {
    while (tasks_done <= k && tasks_done < tasks.size()) tasks[tasks_done++]();
}

void RankSim::drain() {
    if (!tasks.empty()) run_until(tasks.size() - 1);
    in_flight.clear();
}

// Parameters, gradients and AdamW moments are fp32 on every device.
void RankSim::store_init() {
    const MemCategory oc = offload_opt ? kHost : kOpt;
    for (auto& ch : chunks)
        for (auto& l : ch)
            for (auto& u : l.units) {
                u.S = (u.len + dp - 1) / dp;
                u.pad = u.S * dp;
                int64_t opt_n = zero >= 1 ? u.S : u.len;
                tl.alloc(oc, f32(opt_n));
                tl.alloc(oc, f32(opt_n));
                if (zero >= 3) tl.alloc(kParams, f32(u.S));
                else tl.alloc(kParams, f32(u.pad)), u.full = true;
                if (zero >= 2) tl.alloc(kGrads, f32(u.S));
                else if (!symmetric_grads()) tl.alloc(kGrads, f32(u.pad));
                u.grad_full = zero < 2;
            }
    // ParamStore's symmetric buffers, each unit's part page-aligned
    int64_t grads = 0, images = 0;
    for (auto& ch : chunks)
        for (auto& l : ch)
            for (auto& u : l.units) {
                grads += ParamStore::symmetric_part_bytes(f32(u.pad));
                images += ParamStore::symmetric_part_bytes(2 * u.pad);
            }
    if (symmetric_grads()) {
        tl.alloc(kGrads, grads);  // the full gradients
        tl.alloc(kComm, grads);   // and the staging the other ranks' slices arrive in
    }
    if (gathers_bf16()) tl.alloc(kComm, images);  // every unit's bf16 image
}

void RankSim::gather(SimUnit& u) {
    if (u.gather_posted || u.full) return;
    tl.alloc(kParams, f32(u.pad));  // the full buffer exists from the post on
    u.full = true;
    u.gather_posted = true;
    u.gather_task = post([] {});
}

std::vector<SimLayer*> RankSim::with_tied(SimLayer* l) {
    std::vector<SimLayer*> need{l};
    if (l->tied) need.push_back(l->tied);
    return need;
}

void RankSim::before_forward(SimLayer* l, SimLayer* next) {
    if (zero < 3) return;
    auto need = with_tied(l);
    for (SimLayer* x : need)
        for (auto& u : x->units) gather(u);
    if (next)
        for (auto& u : next->units) gather(u);
    for (SimLayer* x : need)
        for (auto& u : x->units)
            if (u.gather_posted) run_until(u.gather_task), u.gather_posted = false;
}

void RankSim::after_forward(SimLayer* l) {
    if (zero < 3) return;
    for (SimLayer* x : with_tied(l))
        for (auto& u : x->units)
            if (!u.gather_posted && u.full) tl.free(kParams, f32(u.pad)), u.full = false;
}

void RankSim::before_backward(SimLayer* l, SimLayer* next) {
    before_forward(l, next);
    if (zero >= 2)
        for (SimLayer* x : with_tied(l))
            for (auto& u : x->units)
                if (!u.grad_full) {
                    while (in_flight.size() >= ParamStore::kMaxReductions) {
                        run_until(in_flight.front());
                        in_flight.pop_front();
                    }
                    tl.alloc(kGrads, f32(u.pad)), u.grad_full = true;
                }
}

void RankSim::after_backward(SimLayer* l) {
    if (zero >= 2)
        for (auto& u : l->units) {
            // the full gradient moves into a reduce-scatter task (a comm slice, then both freed)
            const int64_t S = f32(u.S), pad = f32(u.pad);
            if (dp > 1) {
                tl.alloc(kComm, S);  // the slice the reduce-scatter writes
                in_flight.push_back(post([this, S, pad] {
                    tl.free(kGrads, pad);
                    tl.free(kComm, S);
                }));
            } else {
                tl.free(kGrads, pad);  // accumulated straight into the slice
            }
            u.grad_full = false;
        }
    after_forward(l);
}

void RankSim::optimizer_step() {
    if ((zero == 1 || zero == 2) && dp > 1 && !gathers_bf16())
        for (auto& ch : chunks)
            for (auto& l : ch)
                for (auto& u : l.units) {
                    const int64_t S = f32(u.S);
                    tl.alloc(kComm, S);  // the updated slice, all-gathered by the worker
                    post([this, S] { tl.free(kComm, S); });
                }
    drain();
}

// ------------------------------------------------------------------------------------------
// The layers on the meta device

RankSim::RankSim() { outer_ = meta_memory_install(&tl); }

RankSim::~RankSim() {
    sends_.clear();
    chunks.clear();  // the layers' saved tensors and caches report to tl until here
    meta_memory_install(outer_);
}

void RankSim::add_chunk(int g, const ModelShape& model, int lo, int hi, int tp, int tp_size, Recompute rc) {
    tl.async_copies = device.async_copies;
    ShardSpec spec{model, TpGroup{nullptr, tp, tp_size}, rc, &layer_ops_meta(device), 1.0f};
    batch_.batch_size = (int)B;
    batch_.seq_len = (int)T;
    batch_.inputs.assign(N, 0);
    batch_.targets.assign(N, 0);
    if (no_storage_.empty()) no_storage_.resize(1);
    global_chunk.push_back(g);
    auto& ch = chunks.emplace_back();
    ch.reserve(hi - lo);  // the layers stay put: the head may point at the embedding
    for (int li = lo; li < hi; ++li) {
        SimLayer l;
        l.kind = li == 0 ? LayerKind::embedding : li + 1 < model.n_layers() ? LayerKind::block : LayerKind::head;
        // the GPT head's wte is the embedding's on a pp = 1 rank
        Layer* tied = l.kind == LayerKind::head && pp == 1 && embedding_ ? embedding_->layer.get() : nullptr;
        l.layer = layer_create(spec, li, tied);
        if (l.layer->tied_embedding()) l.tied = embedding_;
        // parameters "live" at a placeholder the meta ops never read; the store's bf16 images
        // feed the layers where it keeps them (no weight copies then)
        const size_t np = l.layer->table().entries().size();
        l.layer->param_ptr.assign(np, no_storage_.data());
        l.layer->grad_ptr.assign(np, no_storage_.data());
        l.layer->param16_ptr.assign(np, gathers_bf16() ? no_storage_.data() : nullptr);
        const auto& es = l.layer->table().entries();
        for (const auto& group : ParamStore::unit_groups(*l.layer)) {
            SimUnit u;
            for (int pi : group.params) u.len += es[pi].numel;
            u.is_wte = group.is_wte;
            l.units.push_back(u);
        }
        ch.push_back(std::move(l));
        if (ch.back().kind == LayerKind::embedding) embedding_ = &ch.back();
    }
}

// ------------------------------------------------------------------------------------------
// The rank loop

void RankSim::forward(int micro, int c) {
    auto& ch = chunks[c];
    const int g = global_chunk[c], G = pp * v;
    Tensor x;
    if (g > 0) x = Tensor::empty(hidden, MemCategory::activations, device.act, Device::meta);  // recv
    for (size_t i = 0; i < ch.size(); ++i) {
        before_forward(&ch[i], i + 1 < ch.size() ? &ch[i + 1] : nullptr);
        x = ch[i].layer->forward(micro, std::move(x), batch_);
        ++tl.computes;
        after_forward(&ch[i]);
        if (offload_act) ch[i].layer->offload(micro);  // right after the layer's forward
    }
    if (g < G - 1) sends_.push_back(std::move(x));  // the last chunk's losses are summed, freed
}

void RankSim::backward(int micro, int c) {
    auto& ch = chunks[c];
    const int g = global_chunk[c], G = pp * v;
    Tensor dout;
    if (g < G - 1) dout = Tensor::empty(hidden, MemCategory::activations, device.act, Device::meta);
    if (offload_act && !ch.empty()) ch.back().layer->fetch_begin(micro);
    for (size_t i = ch.size(); i-- > 0;) {
        if (offload_act) {
            if (i > 0) ch[i - 1].layer->fetch_begin(micro);  // one layer ahead
            ch[i].layer->fetch_wait(micro);
        }
        before_backward(&ch[i], i > 0 ? &ch[i - 1] : nullptr);
        dout = ch[i].layer->backward(micro, std::move(dout), batch_);
        ++tl.computes;
        after_backward(&ch[i]);
    }
    if (g > 0) sends_.push_back(std::move(dout));
}

int RankSim::run_step(const StageSchedule& sched) {
    int total_in_flight = 0, max_in_flight = 0;
    const int64_t host0 = tl.host_allocated;
    OpTrace* outer_trace = op_trace_install(&trace);
    for (const PipeAction& a : sched) {
        if (a.kind == PipeAction::forward) {
            forward(a.micro, a.chunk);
            max_in_flight = std::max(max_in_flight, ++total_in_flight);
        } else {
            backward(a.micro, a.chunk);
            --total_in_flight;
        }
    }
    op_trace_install(outer_trace);
    offloaded_bytes = tl.host_allocated - host0;
    sends_.clear();
    drain();  // finish_gradients
    optimizer_step();
    return max_in_flight;
}

}  // namespace tessera::plan_sim
