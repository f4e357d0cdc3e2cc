// The per-op cost sweep (engine/plan/op_costs.h reads what it writes), one for every device: the
// layers' own ops (LayerOps) timed on a grid — GEMM forward, forward with the GELU epilogue and
// backward over (N, C, OC); attention forward and backward over (query heads per key/value
// head, batch x heads, T) per head width; every memory-bound op at a few sizes, fitted as fixed +
// per-unit time; the optimizer's passes per fp32 element. A device brings its buffers, its clock
// and its optimizer kernels (OpSweepDevice) and a grid sized for it: bench/op_sweep does the GPU
// (CUDA events, the H200's grid); op_sweep_cpu is the CPU's, run by `tessera plan --calibrate`
// (wall clock, two passes, a grid for the small models CPU ranks train) and stored per host
// (op_costs.h).
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/parallel/layer_ops.h"

namespace tessera {

struct OpSweepGrid {
    std::vector<int> gemm_N, gemm_C, gemm_OC;
    std::vector<int> attn_BH, attn_T, attn_head_dim;  // heads: 8 per sample (4 when BH < 8)
    // query heads per key/value head (grouped-query attention); {1}: heads only, and the file
    // has no kv_group axis
    std::vector<int> attn_kv_group{1};
    std::vector<std::pair<int, int>> rows_cols;   // (N, C) of the memory-bound ops
    std::vector<std::pair<int, int>> rows_vocab;  // (N, padded vocabulary) of the classifier
    std::vector<int64_t> optimizer_elems;         // fp32 elements of the optimizer's passes
    int seq = 1024;                               // T of the ops that take (B, T) rows
};
// bench/op_sweep's grid for a data-centre GPU (GPT-2 small to xl shapes)
OpSweepGrid op_sweep_grid_gpu();
// the CPU's: the shapes of the models CPU ranks train (tens to a few hundred wide); GEMMs and
// attention beyond it are priced in proportion to their work (OpCosts::op_s)
OpSweepGrid op_sweep_grid_cpu();

struct OpSweepDevice {
    LayerOps& ops;
    // a buffer kept for the sweep: random contents (never time on zeros), or zeros (token ids)
    std::function<void*(size_t bytes, bool zeros)> buffer;
    std::function<double(const std::function<void()>&)> time_s;  // seconds per run of f
    std::function<void(float* p, const float* g, float* m, float* v, int64_t n)> adamw;
    std::function<void(const float* g, int64_t n)> sum_squares;
    std::function<void(float* g, int64_t n)> zero;
    std::function<void(const char* what)> progress;  // may be empty
    // GPUs: the same ops with FP8 GEMMs (runtime.precision fp8): the GEMM grid is timed again
    // through them into the "gemm_fp8" section (the shapes Fp8Workspace leaves in bf16 run bf16)
    LayerOps* gemm_fp8 = nullptr;
};

// Least squares time = fixed_s + per_unit_s · units over (units, seconds) points, through the
// origin when the intercept fits below zero, flat when the slope does; the points kept beside.
nlohmann::json op_sweep_fit_linear(const std::vector<std::pair<double, double>>& pts);
// The gemm, attention, linear and optimizer sections of the costs file.
nlohmann::json op_sweep_run(OpSweepDevice& dev, const OpSweepGrid& grid);
// Keeps, shape by shape and point by point, the faster of two sweeps of one grid (refitting the
// linear fits). Both must be of one grid (op_sweep_grid_difference empty).
void op_sweep_keep_faster(nlohmann::json& into, const nlohmann::json& other);
// How `other`'s grid differs from `into`'s, in words (the first difference: an axis of the GEMM
// or attention grid, a memory-bound or optimizer op missing or timed at other sizes); empty when
// they are sweeps of one grid, so op_sweep_keep_faster may merge them.
std::string op_sweep_grid_difference(const nlohmann::json& into, const nlohmann::json& other);

// ---- the host's cores, for a GPU's optimizer offload

// AdamW on this host's cores as ParamStore runs it for offloaded optimizer state
// (engine/kernels/cpu/adamw.cpp at every OpenMP thread), over sizes far beyond the caches
// (16M and 128M fp32 elements, DRAM-bound like a real model's): {"adamw": fit, "threads": n}.
// bench/op_sweep writes it into a GPU's costs file as "host_optimizer".
nlohmann::json op_sweep_host_optimizer();

// ---- the CPU

// Times the CPU kernels at `threads` OpenMP threads (the count a rank gets: threads_configure)
// and returns the whole costs file: the sections above plus the host's key (cpu_model, cores,
// threads) and produced_by. Leaves the process at `threads` threads.
nlohmann::json op_sweep_cpu(int threads, const std::function<void(const char*)>& progress = {});

}  // namespace tessera
