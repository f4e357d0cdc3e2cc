// Plan advice (see plan_advice.h): searches over one knob at a time with estimate_plan. Memory is
// monotone in the micro-batch and the sequence length, so those limits are found by doubling and
// bisection; policies and block moves are few enough to estimate each.
#include "engine/plan/plan_advice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/core/error.h"
#include "engine/core/str_join.h"

namespace tessera {

namespace {

std::string gib(double bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f GiB", bytes / double(1ll << 30));
    return b;
}

std::string ms(double s) {
    char b[32];
    std::snprintf(b, sizeof b, s < 0.01 ? "%.2f ms" : "%.0f ms", s * 1e3);
    return b;
}

std::string pct(double f) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f%%", 100 * f);
    return b;
}

// The plan fits (false also for a config the estimator rejects).
bool fits(const RunConfig& cfg, const DeviceSpec& dev, int& count, PlanEstimate* out = nullptr) {
    ++count;
    try {
        PlanEstimate e = estimate_plan(cfg, dev);
        if (out) *out = e;
        return e.fits;
    } catch (const std::exception&) {
        return false;
    }
}

// The largest value in [1, ceiling] (steps of `unit`) for which set(cfg, value) fits, by doubling
// then bisection; 0 when `unit` does not fit.
int largest_fitting(RunConfig cfg, const DeviceSpec& dev, int unit, int ceiling,
                    void (*set)(RunConfig&, int), int& count, bool& capped) {
    auto ok = [&](int k) {
        set(cfg, k * unit);
        return fits(cfg, dev, count);
    };
    capped = false;
    const int top = std::max(1, ceiling / unit);
    if (!ok(1)) return 0;
    int lo = 1, hi = 0;  // lo fits; hi (when > 0) does not
    while (hi == 0) {
        if (lo >= top) {
            capped = true;
            return top * unit;
        }
        int next = std::min(top, lo * 2);
        if (ok(next))
            lo = next;
        else
            hi = next;
    }
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (ok(mid))
            lo = mid;
        else
            hi = mid;
    }
    return lo * unit;
}

int policy_complexity(const MemoryPolicy& p) {
    int c = 8 * p.offload_activations + 8 * p.offload_optimizer;
    for (const auto& r : p.recompute) c += r == "full" ? 2 : r == "selective" ? 1 : 0;
    return c;
}

