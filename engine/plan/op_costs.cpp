// Per-op costs: parsing bench/op_sweep's data and pricing one op call (see op_costs.h).
#include "engine/plan/op_costs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "engine/core/choice_cache.h"  // devices_cache_dir, device_file_slug
#include "engine/core/error.h"
#include "engine/core/json_text.h"

namespace tessera {

const char* device_ops_json(const std::string& name);  // generated from resources/devices

namespace {

// Where x falls on an ascending grid: the cell's lower index and the weight of its upper end,
// in log space; x outside the grid is clamped to its end.
struct Cell {
    size_t i = 0;
    double w = 0, clamped = 0;
};
Cell locate(const std::vector<double>& g, double x) {
    Cell c;
    c.clamped = std::clamp(x, g.front(), g.back());
    if (g.size() == 1) return c;
    size_t hi = std::upper_bound(g.begin(), g.end(), c.clamped) - g.begin();
    hi = std::clamp<size_t>(hi, 1, g.size() - 1);
    c.i = hi - 1;
    c.w = (std::log(c.clamped) - std::log(g[c.i])) / (std::log(g[hi]) - std::log(g[c.i]));
    return c;
}

// Multilinear interpolation of log(values) over the grids (row-major, the last grid fastest).
double interpolate(const std::vector<const std::vector<double>*>& grids,
                   const std::vector<Cell>& at, const std::vector<double>& values,
                   size_t base = 0) {
    const size_t D = grids.size();
    double acc = 0;
    for (size_t corner = 0; corner < (1u << D); ++corner) {
        double weight = 1;
        size_t idx = 0;
        for (size_t d = 0; d < D; ++d) {
            const bool up = (corner >> d) & 1;
            const size_t n = grids[d]->size();
            const size_t k = std::min(at[d].i + (up ? 1 : 0), n - 1);
            weight *= up ? at[d].w : 1 - at[d].w;
            idx = idx * n + k;
        }
        if (weight > 0) acc += weight * std::log(values.at(base + idx));
    }
    return std::exp(acc);
}

std::vector<double> doubles(const nlohmann::json& j, const char* key, const std::string& where) {
    if (!j.contains(key) || !j[key].is_array())
        throw InputError(str_cat(where, ": expected an array '", key, "'"));
    return j[key].get<std::vector<double>>();
}

OpCosts::Linear linear(const nlohmann::json& j, const std::string& key, const std::string& where) {
    if (!j.contains(key) || !j[key].contains("fixed_s") || !j[key].contains("per_unit_s"))
        throw InputError(str_cat(where, ": expected '", key, "' with fixed_s and per_unit_s"));
    return {j[key]["fixed_s"].get<double>(), j[key]["per_unit_s"].get<double>()};
}

}  // namespace

double op_units(const OpCall& c) {
    switch (c.kind) {
        case OpKind::gelu_forward:
        case OpKind::gelu_backward:
        case OpKind::relu_forward:
        case OpKind::relu_backward:
        case OpKind::accumulate:
        case OpKind::cast_weights:
        case OpKind::copy:
            return (double)c.N;
        default:
            return (double)c.N * (double)c.C;
    }
}

double OpCosts::gemm_peak_flops() const {
    double best = 0;
    const size_t nc = gemm_C.size(), noc = gemm_OC.size();
    for (size_t n = 0; n < gemm_N.size(); ++n)
        for (size_t c = 0; c < nc; ++c)
            for (size_t oc = 0; oc < noc; ++oc) {
                const size_t i = (n * nc + c) * noc + oc;
                if (i < gemm_forward_s.size() && gemm_forward_s[i] > 0)
                    best = std::max(best,
                                    2.0 * gemm_N[n] * gemm_C[c] * gemm_OC[oc] / gemm_forward_s[i]);
            }
    return best;
}

double OpCosts::op_s(const OpCall& c) const {
    switch (c.kind) {
        case OpKind::matmul_gelu_backward:
            if (c.fp8 || gemm_backward_gelu_s.empty()) {  // the GEMM, then the GELU's derivative
                OpCall g = c, d = c;
                g.kind = OpKind::matmul_backward;
                d.kind = OpKind::gelu_backward;
                d.N = c.N * c.C;
                return op_s(g) + op_s(d);
            }
            [[fallthrough]];
        case OpKind::matmul_residual_forward:
            if (c.kind == OpKind::matmul_residual_forward &&
                (c.fp8 || gemm_forward_residual_s.empty())) {  // the GEMM, then the residual
                OpCall g = c;
                g.kind = OpKind::matmul_forward;
                const OpCall r{OpKind::add_bias_residual, c.N, c.OC, 0, 0, 0, 0, c.dtype};
                return op_s(g) + op_s(r);
            }
            [[fallthrough]];
        case OpKind::matmul_forward:
        case OpKind::matmul_gelu_forward:
        case OpKind::matmul_backward: {
            const std::vector<Cell> at{locate(gemm_N, c.N), locate(gemm_C, c.C),
                                       locate(gemm_OC, c.OC)};
            const auto& v = c.kind == OpKind::matmul_forward
                                ? (c.fp8 ? gemm_fp8_forward_s : gemm_forward_s)
                            : c.kind == OpKind::matmul_gelu_forward
                                ? (c.fp8 ? gemm_fp8_forward_gelu_s : gemm_forward_gelu_s)
                            : c.kind == OpKind::matmul_gelu_backward ? gemm_backward_gelu_s
                            : c.kind == OpKind::matmul_residual_forward
                                ? gemm_forward_residual_s
                                : (c.fp8 ? gemm_fp8_backward_s : gemm_backward_s);
            TS_CHECK(!c.fp8 || fp8_measured,
                     "op_s: an FP8 GEMM on a device whose sweep has no FP8 rows");
            const double t = interpolate({&gemm_N, &gemm_C, &gemm_OC}, at, v);
            // outside the grid: in proportion to the work (a split backward's part: its share)
            return c.share * t * ((double)c.N * c.C * c.OC) /
                   (at[0].clamped * at[1].clamped * at[2].clamped);
        }
        case OpKind::attention_forward:
        case OpKind::attention_backward: {
            const double hd = (double)c.C / std::max<int64_t>(c.NH, 1), bh = (double)c.B * c.NH;
            size_t h = 0;  // the nearest measured head width (by ratio)
            for (size_t k = 1; k < attn_head_dim.size(); ++k)
                if (std::fabs(std::log(attn_head_dim[k] / hd)) <
                    std::fabs(std::log(attn_head_dim[h] / hd)))
                    h = k;
            // query heads per key/value head (OC: the key/value heads; 0 or NH: one each)
            const double group = c.OC > 0 ? std::max(1.0, (double)c.NH / c.OC) : 1.0;
            const std::vector<Cell> at{locate(attn_kv_group, group), locate(attn_BH, bh),
                                       locate(attn_T, (double)c.T)};
            const auto& v = c.kind == OpKind::attention_forward ? attn_forward_s : attn_backward_s;
            const double t = interpolate({&attn_kv_group, &attn_BH, &attn_T}, at, v,
                                         h * attn_kv_group.size() * attn_BH.size() * attn_T.size());
            return t * (bh / at[1].clamped) * std::pow((double)c.T / at[2].clamped, 2) *
                   (hd / attn_head_dim[h]);
        }
        case OpKind::tp_all_reduce:
            return 0.0;
        default:
            return c.share * linear[(size_t)c.kind].at(op_units(c));
    }
}

namespace {

OpCosts parse_costs(const nlohmann::json& j, const std::string& where) {
    OpCosts o;
    o.device = j.value("device", "");
    o.produced_by = j.value("produced_by", "");
    o.source = where;
    o.cpu_model = j.value("cpu_model", "");
    o.cores = j.value("cores", 0);
    o.threads = j.value("threads", 0);
    o.launch_s = j.value("launch_s", 0.0);
    if (!j.contains("gemm") || !j.contains("attention") || !j.contains("linear") ||
        !j.contains("optimizer"))
        throw InputError(
            str_cat(where, ": expected gemm, attention, linear and optimizer sections"));
    const auto& g = j["gemm"];
    o.gemm_N = doubles(g, "N", where), o.gemm_C = doubles(g, "C", where),
    o.gemm_OC = doubles(g, "OC", where);
    o.gemm_forward_s = doubles(g, "forward_s", where);
    o.gemm_forward_gelu_s = doubles(g, "forward_gelu_s", where);
    o.gemm_backward_s = doubles(g, "backward_s", where);
    const size_t ng = o.gemm_N.size() * o.gemm_C.size() * o.gemm_OC.size();
    for (const auto* v : {&o.gemm_forward_s, &o.gemm_forward_gelu_s, &o.gemm_backward_s})
        if (v->size() != ng)
            throw InputError(str_cat(where, ": gemm: expected ", ng, " times, found ", v->size()));
    // the fused ops' grids, absent from older sweeps (priced then as the GEMM and the other op)
    const std::pair<const char*, std::vector<double>*> optional[] = {
        {"backward_gelu_s", &o.gemm_backward_gelu_s},
        {"forward_residual_s", &o.gemm_forward_residual_s}};
    for (const auto& [key, v] : optional) {
        if (!g.contains(key)) continue;
        *v = doubles(g, key, where);
        if (v->size() != ng)
            throw InputError(
                str_cat(where, ": gemm: expected ", ng, " ", key, " times, found ", v->size()));
    }
    if (j.contains("gemm_fp8")) {  // on the same grid
        const auto& f = j["gemm_fp8"];
        o.gemm_fp8_forward_s = doubles(f, "forward_s", where);
        o.gemm_fp8_forward_gelu_s = doubles(f, "forward_gelu_s", where);
        o.gemm_fp8_backward_s = doubles(f, "backward_s", where);
        for (const auto* v :
             {&o.gemm_fp8_forward_s, &o.gemm_fp8_forward_gelu_s, &o.gemm_fp8_backward_s})
            if (v->size() != ng)
                throw InputError(
                    str_cat(where, ": gemm_fp8: expected ", ng, " times, found ", v->size()));
        o.fp8_measured = true;
    }
    const auto& a = j["attention"];
    o.attn_head_dim = doubles(a, "head_dim", where), o.attn_BH = doubles(a, "BH", where),
    o.attn_T = doubles(a, "T", where);
    if (a.contains("kv_group")) o.attn_kv_group = doubles(a, "kv_group", where);
    if (o.attn_kv_group.empty() ||
        std::any_of(o.attn_kv_group.begin(), o.attn_kv_group.end(), [](double g) { return g < 1; }))
        throw InputError(str_cat(where, ": attention: kv_group must list groups of 1 or more"));
    o.attn_forward_s = doubles(a, "forward_s", where),
    o.attn_backward_s = doubles(a, "backward_s", where);
    const size_t na =
        o.attn_head_dim.size() * o.attn_kv_group.size() * o.attn_BH.size() * o.attn_T.size();
    for (const auto* v : {&o.attn_forward_s, &o.attn_backward_s})
        if (v->size() != na)
            throw InputError(
                str_cat(where, ": attention: expected ", na, " times, found ", v->size()));
    for (int k = 0; k < (int)OpKind::count; ++k) {
        const OpKind kind = (OpKind)k;
        switch (kind) {
            case OpKind::matmul_forward:
            case OpKind::matmul_gelu_forward:
            case OpKind::matmul_backward:
            case OpKind::attention_forward:
            case OpKind::attention_backward:
            case OpKind::tp_all_reduce:
                o.measured[k] = true;
                break;
            case OpKind::matmul_gelu_backward:     // its own grid, or the GEMM and gelu_backward
            case OpKind::matmul_residual_forward:  // its own grid, or the GEMM and the add
                break;
            case OpKind::cross_entropy:
                // sweeps from before it was one op timed its two passes: the statistics, then
                // the loss and gradient; their sum is the op as it ran then
                if (!j["linear"].contains("cross_entropy") &&
                    j["linear"].contains("cross_entropy_stats") &&
                    j["linear"].contains("cross_entropy_loss")) {
                    const OpCosts::Linear st =
                        linear(j["linear"], "cross_entropy_stats", where + ": linear");
                    const OpCosts::Linear lo =
                        linear(j["linear"], "cross_entropy_loss", where + ": linear");
                    o.linear[k] = {st.fixed_s + lo.fixed_s, st.per_unit_s + lo.per_unit_s};
                    o.measured[k] = true;
                    break;
                }
                [[fallthrough]];
            default:
                // an op the sweep did not time (one added since) leaves the step to the
                // efficiency model (the estimator checks measured[])
                if (!j["linear"].contains(op_kind_name(kind))) break;
                o.linear[k] = linear(j["linear"], op_kind_name(kind), where + ": linear");
                o.measured[k] = true;
        }
    }
    o.measured[(size_t)OpKind::matmul_gelu_backward] =
        !o.gemm_backward_gelu_s.empty() || o.measured[(size_t)OpKind::gelu_backward];
    o.measured[(size_t)OpKind::matmul_residual_forward] =
        !o.gemm_forward_residual_s.empty() || o.measured[(size_t)OpKind::add_bias_residual];
    o.adamw = linear(j["optimizer"], "adamw", where + ": optimizer");
    o.sum_squares = linear(j["optimizer"], "sum_squares", where + ": optimizer");
    o.zero = linear(j["optimizer"], "zero", where + ": optimizer");
    if (j.contains("host_optimizer")) {
        o.host_adamw = linear(j["host_optimizer"], "adamw", where + ": host_optimizer");
        o.host_adamw_measured = true;
    }
    if (j.contains("comm")) {
        o.collective = linear(j["comm"], "collective", where + ": comm");
        o.comm_measured = true;
        if (j["comm"].contains("sync")) o.sync = linear(j["comm"], "sync", where + ": comm");
    }
    return o;
}

}  // namespace

OpCosts op_costs_parse(const std::string& text, const std::string& where) {
    return op_costs_from_json(json_parse_text(text, where, kOpCostsExpected), where);
}

OpCosts op_costs_from_json(const nlohmann::json& j, const std::string& where) {
    if (!j.is_object()) throw InputError(str_cat(where, ": expected a JSON object"));
    try {
        return parse_costs(j, where);
    } catch (const nlohmann::json::exception& e) {  // a key of the wrong type
        throw InputError(str_cat(where, ": ", e.what()));
    }
}

const OpCosts* op_costs_for(const std::string& device_name) {
    static std::mutex mu;
    static std::map<std::string, std::unique_ptr<OpCosts>> cache;
    std::string key = device_name;
    for (char& ch : key) ch = (char)std::tolower((unsigned char)ch);
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second.get();
    const char* text = device_ops_json(key);
    auto& slot = cache[key];
    if (text)
        slot = std::make_unique<OpCosts>(
            op_costs_parse(text, "resources/devices/" + key + "_ops.json"));
    return slot.get();
}

// ------------------------------------------------------------------------------------------
// A CPU's calibration

CpuHost cpu_host() {
    static const CpuHost host = [] {
        CpuHost h;
        h.cores = (int)std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
        std::ifstream in("/proc/cpuinfo");
        std::string line;
        while (std::getline(in, line))
            if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
                h.model = line.substr(line.find(':') + 1);
                h.model.erase(0, h.model.find_first_not_of(" \t"));
                break;
            }
        if (h.model.empty()) h.model = "unknown cpu";
        return h;
    }();
    return host;
}

