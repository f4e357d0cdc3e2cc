// Plan validation: the parser's parallel-layout rules (engine/config/config_rules.cpp) and the
// schedule's requirements (engine/parallel/schedule.cpp), collected instead of thrown, so an editor
// can mark every offending control. Messages name expected versus found.
#include "engine/plan/plan_validate.h"

#include <algorithm>
#include <numeric>

#include "engine/core/error.h"

namespace tessera {

std::vector<PlanIssue> plan_validate(const RunConfig& cfg, int gpus_available) {
    const ModelConfig& m = cfg.model;
    const ParallelConfig& p = cfg.parallel;
    std::vector<PlanIssue> out;
    auto add = [&](const std::string& key, std::string msg) {
        out.push_back({key, std::move(msg)});
    };
    bool mlp = m.preset == "mlp";

    // degrees
    if (p.dp < 1) add("parallel.dp", str_cat("dp must be at least 1, found ", p.dp));
    if (p.tp < 1) add("parallel.tp", str_cat("tp must be at least 1, found ", p.tp));
    if (p.pp < 1) add("parallel.pp", str_cat("pp must be at least 1, found ", p.pp));
    if (p.dp < 1 || p.tp < 1 || p.pp < 1) return out;
    int world = p.dp * p.tp * p.pp;
    if (gpus_available > 0 && world != gpus_available)
        add("parallel.dp", str_cat("dp x tp x pp = ", p.dp, " x ", p.tp, " x ", p.pp, " = ", world,
                                   " GPUs, but ", gpus_available, " are available"));

    // tensor parallel
    if (mlp && p.tp != 1)
        add("parallel.tp", str_cat("an MLP is not tensor-split: tp must be 1, found ", p.tp));
    if (!mlp && m.n_head % p.tp != 0)
        add("parallel.tp", str_cat("tp ", p.tp, " does not divide the ", m.n_head,
                                   " attention heads (each TP rank holds whole heads)"));
    if (!mlp && m.d_model % p.tp != 0)
        add("parallel.tp", str_cat("tp ", p.tp, " does not divide d_model ", m.d_model));

    // pipeline
    if (mlp && p.pp != 1)
        add("parallel.pp", str_cat("an MLP is not pipelined: pp must be 1, found ", p.pp));
    if (!mlp && p.pp > m.n_layer)
        add("parallel.pp", str_cat("pp ", p.pp, " is more stages than the model's ", m.n_layer,
                                   " layers: a stage would hold none"));
    if (p.virtual_stages < 1)
        add("parallel.virtual_stages",
            str_cat("virtual_stages must be at least 1, found ", p.virtual_stages));
    if (p.virtual_stages > 1 && p.schedule != "interleaved")
        add("parallel.virtual_stages",
            str_cat("virtual_stages ", p.virtual_stages, " needs schedule interleaved (",
                    p.schedule, " runs one model chunk per stage)"));
    if (p.schedule == "interleaved") {
        if (p.virtual_stages < 2)
            add("parallel.schedule",
                str_cat("interleaved needs virtual_stages >= 2, found ", p.virtual_stages));
        if (p.pp < 2)
            add("parallel.schedule", "interleaved needs a pipeline (pp >= 2), found pp 1");
        if (p.pp >= 1 && cfg.train.grad_accum % p.pp != 0)
            add("train.grad_accum",
                str_cat("interleaved needs micro-batches (grad_accum ", cfg.train.grad_accum,
                        ") divisible by pp (", p.pp, ")"));
    }
    int chunks = p.pp * std::max(1, p.virtual_stages);
    if (!mlp && chunks > m.n_layer && p.pp <= m.n_layer)
        add("parallel.virtual_stages", str_cat("pp x virtual_stages = ", chunks,
                                               " chunks, more than the ", m.n_layer, " layers"));
    if (!p.stages.empty()) {
        if ((int)p.stages.size() != chunks)
            add("parallel.stages", str_cat("expected pp x virtual_stages = ", chunks,
                                           " entries, found ", p.stages.size()));
        for (size_t k = 0; k < p.stages.size(); ++k)
            if (p.stages[k] < 1)
                add("parallel.stages", str_cat("stage ", k, " has no layers (", p.stages[k],
                                               "): every chunk needs at least one block"));
        long sum = std::accumulate(p.stages.begin(), p.stages.end(), 0L);
        if (!mlp && sum != m.n_layer)
            add("parallel.stages",
                str_cat("stages sum to ", sum, " layers, the model has ", m.n_layer));
    } else if (p.schedule == "interleaved" && !mlp && chunks > 0 && m.n_layer % chunks != 0) {
        add("parallel.virtual_stages", str_cat("the ", m.n_layer,
                                               " layers do not divide evenly into pp x "
                                               "virtual_stages = ",
                                               chunks, " chunks (set parallel.stages)"));
    }
    if (p.recompute.size() != 1 && (int)p.recompute.size() != p.pp)
        add("parallel.recompute",
            str_cat("expected one value or pp (", p.pp, ") values, found ", p.recompute.size()));
    for (const auto& r : p.recompute)
        if (r != "none" && r != "selective" && r != "full")
            add("parallel.recompute", str_cat("expected none, selective or full, found '", r, "'"));

    // data parallel / ZeRO
    if (p.zero < 0 || p.zero > 3)
        add("parallel.zero", str_cat("zero must be 0..3, found ", p.zero));
    if (p.zero == 3 && p.pp > 1)
        add("parallel.zero",
            str_cat("ZeRO-3 with pipeline stages is unsupported (pp ", p.pp, "): use zero <= 2"));

    // batch
    if (cfg.train.micro_batch < 1)
        add("train.micro_batch",
            str_cat("micro_batch must be at least 1, found ", cfg.train.micro_batch));
    if (cfg.train.grad_accum < 1)
        add("train.grad_accum",
            str_cat("grad_accum must be at least 1, found ", cfg.train.grad_accum));
    return out;
}

std::string plan_issues_for_key(const std::vector<PlanIssue>& issues, const std::string& key) {
    std::string s;
    for (const auto& i : issues) {
        if (i.key != key) continue;
        if (!s.empty()) s += '\n';
        s += i.message;
    }
    return s;
}

}  // namespace tessera
