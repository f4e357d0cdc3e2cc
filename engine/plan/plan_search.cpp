// Plan search (see plan_search.h). Micro-batches: the base's and powers of two up to 64, so the
// step model's small-batch GEMM cost (not the bubble alone) picks the micro-batch. Pruning: per
// layout (dp, tp, pp, schedule) and micro-batch, the memory savers are tried from cheapest to
// dearest — recompute none < selective < full, and within a recompute level no offload before
// offload — and the first level where anything fits ends the ladder (more recompute or offload only
// adds time). Every ZeRO stage is tried at each level (ZeRO trades memory for DP traffic, which can
// go either way). One best plan per layout.
#include "engine/plan/plan_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "engine/core/error.h"
#include "engine/core/parallel_for.h"

namespace tessera {

namespace {

std::string gib_str(double bytes) {
    char buf[32];
    double g = bytes / double(1ll << 30);
    std::snprintf(buf, sizeof buf, g >= 10 ? "%.0f GiB" : "%.1f GiB", g);
    return buf;
}

std::string pct_str(double f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f%%", 100 * f);
    return buf;
}

// Extra cost of a configuration's features, for ties in tokens/s (simpler plans first).
int plan_complexity(const ParallelConfig& p) {
    int rc = p.recompute[0] == "full" ? 2 : p.recompute[0] == "selective" ? 1 : 0;
    return p.zero + 4 * rc + 8 * p.offload_activations + 8 * p.offload_optimizer;
}

// The micro-batches tried per layout, smallest first: the base config's, its halvings, and the
// powers of two above it up to kMaxSearchMicroBatch (a base of micro-batch 1 would otherwise
// never see the larger GEMMs that run faster per token), each dividing the per-replica batch.
constexpr int kMaxSearchMicroBatch = 64;
std::vector<int> plan_micro_batches(int base_mb, int64_t per_replica) {
    std::vector<int> v;
    for (int mb = base_mb; mb >= 1; mb /= 2) v.push_back(mb);
    for (int64_t mb = 2; mb <= std::min<int64_t>(per_replica, kMaxSearchMicroBatch); mb *= 2)
        v.push_back((int)mb);
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    v.erase(std::remove_if(v.begin(), v.end(),
                           [&](int mb) { return mb > per_replica || per_replica % mb; }),
            v.end());
    return v;
}

struct Candidate {
    RunConfig cfg;
    PlanEstimate est;
    std::string blocked;        // why the plain variant (no recompute, no offload) did not fit
    std::string zero0_blocked;  // why zero 0 (same recompute/offload) did not fit
};

bool better(const Candidate& a, const Candidate& b) {
    double ta = a.est.tokens_per_s, tb = b.est.tokens_per_s;
    if (std::abs(ta - tb) > 1e-3 * std::max(ta, tb)) return ta > tb;
    int ca = plan_complexity(a.cfg.parallel), cb = plan_complexity(b.cfg.parallel);
    if (ca != cb) return ca < cb;
    if (a.cfg.train.micro_batch != b.cfg.train.micro_batch)  // fewer, larger micro-batches
        return a.cfg.train.micro_batch > b.cfg.train.micro_batch;
    return plan_fullest_bytes(a.est) < plan_fullest_bytes(b.est);
}

// The human reason for a suggestion, from its numbers.
std::string plan_reason(const Candidate& c) {
    const ParallelConfig& p = c.cfg.parallel;
    const PlanEstimate& e = c.est;
    int64_t headroom = plan_rank_capacity(e) - plan_fullest_bytes(e);
    std::vector<std::string> parts;
    const std::string& rc = p.recompute[0];
    bool plain = rc == "none" && !p.offload_activations && !p.offload_optimizer;
    if (p.tp == 1 && p.pp == 1) {
        if (plain && p.zero == 0)
            parts.push_back(str_cat(p.dp > 1 ? "data parallel only" : "one GPU",
                                    ": the model fits on one GPU with ", gib_str(double(headroom)),
                                    " headroom"));
        else if (rc != "none")
            parts.push_back(str_cat("fits without TP or PP once recompute is ", rc));
        else
            parts.push_back("data parallel only");
    } else if (rc != "none") {
        parts.push_back(str_cat("fits once recompute is ", rc));
    }
    if (!plain && !c.blocked.empty()) parts.push_back(str_cat("without it ", c.blocked));
    if (p.zero > 0 && p.dp > 1) {
        const RankEstimate& r0 = e.ranks[0];
        int64_t opt = r0.peak_bytes[(int)MemCategory::optimizer];
        if (p.offload_optimizer) opt = std::max(opt, r0.peak_bytes[(int)MemCategory::host]);
        std::string also = p.zero == 3   ? " (and the parameters and gradients)"
                           : p.zero == 2 ? " (and the gradients)"
                                         : "";
        parts.push_back(str_cat("ZeRO-", p.zero, " divides the ", gib_str(double(opt) * p.dp),
                                " of optimizer state", also, " by ", p.dp));
        if (!c.zero0_blocked.empty()) parts.back() += str_cat(" (ZeRO-0: ", c.zero0_blocked, ")");
    }
    if (p.tp > 1)
        parts.push_back(str_cat("TP ", p.tp, " splits every block over ", p.tp, " GPUs of a node"));
    if (p.pp > 1) {
        if (p.schedule == "interleaved")
            parts.push_back(str_cat(p.pp, " stages, interleaved v", p.virtual_stages,
                                    " cuts the bubble to ", pct_str(e.bubble_fraction)));
        else
            parts.push_back(
                str_cat(p.pp, " pipeline stages, ", pct_str(e.bubble_fraction), " bubble"));
    }
    if (p.offload_optimizer || p.offload_activations) {
        int64_t host = 0;
        for (const auto& r : e.ranks) host = std::max(host, r.peak_bytes[(int)MemCategory::host]);
        parts.push_back(str_cat("offloading ",
                                p.offload_optimizer && p.offload_activations
                                    ? "optimizer and activations"
                                : p.offload_optimizer ? "the optimizer"
                                                      : "activations",
                                " keeps ", gib_str(double(host)), " per GPU on the host"));
    }
    if (!(p.tp == 1 && p.pp == 1 && plain && p.zero == 0))
        parts.push_back(str_cat(gib_str(double(headroom)), " headroom"));
    std::string s;
    for (const auto& x : parts) s += (s.empty() ? "" : "; ") + x;
    return s;
}

}  // namespace

std::string plan_summary(const RunConfig& cfg) {
    const ParallelConfig& p = cfg.parallel;
    std::string rc = p.recompute.empty() ? "none" : p.recompute[0];
    for (const auto& r : p.recompute)
        if (r != rc) rc = "per stage";
    std::string s = str_cat("dp", p.dp, " x tp", p.tp, " x pp", p.pp, " | ", p.schedule);
    if (p.schedule == "interleaved") s += str_cat(" v", p.virtual_stages);
    s += str_cat(" | zero ", p.zero, " | recompute ", rc);
    if (p.offload_optimizer) s += " | offload opt";
    if (p.offload_activations) s += " | offload act";
    s += str_cat(" | mb ", cfg.train.micro_batch, " x ", cfg.train.grad_accum);
    return s;
}

std::vector<PlanSuggestion> plan_suggest(const RunConfig& base, const DeviceSpec& dev, int gpus,
                                         int top, PlanSearchStats* stats,
                                         PlanSearchControl* control) {
    if (gpus < 1) throw InputError(str_cat("plan search: expected at least 1 GPU, found ", gpus));
    const bool mlp = base.model.preset == "mlp";  // data-parallel and ZeRO plans only
    const ModelConfig& m = base.model;
    const int64_t global_batch =
        int64_t(base.train.micro_batch) * base.train.grad_accum * std::max(1, base.parallel.dp);
    struct Layout {
        int dp, tp, pp;
        std::string sched;
        int v;
    };
    std::vector<Layout> layouts;
    for (int tp : {1, 2, 4, 8}) {
        if (gpus % tp || (mlp && tp > 1) || (!mlp && (m.n_head % tp || m.d_model % tp))) continue;
        for (int pp = 1; pp <= gpus / tp; ++pp) {
            if ((gpus / tp) % pp || (mlp ? pp > 1 : pp > m.n_layer)) continue;
            int dp = gpus / (tp * pp);
            if (global_batch % dp) continue;
            layouts.push_back({dp, tp, pp, "1f1b", 1});
            if (pp > 1 && m.n_layer % (2 * pp) == 0)
                layouts.push_back({dp, tp, pp, "interleaved", 2});
        }
    }
    // the layouts are searched side by side, each into its own slot (same answer at any thread
    // count): the best plan of each, and its counts
    std::vector<std::optional<Candidate>> best_of(layouts.size());
    std::vector<PlanSearchStats> stats_of(layouts.size());
    if (control) control->total = (int)layouts.size(), control->done = 0;
    parallel_for(layouts.size(), [&](size_t li) {
        if (control && control->stop) return;
        struct Done {  // counted however the layout's search ends
            PlanSearchControl* c;
            ~Done() {
                if (c) ++c->done;
            }
        } done{control};
        const auto& [dp, tp, pp, sched, v] = layouts[li];
        PlanSearchStats& st = stats_of[li];
        Candidate best;
        bool have = false;
        std::string layout_blocked;
        // smallest first: memory grows with the micro-batch, so once nothing fits at one,
        // no larger one fits either
        std::vector<int> zeros = {0};
        if (dp > 1) zeros = pp > 1 ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1, 2, 3};
        for (int mb : plan_micro_batches(base.train.micro_batch, global_batch / dp)) {
            if (control && control->stop) return;
            int accum = int(global_batch / dp / mb);
            layout_blocked.clear();  // why the plain variant fails at this micro-batch
            if (sched == "interleaved" && accum % pp) continue;
            bool level_fit = false;
            for (const char* rc : {"none", "selective", "full"}) {
                if (mlp && std::string(rc) != "none") break;  // nothing to recompute
                for (int off = 0; off < 4 && !level_fit; ++off) {
                    std::string zero0_blocked;
                    for (int z : zeros) {
                        Candidate c;
                        c.cfg = base;
                        ParallelConfig& p = c.cfg.parallel;
                        p.dp = dp, p.tp = tp, p.pp = pp, p.zero = z;
                        p.schedule = sched, p.virtual_stages = v;
                        p.stages.clear();
                        p.recompute = {rc};
                        p.offload_optimizer = off & 1;
                        p.offload_activations = off & 2;
                        c.cfg.train.micro_batch = mb;
                        c.cfg.train.grad_accum = accum;
                        ++st.candidates;
                        try {
                            c.est = estimate_plan(c.cfg, dev);
                        } catch (const std::exception&) {
                            continue;  // a plan the runtime cannot build
                        }
                        ++st.estimated;
                        if (!c.est.fits) {
                            if (z == 0) zero0_blocked = c.est.reason;
                            if (off == 0 && std::string(rc) == "none" && layout_blocked.empty())
                                layout_blocked = c.est.reason;
                            continue;
                        }
                        ++st.fitting;
                        level_fit = true;
                        c.zero0_blocked = z > 0 ? zero0_blocked : "";
                        c.blocked = layout_blocked;
                        if (!have || better(c, best)) best = std::move(c), have = true;
                    }
                }
                if (level_fit) break;
            }
            if (!level_fit) break;
        }
        if (have) best_of[li] = std::move(best);
    });
    if (control && control->stop) throw PlanSearchStopped();
    PlanSearchStats st;
    std::vector<Candidate> best_per_layout;
    for (size_t li = 0; li < layouts.size(); ++li) {
        st.candidates += stats_of[li].candidates;
        st.estimated += stats_of[li].estimated;
        st.fitting += stats_of[li].fitting;
        if (best_of[li]) best_per_layout.push_back(std::move(*best_of[li]));
    }
    std::sort(best_per_layout.begin(), best_per_layout.end(), better);
    if ((int)best_per_layout.size() > top) best_per_layout.resize(std::max(0, top));
    std::vector<PlanSuggestion> out;
    for (auto& c : best_per_layout) {
        PlanSuggestion s;
        s.tokens_per_s = c.est.tokens_per_s;
        s.headroom_bytes = plan_rank_capacity(c.est) - plan_fullest_bytes(c.est);
        s.summary = plan_summary(c.cfg);
        s.reason = plan_reason(c);
        s.config = std::move(c.cfg);
        s.estimate = std::move(c.est);
        out.push_back(std::move(s));
    }
    if (stats) *stats = st;
    return out;
}

}  // namespace tessera