std::string recompute_label(const std::vector<std::string>& rc) {
    if (rc.size() <= 1) return rc.empty() ? "none" : rc[0];
    std::string mode, stages;
    for (size_t s = 0; s < rc.size(); ++s)
        if (rc[s] != "none") {
            mode = mode.empty() || mode == rc[s] ? rc[s] : "mixed";
            if (!stages.empty()) stages += ", ";
            stages += std::to_string(s);
        }
    if (mode.empty()) return "none";
    return str_cat(mode, " on stage", stages.find(',') != std::string::npos ? "s " : " ", stages);
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Step parts

StepBreakdown plan_step_breakdown(const PlanEstimate& e) {
    StepBreakdown b;
    double worst = -1;
    for (const auto& r : e.ranks) {
        const double pass = r.compute_s - r.optimizer_s;
        const double bubble =
            e.bubble_fraction < 1 ? pass * e.bubble_fraction / (1 - e.bubble_fraction) : 0;
        const double t = r.compute_s + bubble + r.comm_s + r.offload_s;
        if (t > worst) {
            worst = t;
            b = {r.rank, r.compute_s, r.comm_s, bubble, r.offload_s, t};
        }
    }
    return b;
}

// ------------------------------------------------------------------------------------------
// What fits

FitLimits plan_fit_limits(const RunConfig& cfg, const DeviceSpec& dev) {
    (void)estimate_plan(cfg, dev);  // the plan itself must be estimable: its error, not a 0
    FitLimits f;
    f.micro_batch = largest_fitting(
        cfg, dev, 1, kFitMaxMicroBatch, [](RunConfig& c, int v) { c.train.micro_batch = v; },
        f.estimates, f.micro_batch_capped);
    if (cfg.model.preset == "mlp") {
        f.note = "an MLP has no sequence length";
        return f;
    }
    const int unit = cfg.model.seq_len >= 64 ? 64 : 1;
    f.seq_len = largest_fitting(
        cfg, dev, unit, kFitMaxSeqLen, [](RunConfig& c, int v) { c.model.seq_len = v; },
        f.estimates, f.seq_len_capped);
    if (unit > 1) f.note = "sequence lengths searched in steps of 64";
    return f;
}

// ------------------------------------------------------------------------------------------
// Plans for a global batch

std::string plan_loss_reason(const PlanSuggestion& faster, const StepBreakdown& fp,
                             const PlanSuggestion& slower, const StepBreakdown& sp,
                             const DeviceSpec* dev) {
    const ParallelConfig &a = faster.config.parallel, &b = slower.config.parallel;
    const double da[] = {fp.compute_s, fp.comm_s, fp.bubble_s, fp.offload_s};
    const double db[] = {sp.compute_s, sp.comm_s, sp.bubble_s, sp.offload_s};
    // compare per token: the two plans may move different token counts per step
    const double ta = std::max<int64_t>(1, faster.estimate.tokens_per_step),
                 tb = std::max<int64_t>(1, slower.estimate.tokens_per_step);
    int worst = 0;
    double worst_d = -1e30;
    for (int k = 0; k < 4; ++k) {
        double d = db[k] / tb - da[k] / ta;
        if (d > worst_d) worst_d = d, worst = k;
    }
    std::string why;
    const double scale = tb;  // per step of the slower plan
    if (worst == 2)
        why = str_cat("bubble ", pct(slower.estimate.bubble_fraction), " vs ",
                      pct(faster.estimate.bubble_fraction), " (pp ", b.pp, ", ",
                      slower.config.train.grad_accum, " micro-batches)");
    else if (worst == 1)
        why = str_cat("exposed communication ", ms(sp.comm_s), " vs ", ms(da[1] / ta * scale),
                      " per step (tp ", b.tp, ", dp ", b.dp, ", zero ", b.zero, ")");
    else if (worst == 3)
        why = str_cat("offload copies ", ms(sp.offload_s), " per step");
    else {
        why = str_cat("compute ", ms(sp.compute_s), " vs ", ms(da[0] / ta * scale), " per step");
        std::vector<std::string> c;
        if (slower.config.train.micro_batch < faster.config.train.micro_batch)
            c.push_back(
                str_cat("micro-batch ", slower.config.train.micro_batch, " runs smaller GEMMs"));
        if (b.recompute != a.recompute)
            c.push_back(str_cat("recompute ", recompute_label(b.recompute)));
        if (b.tp > a.tp) c.push_back(str_cat("tp ", b.tp, " splits each GEMM ", b.tp, " ways"));
        for (size_t i = 0; i < c.size(); ++i)
            why += (i ? ", " : " (") + c[i] + (i + 1 == c.size() ? ")" : "");
    }
    // memory: the savers or the smaller micro-batch the slower layout needs to fit
    std::vector<std::string> mem;
    if (b.recompute != a.recompute && recompute_label(b.recompute) != "none")
        mem.push_back(str_cat("recompute ", recompute_label(b.recompute)));
    if (b.offload_optimizer && !a.offload_optimizer) mem.push_back("optimizer offload");
    if (b.offload_activations && !a.offload_activations) mem.push_back("activation offload");
    if (slower.config.train.micro_batch < faster.config.train.micro_batch)
        mem.push_back(str_cat("micro-batch ", slower.config.train.micro_batch, " (not ",
                              faster.config.train.micro_batch, ")"));
    if (mem.empty() || !dev) return why;
    // only a claim the estimator backs: the slower layout with the faster plan's micro-batch and
    // savers does not fit (else it picked them for speed, and the parts above say why)
    RunConfig probe = slower.config;
    const int64_t per_replica = int64_t(probe.train.micro_batch) * probe.train.grad_accum;
    const int mb = faster.config.train.micro_batch;
    if (mb < 1 || per_replica % mb) return why;
    probe.train.micro_batch = mb;
    probe.train.grad_accum = int(per_replica / mb);
    probe.parallel.recompute = a.recompute;
    probe.parallel.offload_activations = a.offload_activations;
    probe.parallel.offload_optimizer = a.offload_optimizer;
    PlanEstimate pe;
    try {
        pe = estimate_plan(probe, *dev);
    } catch (const std::exception&) {
        return why;
    }
    if (pe.fits) return why;
    const std::string m = str_join(mem, ", ");
    return str_cat("memory: needs ", m,
                   " to fit (as the faster plan is set, the fullest GPU would need ",
                   gib((double)plan_fullest_bytes(pe)), " of ", gib((double)plan_rank_capacity(pe)),
                   "); ", why);
}

std::vector<RankedPlan> plan_rank_for_batch(const RunConfig& base, const DeviceSpec& dev, int gpus,
                                            int64_t global_batch, int top,
                                            PlanSearchControl* control) {
    if (global_batch < 1)
        throw InputError(
            str_cat("--global-batch: expected a positive number of samples, found ", global_batch));
    if (global_batch > (1 << 24))
        throw InputError(str_cat("--global-batch: expected at most ", 1 << 24, " samples, found ",
                                 global_batch));
    RunConfig b = base;
    // plan_suggest keeps micro_batch x grad_accum x dp and tries this micro-batch and the powers of
    // two above it that divide a replica's share
    b.parallel.dp = 1;
    b.train.micro_batch = 1;
    b.train.grad_accum = (int)global_batch;
    std::vector<PlanSuggestion> s = plan_suggest(b, dev, gpus, top, nullptr, control);
    std::vector<RankedPlan> out;
    for (auto& x : s) {
        RankedPlan r;
        r.parts = plan_step_breakdown(x.estimate);
        r.plan = std::move(x);
        if (!out.empty())
            r.loses_because =
                plan_loss_reason(out.back().plan, out.back().parts, r.plan, r.parts, &dev);
        out.push_back(std::move(r));
    }
    return out;
}

// ------------------------------------------------------------------------------------------
// Memory policy

void plan_policy_apply(RunConfig& cfg, const MemoryPolicy& p) {
    cfg.parallel.recompute = p.recompute;
    cfg.parallel.offload_activations = p.offload_activations;
    cfg.parallel.offload_optimizer = p.offload_optimizer;
}

PolicyAdvice plan_policy_advice(const RunConfig& cfg, const DeviceSpec& dev) {
    PolicyAdvice a;
    const PlanEstimate now = estimate_plan(cfg, dev);
    a.current_fits = now.fits;
    const int pp = std::max(1, cfg.parallel.pp);
    const bool mlp = cfg.model.preset == "mlp";
    // the plain plan: which stages are over capacity without savers
    RunConfig plain = cfg;
    plan_policy_apply(plain, {{"none"}, false, false, ""});
    PlanEstimate pe;
    ++a.tried;
    pe = estimate_plan(plain, dev);
    a.plain_step_s = pe.step_s;
    const int64_t cap = plan_rank_capacity(pe);
    std::vector<bool> over(pp, false);
    for (const auto& r : pe.ranks)
        if (r.device_peak_bytes > cap) over[r.coord.pp] = true;

    std::vector<std::vector<std::string>> rcs = {{"none"}};
    if (!mlp) {
        rcs.push_back({"selective"});
        rcs.push_back({"full"});
        const int n_over = (int)std::count(over.begin(), over.end(), true);
        if (pp > 1 && n_over > 0 && n_over < pp)
            for (const char* mode : {"selective", "full"}) {
                std::vector<std::string> v(pp, "none");
                for (int s = 0; s < pp; ++s)
                    if (over[s]) v[s] = mode;
                rcs.push_back(v);
            }
    }
    double best_step = 0;
    for (const auto& rc : rcs)
        for (int off = 0; off < 4; ++off) {
            MemoryPolicy p{rc, (off & 2) != 0, (off & 1) != 0, ""};
            RunConfig c = cfg;
            plan_policy_apply(c, p);
            PlanEstimate e;
            if (rc == std::vector<std::string>{"none"} && off == 0)
                e = pe;
            else if (!fits(c, dev, a.tried, &e))
                continue;
            if (!e.fits) continue;
            const bool better = !a.found || e.step_s < best_step * (1 - 1e-3) ||
                                (e.step_s <= best_step * (1 + 1e-3) &&
                                 policy_complexity(p) < policy_complexity(a.policy));
            if (!better) continue;
            a.found = true;
            best_step = e.step_s;
            a.policy = p;
            a.step_s = e.step_s;
        }
    if (!a.found) {
        a.text = str_cat(
            "nothing fits: even full recompute with activation and optimizer offload needs more "
            "than ",
            gib((double)cap), " on a GPU; use more GPUs (tp, pp) or ZeRO");
        return a;
    }
    std::string label = recompute_label(a.policy.recompute);
    if (a.policy.offload_activations) label += " + offload activations";
    if (a.policy.offload_optimizer) label += " + offload optimizer";
    a.policy.label = label;
    a.slowdown = a.plain_step_s > 0 ? a.step_s / a.plain_step_s : 1;
    const bool same =
        a.policy.recompute == (cfg.parallel.recompute.empty() ? std::vector<std::string>{"none"}
                                                              : cfg.parallel.recompute) &&
        a.policy.offload_activations == cfg.parallel.offload_activations &&
        a.policy.offload_optimizer == cfg.parallel.offload_optimizer;
    if (label == "none")
        a.text = str_cat("fits without recompute or offload (step ", ms(a.step_s), ")");
    else
        a.text = str_cat("cheapest policy that fits: ", label, ", ",
                         a.slowdown >= 1.0005 ? "+" : "", pct(a.slowdown - 1), " step time (",
                         ms(a.step_s), " vs ", ms(a.plain_step_s), " without; that needs ",
                         gib((double)plan_fullest_bytes(pe)), " of ", gib((double)cap), ")");
    if (same)
        a.text += " — the current plan";
    else if (now.fits && now.step_s > a.step_s)
        a.text += str_cat(" — faster than the current ", ms(now.step_s));
    return a;
}

// ------------------------------------------------------------------------------------------
// Stage imbalance

StageImbalance plan_stage_imbalance(const RunConfig& cfg, const DeviceSpec& dev) {
    StageImbalance s;
    const int pp = cfg.parallel.pp;
    if (pp < 2 || cfg.model.preset == "mlp") {
        s.text = "one pipeline stage: nothing to balance";
        return s;
    }
    if (cfg.parallel.virtual_stages > 1) {
        s.text =
            "interleaved stages hold the embedding and head in their first and last chunks: not "
            "assessed";
        return s;
    }
    const PlanEstimate e = estimate_plan(cfg, dev);
    std::vector<double> mem(pp, 0), time(pp, 0);
    std::vector<int> in_flight(pp, 0);
    for (const auto& r : e.ranks) {
        mem[r.coord.pp] = std::max(mem[r.coord.pp], (double)r.device_peak_bytes);
        time[r.coord.pp] = std::max(time[r.coord.pp], r.compute_s + r.comm_s + r.offload_s);
        in_flight[r.coord.pp] = std::max(in_flight[r.coord.pp], r.max_in_flight);
    }
    auto others_mean = [&](const std::vector<double>& v, int k) {
        double sum = 0;
        for (int i = 0; i < pp; ++i)
            if (i != k) sum += v[i];
        return sum / (pp - 1);
    };
    // the outlier with the largest excess over the others' mean, first or last stage only
    double best_excess = 0.10;
    for (int k : {0, pp - 1})
        for (const char* metric : {"memory", "time"}) {
            const auto& v = std::string(metric) == "memory" ? mem : time;
            const double o = others_mean(v, k);
            if (o <= 0 || v[k] < *std::max_element(v.begin(), v.end())) continue;
            const double excess = v[k] / o - 1;
            if (excess > best_excess) {
                best_excess = excess;
                s.stage = k, s.metric = metric, s.value = v[k], s.others = o;
            }
        }
    if (s.stage < 0) {
        s.text = "stages within 10% of each other in memory and time";
        return s;
    }
    s.cause = s.stage == 0 ? "embedding" : "head";
    s.peak_bytes = plan_fullest_bytes(e);
    s.step_s = e.step_s;
    const bool memory = s.metric == "memory";
    std::string what = memory ? str_cat(gib(s.value), " vs ", gib(s.others))
                              : str_cat(ms(s.value), " vs ", ms(s.others));
    std::string head = str_cat("stage ", s.stage, " holds the ", s.cause, " and is the ", s.metric,
                               " outlier: ", what, " on the other stages");
    if (memory && s.stage == 0 && in_flight[0] > 1)
        head += str_cat(" (it also keeps ", in_flight[0], " micro-batches' activations in flight)");

    const std::vector<int> cur = plan_blocks_per_chunk(cfg);
    const int to = s.stage == 0 ? 1 : pp - 2;
    double best = memory ? (double)s.peak_bytes : s.step_s;
    int worse_run = 0, count = 0;
    for (int k = 1; k < cur[s.stage]; ++k) {
        RunConfig c = cfg;
        c.parallel.stages = cur;
        c.parallel.stages[s.stage] -= k;
        c.parallel.stages[to] += k;
        PlanEstimate f;
        bool ok = fits(c, dev, count, &f);
        if (!ok && e.fits) break;  // moving more only fills the neighbour further
        if (f.ranks.empty()) break;
        const double v = memory ? (double)plan_fullest_bytes(f) : f.step_s;
        // a plan that fits keeps its speed (memory moves may cost 2%); one that does not may
        // trade time for fitting
        const bool allowed = !memory || !e.fits || f.step_s <= e.step_s * 1.02;
        if (allowed && v < best * 0.99) {
            best = v, worse_run = 0;
            s.move_blocks = k, s.to_stage = to, s.stages = c.parallel.stages;
            s.fixed_step_s = f.step_s, s.fixed_peak_bytes = plan_fullest_bytes(f);
        } else if (++worse_run >= 2) {
            break;
        }
    }
    if (s.move_blocks == 0) {
        s.text = str_cat(
            head, "; moving blocks to stage ", to,
            memory ? " would not lower the fullest GPU without slowing the step by more than 2%"
                   : " would not shorten the step (the neighbour becomes the slowest)");
        return s;
    }
    s.found = true;
    const std::string split = str_join(s.stages, ", ", [](int n) { return std::to_string(n); });
    s.text = str_cat(head, ". Fix: move ", s.move_blocks, " block", s.move_blocks > 1 ? "s" : "",
                     " to stage ", to, " (stages ", split, "; first stage ", s.stages.front(),
                     ", last stage ", s.stages.back(), " blocks): ",
                     memory ? str_cat("fullest GPU ", gib((double)s.fixed_peak_bytes), " (was ",
                                      gib((double)s.peak_bytes), ")")
                            : str_cat("step ", ms(s.fixed_step_s), " (was ", ms(s.step_s), ")"),
                     memory ? str_cat(", step ", ms(s.fixed_step_s)) : std::string());
    return s;
}

}  // namespace tessera
