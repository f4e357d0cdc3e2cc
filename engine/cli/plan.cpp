// `tessera plan CONFIG [--device H200] [--json] [--set k=v]...`: the estimator's prediction for a
// plan without running it — per rank class (ranks with identical figures grouped): memory by
// category and total against the device's capacity, FLOPs, communication volume, plus the
// pipeline bubble, step time, tokens/s, MFU and the balanced stage split. Bad input: exit 2.
// `tessera plan --calibrate [--threads N] [CONFIG]` first times this CPU's kernels at the threads a
// rank gets (engine/plan/op_sweep.h) and stores them where the estimator finds them.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/cli/cli.h"
#include "engine/config/config.h"
#include "engine/core/atomic_file.h"
#include "engine/core/error.h"
#include "engine/core/json_text.h"
#include "engine/core/str_join.h"
#include "engine/model/mlp.h"
#include "engine/parallel/tp_layers.h"
#include "engine/plan/estimator.h"
#include "engine/plan/op_costs.h"
#include "engine/plan/op_sweep.h"
#include "engine/plan/partitioner.h"
#include "engine/plan/plan_advice.h"

namespace tessera {

namespace {

const char* kPlanUsage =
    "usage: tessera plan CONFIG [--device NAME] [--json] [--set key.path=value]...\n"
    "                   [--fits [--gpus N] [--global-batch N]]\n"
    "       tessera plan --calibrate [--threads N] [--keep-faster] [CONFIG ...]\n"
    "\n"
    "Predicts every rank's peak memory by category, FLOPs, communication per step, the pipeline\n"
    "bubble, step time, tokens/s and MFU for a run config, without running it.\n"
    "\n"
    "options:\n"
    "  --device NAME   H100 | H100-PCIe | H100-NVL | H200 | A100-80GB | A100-40GB | cpu,\n"
    "                  or a GPU as its driver names it (nvidia-smi: \"NVIDIA H100 PCIe\");\n"
    "                  default: cpu for runtime.device cpu, else H200\n"
    "  --json          the same as JSON, with the model as built (\"model\": family, layers,\n"
    "                  heads, key/value heads, d_model, parameters, ...)\n"
    "  --set k=v       override a config key (repeatable)\n"
    "  --calibrate     time this CPU's kernels (about 15 s) at the threads each of CONFIG's ranks\n"
    "                  gets (or --threads N; without either, all cores) and store them in\n"
    "                  ${XDG_CACHE_HOME:-~/.cache}/tessera/devices (or $TESSERA_DEVICES_DIR), "
    "keyed\n"
    "                  by CPU model, cores and threads; CPU plans are then priced op by op\n"
    "                  (step_model \"ops\"), else from sgemm's rate (\"efficiency\")\n"
    "  --threads N     with --calibrate: calibrate N threads per rank\n"
    "  --keep-faster   with --calibrate: keep each op's faster time of this sweep and the one\n"
    "                  stored for these threads (a host shared with other work measures its\n"
    "                  neighbours in a slow spell; sweeps at different times keep the host's own\n"
    "                  cost); the collectives are this sweep's. A stored file of another grid or\n"
    "                  host, or unreadable, is replaced (and said so)\n"
    "  --fits          also answer what fits: the largest micro-batch and the longest sequence\n"
    "                  that fit this plan, the cheapest recompute/offload policy that fits, a\n"
    "                  first or last stage made the outlier by the embedding or head (and the\n"
    "                  blocks to move), and the plans that fit --global-batch on --gpus GPUs,\n"
    "                  fastest first, each with why it loses to the one above (JSON: "
    "\"fits_answers\")\n"
    "  --gpus N        with --fits: GPUs for the ranked plans (default: the plan's world)\n"
    "  --global-batch N  with --fits: samples per step (default: micro_batch x grad_accum x dp)\n";

std::string mib(int64_t b) {
    char s[32];
    if (b >= (10LL << 30))
        std::snprintf(s, sizeof s, "%.1fG", b / 1073741824.0);
    else
        std::snprintf(s, sizeof s, "%.1fM", b / 1048576.0);
    return s;
}

std::string si(double x, const char* unit) {
    char s[32];
    const char* p[] = {"", "K", "M", "G", "T", "P", "E"};
    int i = 0;
    while (x >= 1000 && i < 6) x /= 1000, ++i;
    std::snprintf(s, sizeof s, "%.3g%s%s", x, p[i], unit);
    return s;
}

// Ranks with identical figures form one class (e.g. every DP replica of a stage).
std::vector<std::vector<int>> rank_classes(const PlanEstimate& e) {
    std::map<std::vector<double>, std::vector<int>> by;
    std::vector<std::vector<double>> order;
    for (const auto& r : e.ranks) {
        std::vector<double> key(r.peak_bytes.begin(), r.peak_bytes.end());
        key.insert(key.end(), {(double)r.total_peak_bytes, r.flops_per_step, r.comm_dp_bytes,
                               r.comm_tp_bytes, r.comm_pp_bytes, r.comm_embedding_bytes});
        if (!by.count(key)) order.push_back(key);
        by[key].push_back(r.rank);
    }
    std::vector<std::vector<int>> out;
    out.reserve(order.size());
    for (auto& k : order) out.push_back(by[k]);
    return out;
}

std::string ranks_str(const std::vector<int>& rs) {
    std::string s;
    for (size_t i = 0; i < rs.size(); ++i) {
        size_t j = i;
        while (j + 1 < rs.size() && rs[j + 1] == rs[j] + 1) ++j;
        if (!s.empty()) s += ',';
        s += std::to_string(rs[i]);
        if (j > i) {
            s += '-';
            s += std::to_string(rs[j]);
        }
        i = j;
    }
    if (s.size() > 14)  // a long strided list (e.g. one TP rank of every DP replica)
        s = str_cat(rs.front(), "..", rs.back(), " (", rs.size(), ")");
    return s;
}

// The calibration stored at `path`, when it is one --keep-faster may merge with `costs`: a costs
// file the estimator would read (op_costs_parse), of this host at `threads` threads, of this
// grid; otherwise null, and `why` says what stops it.
nlohmann::json stored_calibration(const std::string& path, int threads, const nlohmann::json& costs,
                                  std::string& why) {
    const std::optional<std::string> text = text_file_read(path);
    if (!text) {
        why = "none stored yet";
        return nullptr;
    }
    nlohmann::json stored;
    try {
        stored = json_parse_text(*text, path, kOpCostsExpected);
        const OpCosts parsed = op_costs_from_json(stored, path);
        if (!op_costs_are_this_hosts(parsed, threads)) {
            why = str_cat(path, " was made on ", parsed.cpu_model, " (", parsed.cores,
                          " cores) at ", parsed.threads, " threads");
            return nullptr;
        }
    } catch (const InputError& e) {
        why = e.what();
        return nullptr;
    }
    const std::string diff = op_sweep_grid_difference(costs, stored);
    if (!diff.empty()) {
        why = str_cat(path, " is a sweep of another grid (", diff, ")");
        return nullptr;
    }
    return stored;
}

// Times this CPU's kernels at `threads` threads and writes the costs file the estimator reads
// (op_costs_for_cpu); says where on stderr (stdout stays the plan's, JSON included). keep_faster:
// each op's faster time of this sweep and the stored one (when it is of this host and grid).
void calibrate_cpu(int threads, bool quiet, bool keep_faster) {
    const std::string path = cpu_costs_path(threads);
    const auto t0 = std::chrono::steady_clock::now();
    nlohmann::json costs = op_sweep_cpu(threads, [&](const char* what) {
        if (!quiet) std::fprintf(stderr, "calibrate: %s\n", what);
    });
    if (keep_faster) {
        std::string why;
        const nlohmann::json stored = stored_calibration(path, threads, costs, why);
        if (stored.is_null()) {
            std::fprintf(stderr, "calibrate: --keep-faster: %s; this sweep alone is stored\n",
                         why.c_str());
        } else {
            op_sweep_keep_faster(costs, stored);
            auto text = [&](const char* key) {
                return stored.contains(key) && stored[key].is_string()
                           ? stored[key].get<std::string>()
                           : std::string();
            };
            costs["sweeps"] = (stored.contains("sweeps") && stored["sweeps"].is_number_integer()
                                   ? stored["sweeps"].get<int>()
                                   : 1) +
                              1;
            costs["first_sweep"] =
                text("first_sweep").empty() ? text("produced_by") : text("first_sweep");
            costs["produced_by"] =
                str_cat(costs["produced_by"].get<std::string>(), "; each op the fastest of ",
                        costs["sweeps"].dump(), " sweeps (--keep-faster)");
        }
    }
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    file_write_atomic(path, costs.dump(1) + "\n");
    std::fprintf(stderr, "calibrate: %d threads on %s (%d cores) in %.1f s: %s\n", threads,
                 cpu_host().model.c_str(), cpu_host().cores,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 path.c_str());
}

// The model the plan is of, as the runtime builds it (its preset and explicit keys resolved):
// for tools that need its sizes (bench/gpt2_throughput.py builds its PyTorch peer from them).
nlohmann::json model_json(const ModelConfig& m) {
    const ModelShape s = model_shape(m, plan_vocab_size(m));
    nlohmann::json j;
    j["description"] = s.describe();
    j["parameters"] = s.param_table().total_numel();
    switch (s.family) {
        case ModelShape::Family::gpt:
            j["family"] = "gpt";
            j["layers"] = s.gpt.n_layer;
            j["heads"] = j["kv_heads"] = s.gpt.n_head;
            j["d_model"] = s.gpt.d_model;
            j["head_dim"] = s.gpt.d_model / s.gpt.n_head;
            j["ffn"] = 4 * s.gpt.d_model;
            j["seq_len"] = s.gpt.seq_len;
            j["vocab"] = s.gpt.vocab;
            break;
        case ModelShape::Family::llama:
            j["family"] = "llama";
            j["layers"] = s.llama.n_layer;
            j["heads"] = s.llama.n_head;
            j["kv_heads"] = s.llama.n_kv_head;
            j["d_model"] = s.llama.d_model;
            j["head_dim"] = s.llama.head_dim;
            j["ffn"] = s.llama.ffn;
            j["seq_len"] = s.llama.seq_len;
            j["vocab"] = s.llama.vocab;
            break;
        case ModelShape::Family::mlp:
            j["family"] = "mlp";
            j["sizes"] = s.sizes;
            break;
    }
    return j;
}

// --fits: the plan advice (engine/plan/plan_advice.h) as JSON; the text output prints the same.
nlohmann::json fits_answers(const RunConfig& cfg, const DeviceSpec& dev, int gpus,
                            int64_t global_batch) {
    nlohmann::json j;
    const FitLimits f = plan_fit_limits(cfg, dev);
    j["max_micro_batch"] = f.micro_batch;
    j["max_micro_batch_capped"] = f.micro_batch_capped;
    j["max_seq_len"] = f.seq_len;
    j["max_seq_len_capped"] = f.seq_len_capped;
    if (!f.note.empty()) j["limits_note"] = f.note;
    const PolicyAdvice a = plan_policy_advice(cfg, dev);
    j["policy"] = {{"found", a.found},
                   {"recompute", a.policy.recompute},
                   {"offload_activations", a.policy.offload_activations},
                   {"offload_optimizer", a.policy.offload_optimizer},
                   {"label", a.policy.label},
                   {"step_s", a.step_s},
                   {"plain_step_s", a.plain_step_s},
                   {"slowdown", a.slowdown},
                   {"text", a.text}};
    const StageImbalance im = plan_stage_imbalance(cfg, dev);
    j["stage_imbalance"] = {{"found", im.found},
                            {"stage", im.stage},
                            {"metric", im.metric},
                            {"cause", im.cause},
                            {"move_blocks", im.move_blocks},
                            {"to_stage", im.to_stage},
                            {"stages", im.stages},
                            {"text", im.text}};
    if (global_batch == 0)
        global_batch =
            int64_t(cfg.train.micro_batch) * cfg.train.grad_accum * std::max(1, cfg.parallel.dp);
    j["gpus"] = gpus;
    j["global_batch"] = global_batch;
    j["plans"] = nlohmann::json::array();
    for (const RankedPlan& r : plan_rank_for_batch(cfg, dev, gpus, global_batch, 5)) {
        const ParallelConfig& p = r.plan.config.parallel;
        j["plans"].push_back({{"summary", r.plan.summary},
                              {"tokens_per_s", r.plan.tokens_per_s},
                              {"dp", p.dp},
                              {"tp", p.tp},
                              {"pp", p.pp},
                              {"zero", p.zero},
                              {"micro_batch", r.plan.config.train.micro_batch},
                              {"grad_accum", r.plan.config.train.grad_accum},
                              {"headroom_bytes", r.plan.headroom_bytes},
                              {"step_parts_s",
                               {{"compute", r.parts.compute_s},
                                {"comm", r.parts.comm_s},
                                {"bubble", r.parts.bubble_s},
                                {"offload", r.parts.offload_s}}},
                              {"step_s", r.parts.step_s},
                              {"loses_because", r.loses_because}});
    }
    return j;
}

void fits_print(const nlohmann::json& j) {
    auto cap = [](bool c) { return c ? " (the search's ceiling)" : ""; };
    std::printf("\nwhat fits this plan: micro-batch up to %d%s", j["max_micro_batch"].get<int>(),
                cap(j["max_micro_batch_capped"].get<bool>()));
    if (j.contains("limits_note") && j["max_seq_len"].get<int>() == 0)
        std::printf("; %s\n", j["limits_note"].get<std::string>().c_str());
    else
        std::printf("; sequence up to %d%s at this micro-batch\n", j["max_seq_len"].get<int>(),
                    cap(j["max_seq_len_capped"].get<bool>()));
    std::printf("memory policy: %s\n", j["policy"]["text"].get<std::string>().c_str());
    std::printf("stages: %s\n", j["stage_imbalance"]["text"].get<std::string>().c_str());
    std::printf("plans for global batch %lld on %d GPUs, fastest first:\n",
                j["global_batch"].get<long long>(), j["gpus"].get<int>());
    if (j["plans"].empty()) std::printf("  none fits\n");
    int i = 0;
    for (const auto& p : j["plans"]) {
        const auto& s = p["step_parts_s"];
        std::printf(
            "  %d. %s tokens/s  %s\n     step %.4g s = compute %.4g + comm %.4g + bubble %.4g + "
            "offload %.4g\n",
            ++i, si(p["tokens_per_s"].get<double>(), "").c_str(),
            p["summary"].get<std::string>().c_str(), p["step_s"].get<double>(),
            s["compute"].get<double>(), s["comm"].get<double>(), s["bubble"].get<double>(),
            s["offload"].get<double>());
        if (!p["loses_because"].get<std::string>().empty())
            std::printf("     slower than %d: %s\n", i - 1,
                        p["loses_because"].get<std::string>().c_str());
    }
}

}  // namespace

int cli_plan(const CliArgs& args) {
    std::string path, device;
    bool json = false, calibrate = false, want_fits = false, keep_faster = false;
    int threads = 0, gpus = 0;
    int64_t global_batch = 0;
    std::vector<std::string> overrides;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--help" || a == "-h") {
            std::fputs(kPlanUsage, stdout);
            return 0;
        } else if (a == "--json") {
            json = true;
        } else if (a == "--calibrate") {
            calibrate = true;
        } else if (a == "--keep-faster") {
            keep_faster = true;
        } else if (a == "--fits") {
            want_fits = true;
        } else if (a == "--gpus" || a == "--global-batch") {
            if (i + 1 >= args.size())
                throw InputError(str_cat(a, ": expected a positive number after ", a,
                                         ", found the end of the arguments"));
            const std::string& v = args[++i];
            char* end = nullptr;
            const long long n = std::strtoll(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0' || n < 1 || n > (a == "--gpus" ? 65536 : (1LL << 24)))
                throw InputError(str_cat(a, ": expected a positive whole number",
                                         a == "--gpus" ? " up to 65536" : " up to 16777216",
                                         ", found '", v, "'"));
            if (a == "--gpus")
                gpus = (int)n;
            else
                global_batch = n;
        } else if (a == "--threads") {
            if (i + 1 >= args.size() || std::atoi(args[i + 1].c_str()) < 1)
                throw InputError("--threads: expected a positive thread count after --threads");
            threads = std::atoi(args[++i].c_str());
        } else if (a == "--device" || a == "--set") {
            if (i + 1 >= args.size())
                throw InputError(
                    str_cat(a, ": expected a value after ", a, ", found the end of the arguments"));
            (a == "--device" ? device : overrides.emplace_back()) = args[++i];
        } else if (a.rfind("--device=", 0) == 0) {
            device = a.substr(9);
        } else if (a.rfind("--set=", 0) == 0) {
            overrides.push_back(a.substr(6));
        } else if (!a.empty() && a[0] == '-') {
            throw InputError(str_cat(
                a,
                ": expected CONFIG, --device, --json, --set, --fits, --gpus, --global-batch, "
                "--calibrate, --threads, --keep-faster or --help, found an unknown option (see "
                "`tessera plan --help`)"));
        } else if (path.empty()) {
            path = a;
        } else {
            throw InputError(
                str_cat(a, ": expected one CONFIG, found a second one (first: ", path, ")"));
        }
    }
    if (threads > 0 && !calibrate)
        throw InputError("--threads: expected together with --calibrate");
    if (keep_faster && !calibrate)
        throw InputError("--keep-faster: expected together with --calibrate");
    if ((gpus > 0 || global_batch > 0) && !want_fits)
        throw InputError(
            str_cat(gpus > 0 ? "--gpus" : "--global-batch", ": expected together with --fits"));
    if (calibrate && path.empty()) {
        calibrate_cpu(threads > 0 ? threads : cpu_host().cores, json, keep_faster);
        return 0;
    }
    if (path.empty())
        throw InputError(
            "expected a CONFIG file argument, found none (usage: tessera plan CONFIG "
            "[--device NAME] [--json] [--set key.path=value]...)");
    // a plan needs no data: a project whose data is not prepared yet plans
    RunConfig cfg = config_load(path, overrides, ConfigFiles::may_be_missing);
    if (calibrate) {
        if (cfg.runtime.device != "cpu")
            throw InputError(
                str_cat(path,
                        ": --calibrate: expected runtime.device cpu (it times this CPU's "
                        "kernels), found ",
                        cfg.runtime.device));
        calibrate_cpu(threads > 0 ? threads : plan_cpu_threads(cfg), json, keep_faster);
    }
    if (device.empty()) device = device_default_name(cfg);
    DeviceSpec dev;
    if (!device_spec_for_recorded(device, &dev))
        throw InputError(str_cat("--device: expected one of ", str_join(device_names(), ", "),
                                 ", or a GPU the table knows as its driver names it (\"NVIDIA "
                                 "H100 80GB HBM3\"), found '",
                                 device, "'"));
    PlanEstimate e = estimate_plan(cfg, dev);
    std::string balanced;
    std::vector<int> blocks;
    if (cfg.parallel.pp * cfg.parallel.virtual_stages > 1) {
        try {
            blocks = balance_stages(cfg, dev);
        } catch (const InputError& err) {
            balanced = err.what();
        }
    }
    const int64_t cap = plan_rank_capacity(e);
    auto classes = rank_classes(e);
    nlohmann::json answers;
    if (want_fits) answers = fits_answers(cfg, dev, gpus > 0 ? gpus : e.world, global_batch);

