// What each op of a step costs on a device, measured there by bench/op_sweep and stored as data
// (resources/devices/<device>_ops.json, embedded at build time): GEMMs (forward, with the GELU
// epilogue, backward) on a grid of (N, C, OC) and flash attention on a grid of (batch x heads, T)
// per head width, interpolated in log space; memory-bound ops as a fixed time plus a time per
// unit of size; the optimizer's passes per fp32 element; the host's time per kernel launch.
// The estimator prices the op trace the meta device records of a rank's step with it
// (docs/parallelism.md, "Step time"). GPUs: bf16 activations. A CPU's costs are the host's own:
// `tessera plan --calibrate` times its kernels (engine/plan/op_sweep.h) at the thread count a rank
// gets and stores them in the user's cache, keyed by CPU model, cores and threads (fp32).
#pragma once
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/parallel/layer_ops.h"

namespace tessera {

struct OpCosts {
    struct Linear {
        double fixed_s = 0, per_unit_s = 0;
        double at(double units) const { return fixed_s + per_unit_s * units; }
    };
    std::string device;          // as the driver names it ("NVIDIA H200")
    std::string produced_by;     // the bench, the GPU, the date
    std::string source;          // where it was read from (a resource, or a CPU calibration file)
    std::string cpu_model;       // a CPU's key: its model name, online cores, the OpenMP threads
    int cores = 0, threads = 0;  // the kernels ran on (0: a GPU)
    double launch_s = 0;         // host time per kernel launch
    std::vector<double> gemm_N, gemm_C, gemm_OC;
    std::vector<double> gemm_forward_s, gemm_forward_gelu_s, gemm_backward_s;  // [n][c][oc]
    // the backward through a GELU (the derivative in the input gradient's epilogue), where swept;
    // else priced as the backward and a separate gelu_backward over the input gradient
    std::vector<double> gemm_backward_gelu_s;
    // the forward plus a residual read as the GEMM's C operand, where swept; else priced as the
    // forward and a separate add_bias_residual
    std::vector<double> gemm_forward_residual_s;
    // the same GEMMs in FP8 (runtime.precision fp8, quantization included), where swept
    bool fp8_measured = false;
    std::vector<double> gemm_fp8_forward_s, gemm_fp8_forward_gelu_s, gemm_fp8_backward_s;
    // attention per head width, query heads per key/value head (grouped-query attention; {1}
    // where a sweep timed heads only), batch x heads and T
    std::vector<double> attn_head_dim, attn_kv_group{1}, attn_BH, attn_T;
    std::vector<double> attn_forward_s, attn_backward_s;  // [head_dim][kv_group][bh][t]
    std::array<Linear, (size_t)OpKind::count> linear{};   // memory-bound ops (units: op_units)
    std::array<bool, (size_t)OpKind::count> measured{};   // the ops the sweep timed
    Linear adamw, sum_squares, zero;                      // per fp32 element
    // A GPU's host: AdamW on its cores per fp32 element (optimizer offload), where measured
    Linear host_adamw;
    bool host_adamw_measured = false;
    // A CPU's collectives over Gloo (loopback): per call and per byte a rank sends; absent
    // (comm_measured false) for GPUs, whose links come from the device table
    Linear collective;
    bool comm_measured = false;
    // A CPU's wait at a collective reached from compute, beyond the aligned call: per
    // synchronising call, and per second of compute between calls (the ranks' spread); where swept
    Linear sync;

    // Whether the sweep timed this call's op (in its precision).
    bool prices(const OpCall& c) const {
        return measured[(size_t)c.kind] && (!c.fp8 || fp8_measured);
    }
    // Seconds one call takes on the device (tp_all_reduce: 0, communication is priced apart).
    double op_s(const OpCall& c) const;
    // The fastest rate of the swept forward GEMMs, FLOP/s (2 N C OC over its time; 0 unswept).
    double gemm_peak_flops() const;
};

// The size a memory-bound op's time grows with (elements, or bytes for copies): the unit of
// OpCosts::linear, the same in bench/op_sweep.
double op_units(const OpCall& c);
// The measured costs of a device by its table name ("H200"), or null where none were measured.
const OpCosts* op_costs_for(const std::string& device_name);
// What a costs file holds, for the message when one is not JSON.
inline constexpr const char* kOpCostsExpected = "per-op costs as bench/op_sweep writes them";
// Parses bench/op_sweep's JSON; throws InputError naming `where` and the missing or bad key.
OpCosts op_costs_parse(const std::string& json_text, const std::string& where);
// The same from JSON already parsed.
OpCosts op_costs_from_json(const nlohmann::json& j, const std::string& where);

// ---- a CPU's calibration

// This host as a calibration is keyed: /proc/cpuinfo's model name and the online cores.
struct CpuHost {
    std::string model;
    int cores = 1;
};
CpuHost cpu_host();
// The calibration file of this host at `threads` threads per rank, in devices_cache_dir()
// (engine/core/choice_cache.h): cpu_<model, lower case, [a-z0-9] runs joined by
// '-'>_<cores>c_<threads>t_ops.json
std::string cpu_costs_path(int threads);
// Whether a CPU's costs were timed on this host at `threads` threads: its own fields, not only
// its file's name (a copied file is not this host's).
bool op_costs_are_this_hosts(const OpCosts& costs, int threads);
// This host's costs at `threads` threads, or null where it was never calibrated (or the file
// names another host). Read once per process and again only when the file changes (its size
// and time); a bad file is an InputError naming it.
const OpCosts* op_costs_for_cpu(int threads);

}  // namespace tessera
