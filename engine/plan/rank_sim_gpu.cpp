// The estimator's replay of the GPU layers (engine/parallel/tp_layers_cuda.cpp), without CUDA:
// activations in the run's precision (act_bytes: bf16 2, fp32 4), LayerNorm statistics and the
// attention log-sum-exp (B, NH, T) in fp32 (flash attention keeps no T×T probabilities), the
// classifier writing its gradient into the logits (over the vocabulary shard padded to a
// multiple of 128) during the forward, a bf16 copy of each layer's weights (params category, made
// on first use and kept), the head's padded weight copy, and token ids on the device.
#include "engine/plan/rank_sim.h"

#include <algorithm>

namespace tessera::plan_sim {

namespace {
const MemCategory kParams = MemCategory::params, kAct = MemCategory::activations,
                  kWork = MemCategory::workspace;
constexpr int64_t kTokenBytes = 4;  // int32 ids
}  // namespace

// CudaLayer::w() on first use: the bf16 copy of the layer's parameters (none for fp32: the
// masters are used directly; none either where the store's bf16 images feed the layers). Its
// size is the layer's parameter count, wte included.
void RankSim::cache_weights(SimLayer& l) {
    if (l.weight_cache || act_bytes == 4 || gathers_bf16()) return;
    int64_t n = 0;
    for (const SimUnit& u : l.units) n += u.len;
    tl.alloc(kParams, 2 * std::max<int64_t>(n, 1));
    l.weight_cache = true;
}

// CudaLayer::tokens(): one device buffer per micro-batch, kept across steps.
static void token_slot(Timeline& tl, SimLayer& l, int micro, int64_t N) {
    if (l.token_slots.insert(micro).second) tl.alloc(kWork, kTokenBytes * N);
}

SimTensor RankSim::gpu_forward(SimLayer& l, int micro, SimTensor x) {
    auto& s = l.saved[micro];
    const int64_t A = act(N * C);  // one (B, T, C) activation
    if (l.kind == LayerKind::embedding) {
        tl.alloc(kAct, A);
        cache_weights(l);
        token_slot(tl, l, micro, N);
        return {A, kAct};
    }
    if (l.kind == LayerKind::head) {
        // x, ln_f output, mean, rstd; then the logits / their gradient (N, Vp)
        const int64_t Vp = (Vl + 127) / 128 * 128;
        s = {x, {A, kAct}, {f32(N), kAct}, {f32(N), kAct}};
        for (size_t i = 1; i < s.size(); ++i) tl.alloc(kAct, s[i].bytes);
        cache_weights(l);
        s.push_back({act(N * Vp), kAct});
        tl.alloc(kAct, act(N * Vp));
        if (!l.head_pad) tl.alloc(kParams, act(Vp * C)), l.head_pad = true;  // padded wte copy
        tl.alloc(kWork, f32(3 * N));  // max / sum / target statistics
        token_slot(tl, l, micro, N);  // targets
        if (Cl != C) tl.alloc(kWork, f32(N)), tl.free(kWork, f32(N));  // TP: the global row max
        tl.alloc(kWork, f32(N));      // per-token losses (returned)
        tl.free(kWork, f32(3 * N));
        return {f32(N), kWork};
    }
    // block: compute() allocates every intermediate, forward keeps a subset
    // X LN1 M1 R1 QKV ATTY LSE RES1 LN2 M2 R2 FCH FCG
    std::vector<int64_t> all{x.bytes, A, f32(N), f32(N), act(3 * N * Cl), act(N * Cl),
                             f32(B * NHl * T), A, A, f32(N), f32(N), act(4 * N * Cl),
                             act(4 * N * Cl)};
    cache_weights(l);
    for (size_t i = 1; i < all.size(); ++i) tl.alloc(kAct, all[i]);
    tl.alloc(kAct, A);  // out
    s.clear();
    for (size_t i = 0; i < all.size(); ++i) {
        bool keep = i == 0 || rc == Recompute::none || (rc == Recompute::selective && i != 12);
        if (keep) s.push_back({all[i], kAct});
        else tl.free(kAct, all[i]);
    }
    return {A, kAct};
}

SimTensor RankSim::gpu_backward(SimLayer& l, int micro, SimTensor dout) {
    const int64_t A = act(N * C);
    if (l.kind == LayerKind::embedding) {
        free_saved(l, micro);
        tl.free(dout.cat, dout.bytes);  // consumed
        return {0, kAct};
    }
    if (l.kind == LayerKind::head) {
        const int64_t Vp = (Vl + 127) / 128 * 128;
        tl.alloc(kWork, A);              // dln
        tl.alloc(kWork, f32(Vp * C));    // dw over the padded vocabulary, fp32
        tl.free(kWork, f32(Vp * C));
        tl.alloc(kAct, A);               // dx
        free_saved(l, micro);
        tl.free(kWork, A);
        return {A, kAct};
    }
    auto& s = l.saved[micro];
    if (rc == Recompute::full) {  // compute() from the saved input; its output dropped
        std::vector<int64_t> re{A, f32(N), f32(N), act(3 * N * Cl), act(N * Cl), f32(B * NHl * T),
                                A, A, f32(N), f32(N), act(4 * N * Cl), act(4 * N * Cl)};
        for (int64_t e : re) tl.alloc(kAct, e), s.push_back({e, kAct});
        tl.alloc(kAct, A);
        tl.free(kAct, A);
    } else if (rc == Recompute::selective) {  // the GELU output from its input
        tl.alloc(kAct, act(4 * N * Cl)), s.push_back({act(4 * N * Cl), kAct});
    }
    tl.alloc(kWork, act(4 * N * Cl));  // dfc
    tl.alloc(kWork, A);                // dln
    tl.free(kWork, act(4 * N * Cl));
    tl.alloc(kWork, act(N * Cl));      // datty
    tl.alloc(kWork, act(3 * N * Cl));  // dqkv
    tl.free(kWork, act(N * Cl));
    tl.free(kWork, act(3 * N * Cl));
    free_saved(l, micro);
    tl.free(kWork, A);
    return dout;  // d(input) computed in place
}

}  // namespace tessera::plan_sim