    if (json) {
        nlohmann::json j;
        j["config"] = path;
        j["model"] = model_json(cfg.model);
        j["device"] = {{"name", dev.name},
                       {"peak_flops", dev.peak_flops},
                       {"memory_bytes", cap},
                       {"efficiency", dev.efficiency}};
        j["world"] = e.world;
        if (dev.shared_host) j["threads_per_rank"] = plan_cpu_threads(cfg);
        j["tokens_per_step"] = e.tokens_per_step;
        j["flops_per_step"] = e.flops_per_step;
        j["model_flops_per_step"] = e.model_flops_per_step;
        j["bubble_fraction"] = e.bubble_fraction;
        j["step_s"] = e.step_s;
        j["tokens_per_s"] = e.tokens_per_s;
        j["mfu"] = e.mfu;
        j["step_model"] = e.step_model;
        j["step_model_note"] = e.step_model_note;
        j["fits"] = e.fits;
        if (!e.fits) j["reason"] = e.reason;
        if (!blocks.empty()) j["balanced_stages"] = blocks;
        if (!balanced.empty()) j["balanced_stages_error"] = balanced;
        if (want_fits) j["fits_answers"] = answers;
        j["ranks"] = nlohmann::json::array();
        for (const auto& cls : classes) {
            const RankEstimate& r = e.ranks[cls[0]];
            nlohmann::json mem;
            for (int c = 0; c < kMemCategoryCount; ++c)
                mem[std::string(mem_category_name((MemCategory)c)) + "_bytes"] = r.peak_bytes[c];
            mem["total_bytes"] = r.total_peak_bytes;
            mem["device_bytes"] = r.device_peak_bytes;
            // each category at the moment of the device's peak (they add up to device_bytes;
            // "memory" holds each category's own peak)
            nlohmann::json at_peak;
            for (int c = 0; c < (int)MemCategory::host; ++c)
                at_peak[std::string(mem_category_name((MemCategory)c)) + "_bytes"] =
                    r.at_peak_bytes[c];
            nlohmann::json coords = nlohmann::json::array();
            for (int rk : cls) {
                const MeshCoord& c = e.ranks[rk].coord;
                coords.push_back({{"rank", rk}, {"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}});
            }
            j["ranks"].push_back({{"ranks", coords},
                                  {"memory", mem},
                                  {"memory_at_device_peak", at_peak},
                                  {"max_in_flight", r.max_in_flight},
                                  {"layers", r.layers},
                                  {"flops_per_step", r.flops_per_step},
                                  {"comm_bytes",
                                   {{"dp", r.comm_dp_bytes},
                                    {"tp", r.comm_tp_bytes},
                                    {"pp", r.comm_pp_bytes},
                                    {"embedding", r.comm_embedding_bytes}}},
                                  {"compute_s", r.compute_s},
                                  {"compute_parts_s",
                                   {{"gemm", r.gemm_s},
                                    {"attention", r.attention_s},
                                    {"other_ops", r.other_ops_s},
                                    {"optimizer", r.optimizer_s}}},
                                  {"comm_s", r.comm_s},
                                  {"offload_bytes", r.offload_bytes},
                                  {"offload_s", r.offload_s}});
        }
        std::printf("%s\n", j.dump(2).c_str());
        return 0;
    }

    const ParallelConfig& p = cfg.parallel;
    std::string model = str_cat(cfg.model.preset, ", ", cfg.model.n_layer, " layers, d_model ",
                                cfg.model.d_model, ", seq ", cfg.model.seq_len);
    if (cfg.model.preset == "mlp") {
        std::string widths;
        for (int w : mlp_sizes(cfg.model))
            widths += (widths.empty() ? "" : "-") + std::to_string(w);
        model = "mlp " + widths;
    }
    std::printf(
        "plan %s: %s; world %d = dp%d x tp%d x pp%d (v%d, %s), zero %d, micro_batch %d x %d\n",
        path.c_str(), model.c_str(), e.world, p.dp, p.tp, p.pp, p.virtual_stages,
        p.schedule.c_str(), p.zero, cfg.train.micro_batch, cfg.train.grad_accum);
    std::printf("device %s: %s peak, %s per device, efficiency %.2f\n\n", dev.name.c_str(),
                si(dev.peak_flops, "FLOP/s").c_str(), mib(cap).c_str(), dev.efficiency);
    std::printf("%-14s", "ranks");
    for (const char* h :
         {"params", "grads", "optim", "activ", "work", "comm", "context", "libs", "cached", "host"})
        std::printf(" %8s", h);
    static_assert(kMemCategoryCount == 10, "a column per memory category");
    std::printf(" %8s %8s %4s %10s %9s %9s %9s\n", "total", "device", "infl", "FLOP/step",
                "dp comm", "tp comm", "pp comm");
    for (const auto& cls : classes) {
        const RankEstimate& r = e.ranks[cls[0]];
        std::printf("%-14s", ranks_str(cls).c_str());
        for (int c = 0; c < kMemCategoryCount; ++c)
            std::printf(" %8s", mib(r.peak_bytes[c]).c_str());
        std::printf(" %8s %7s%s %4d %10s %9s %9s %9s\n", mib(r.total_peak_bytes).c_str(),
                    mib(r.device_peak_bytes).c_str(), r.device_peak_bytes > cap ? "!" : " ",
                    r.max_in_flight, si(r.flops_per_step, "").c_str(),
                    si(r.comm_dp_bytes + r.comm_embedding_bytes, "B").c_str(),
                    si(r.comm_tp_bytes, "B").c_str(), si(r.comm_pp_bytes, "B").c_str());
    }
    std::printf("\nbubble %.1f%% | step %.4g s | %s tokens/s | MFU %.1f%% | %s FLOP/step\n",
                100 * e.bubble_fraction, e.step_s, si(e.tokens_per_s, "").c_str(), 100 * e.mfu,
                si(e.flops_per_step, "").c_str());
    std::printf("step model: %s (%s)\n", e.step_model.c_str(), e.step_model_note.c_str());
    if (!blocks.empty()) {
        std::printf("balanced parallel.stages: [%s]\n",
                    str_join(blocks, ",", [](int b) { return std::to_string(b); }).c_str());
    } else if (!balanced.empty()) {
        std::printf("balanced parallel.stages: none fits (%s)\n", balanced.c_str());
    }
    std::printf("%s\n", e.fits ? "fits: yes" : ("fits: NO — " + e.reason).c_str());
    if (want_fits) fits_print(answers);
    return 0;
}

}  // namespace tessera
