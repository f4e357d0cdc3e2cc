// The estimator's replay of one parallel rank: the parameter store, the rank loop, activation
// offload and the CPU layers (tp_layers.cpp). The GPU layers are in rank_sim_gpu.cpp.
#include "engine/plan/rank_sim.h"

#include <algorithm>

#include "engine/parallel/zero.h"

namespace tessera::plan_sim {

namespace {
const MemCategory kParams = MemCategory::params, kGrads = MemCategory::grads,
                  kOpt = MemCategory::optimizer, kAct = MemCategory::activations,
                  kWork = MemCategory::workspace, kComm = MemCategory::comm,
                  kHost = MemCategory::host;
}  // namespace

// ------------------------------------------------------------------------------------------
// Timeline

void Timeline::alloc(MemCategory c, int64_t bytes) {
    int i = (int)c;
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
// Layers

SimTensor RankSim::layer_forward(SimLayer& l, int micro, SimTensor x) {
    SimTensor out = gpu ? gpu_forward(l, micro, x) : cpu_forward(l, micro, x);
    ++computes;
    return out;
}

SimTensor RankSim::layer_backward(SimLayer& l, int micro, SimTensor dout) {
    SimTensor out = gpu ? gpu_backward(l, micro, dout) : cpu_backward(l, micro, dout);
    ++computes;
    return out;
}

void RankSim::free_saved(SimLayer& l, int micro) {
    auto it = l.saved.find(micro);
    for (auto& t : it->second) tl.free(t.cat, t.bytes);
    l.saved.erase(it);
}

// tp_layers.cpp (fp32): the CPU attention keeps its (B, NH, T, T) probabilities.
SimTensor RankSim::cpu_forward(SimLayer& l, int micro, SimTensor x) {
    auto& s = l.saved[micro];
    if (l.kind == LayerKind::embedding) {
        tl.alloc(kAct, f32(N * C));
        return {f32(N * C), kAct};
    }
    if (l.kind == LayerKind::head) {
        s = {x, {f32(N * C), kAct}, {f32(N), kAct}, {f32(N), kAct}, {f32(N * Vl), kAct}};
        for (size_t i = 1; i < s.size(); ++i) tl.alloc(kAct, s[i].bytes);
        tl.alloc(kWork, f32(3 * N));  // max / sum / target statistics
        tl.alloc(kWork, f32(N));      // per-token losses (returned)
        tl.free(kWork, f32(3 * N));
        return {f32(N), kWork};
    }
    // block: compute() allocates every intermediate, forward keeps a subset
    const int64_t att = B * NHl * T * T;
    // X LN1 M1 R1 QKV ATT ATTY RES1 LN2 M2 R2 FCH FCG
    std::vector<int64_t> all{x.bytes, f32(N * C), f32(N), f32(N), f32(3 * N * Cl), f32(att),
                             f32(N * Cl), f32(N * C), f32(N * C), f32(N), f32(N),
                             f32(4 * N * Cl), f32(4 * N * Cl)};
    for (size_t i = 1; i < all.size(); ++i) tl.alloc(kAct, all[i]);
    tl.alloc(kAct, f32(N * C));  // out
    s.clear();
    for (size_t i = 0; i < all.size(); ++i) {
        bool keep = i == 0 || rc == Recompute::none ||
                    (rc == Recompute::selective && i != 5 && i != 12);
        if (keep) s.push_back({all[i], kAct});
        else tl.free(kAct, all[i]);
    }
    return {f32(N * C), kAct};
}

SimTensor RankSim::cpu_backward(SimLayer& l, int micro, SimTensor dout) {
    if (l.kind == LayerKind::embedding) {
        free_saved(l, micro);
        tl.free(dout.cat, dout.bytes);  // consumed
        return {0, kAct};
    }
    if (l.kind == LayerKind::head) {
        tl.alloc(kWork, f32(N * C));  // dln
        tl.alloc(kAct, f32(N * C));   // dx
        free_saved(l, micro);
        tl.free(kWork, f32(N * C));
        return {f32(N * C), kAct};
    }
    auto& s = l.saved[micro];
    const int64_t att = B * NHl * T * T;
    if (rc == Recompute::full) {
        std::vector<int64_t> re{N * C, N, N, 3 * N * Cl, att, N * Cl, N * C, N * C, N, N,
                                4 * N * Cl, 4 * N * Cl};
        for (int64_t e : re) tl.alloc(kAct, f32(e)), s.push_back({f32(e), kAct});
        tl.alloc(kAct, f32(N * C));  // the recomputed output, dropped
        tl.free(kAct, f32(N * C));
    } else if (rc == Recompute::selective) {
        tl.alloc(kAct, f32(att)), s.push_back({f32(att), kAct});
        tl.alloc(kWork, f32(N * Cl));  // scratch attention output
        tl.alloc(kAct, f32(4 * N * Cl)), s.push_back({f32(4 * N * Cl), kAct});
        tl.free(kWork, f32(N * Cl));
    }
    tl.alloc(kWork, f32(4 * N * Cl));  // dfcg
    tl.alloc(kWork, f32(4 * N * Cl));  // dfch
    tl.free(kWork, f32(4 * N * Cl));
    tl.alloc(kWork, f32(N * C));       // dln
    tl.free(kWork, f32(4 * N * Cl));
    tl.alloc(kWork, f32(N * Cl));      // datty
    tl.alloc(kWork, f32(3 * N * Cl));  // dqkv
    tl.free(kWork, f32(N * Cl));
    tl.free(kWork, f32(3 * N * Cl));
    free_saved(l, micro);
    tl.free(kWork, f32(N * C));
    return dout;  // d(input) computed in place
}

// ------------------------------------------------------------------------------------------
// Activation offload (GptLayer::offload / fetch_begin / fetch_wait)

// Frees the sources of finished copies; first the oldest `upto`, which the caller waits for.
void RankSim::reap_copies(size_t upto) {
    size_t kept = 0;
    for (size_t i = 0; i < copies.size(); ++i) {
        if (i < upto || copies[i].issued_after < computes) tl.free(copies[i].keep.cat, copies[i].keep.bytes);
        else copies[kept++] = copies[i];
    }
    copies.resize(kept);
}

// Right after the layer's forward: its saved activations move to the host. On the CPU the copy
// is synchronous; on a GPU the device buffer waits for its copy while the next layer computes,
// and the previous layer's copies are waited for (one layer pending).
void RankSim::offload(SimLayer& l, int micro) {
    auto it = l.saved.find(micro);
    if (it == l.saved.end()) return;
    const size_t older = copies.size();
    for (auto& t : it->second) {
        if (t.cat != kAct) continue;
        tl.alloc(kHost, t.bytes);
        offloaded_bytes += t.bytes;
        if (gpu) copies.push_back({t, computes});
        else tl.free(t.cat, t.bytes);
        t.cat = kHost;
    }
    if (gpu) reap_copies(older);
}

// One layer ahead of its backward: back to the device (the pinned source is kept until copied).
void RankSim::fetch(SimLayer& l, int micro) {
    if (gpu) reap_copies(0);
    auto it = l.saved.find(micro);
    if (it == l.saved.end()) return;
    for (auto& t : it->second) {
        if (t.cat != kHost) continue;
        tl.alloc(kAct, t.bytes);
        if (gpu) copies.push_back({t, computes});
        else tl.free(t.cat, t.bytes);
        t.cat = kAct;
    }
}

// ------------------------------------------------------------------------------------------
// The rank loop

void RankSim::forward(int micro, int c) {
    auto& ch = chunks[c];
    const int g = global_chunk[c], G = pp * v;
    SimTensor x{0, kAct};
    if (g > 0) tl.alloc(kAct, act(N * C)), x = {act(N * C), kAct};  // recv buffer
    for (size_t i = 0; i < ch.size(); ++i) {
        before_forward(&ch[i], i + 1 < ch.size() ? &ch[i + 1] : nullptr);
        x = layer_forward(ch[i], micro, x);
        after_forward(&ch[i]);
        if (offload_act) offload(ch[i], micro);  // right after the layer's forward
    }
    if (g == G - 1) tl.free(x.cat, x.bytes);  // the losses, summed
    else sends.push_back(x);
}

void RankSim::backward(int micro, int c) {
    auto& ch = chunks[c];
    const int g = global_chunk[c], G = pp * v;
    SimTensor dout{0, kAct};
    if (g < G - 1) tl.alloc(kAct, act(N * C)), dout = {act(N * C), kAct};
    if (offload_act && !ch.empty()) fetch(ch.back(), micro);
    for (size_t i = ch.size(); i-- > 0;) {
        if (offload_act && i > 0) fetch(ch[i - 1], micro);  // one layer ahead
        before_backward(&ch[i], i > 0 ? &ch[i - 1] : nullptr);
        dout = layer_backward(ch[i], micro, dout);
        after_backward(&ch[i]);
    }
    if (g > 0) sends.push_back(dout);
}

int RankSim::run_step(const StageSchedule& sched) {
    int total_in_flight = 0, max_in_flight = 0;
    for (const PipeAction& a : sched) {
        if (a.kind == PipeAction::forward) {
            forward(a.micro, a.chunk);
            max_in_flight = std::max(max_in_flight, ++total_in_flight);
        } else {
            backward(a.micro, a.chunk);
            --total_in_flight;
        }
    }
    for (const SimTensor& t : sends) tl.free(t.cat, t.bytes);
    sends.clear();
    drain();  // finish_gradients
    optimizer_step();
    return max_in_flight;
}

}  // namespace tessera::plan_sim