std::string cpu_costs_path(int threads) {
    const CpuHost h = cpu_host();
    return str_cat(devices_cache_dir(), "/cpu_", device_file_slug(h.model), "_", h.cores, "c_",
                   threads, "t_ops.json");
}

bool op_costs_are_this_hosts(const OpCosts& costs, int threads) {
    const CpuHost h = cpu_host();
    return costs.cpu_model == h.model && costs.cores == h.cores && costs.threads == threads;
}

const OpCosts* op_costs_for_cpu(int threads) {
    struct Entry {
        int64_t size = -1, mtime_ns = -1;
        std::unique_ptr<OpCosts> costs;
    };
    static std::mutex mu;
    static std::map<std::string, Entry> cache;
    const std::string path = cpu_costs_path(threads);
    struct stat st {};
    std::lock_guard<std::mutex> lock(mu);
    Entry& e = cache[path];
    if (stat(path.c_str(), &st) != 0) {
        e = Entry{};
        return nullptr;
    }
    const int64_t mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (e.size == (int64_t)st.st_size && e.mtime_ns == mtime_ns) return e.costs.get();
    const std::optional<std::string> text = text_file_read(path);
    if (!text) {
        e = Entry{};
        return nullptr;
    }
    auto costs = std::make_unique<OpCosts>(op_costs_parse(*text, path));
    const bool ours = op_costs_are_this_hosts(*costs, threads);
    e.size = (int64_t)st.st_size, e.mtime_ns = mtime_ns;
    e.costs = ours ? std::move(costs) : nullptr;
    return e.costs.get();
}

}  // namespace tessera
