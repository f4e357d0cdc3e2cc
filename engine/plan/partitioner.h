// Balanced pipeline partition: the contiguous split of the transformer blocks over the pp x
// virtual_stages model chunks that minimises the slowest stage's predicted time while every
// stage fits in device memory (dynamic programming over layer ranges). The studio calls it to
// fill parallel.stages; `tessera plan` reports it.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/config/config.h"
#include "engine/plan/estimator.h"

namespace tessera {

// Per chunk k (global chunk order): time(n blocks) = block_s * n + fixed_s[k] (the embedding on
// chunk 0, the head on the last), memory(n) = mem_base[k] + mem_per_block[k] * n bytes.
struct ChunkCostModel {
    double block_s = 0;
    std::vector<double> fixed_s;
    std::vector<double> mem_base, mem_per_block;
    int64_t capacity_bytes = 0;
};

// The blocks per chunk (each >= 1, summing to n_blocks) minimising max_k time_k subject to
// memory_k <= capacity. Throws InputError with the reason when no split fits (naming the chunk
// and bytes needed by the best-fitting split) or when n_blocks < chunks.
std::vector<int> balance_blocks(int n_blocks, const ChunkCostModel& m);

// The model for a config (probing estimate_plan at two chunk sizes: memory is affine in the
// blocks a stage holds) and its balanced split; the result is re-checked with estimate_plan.
ChunkCostModel balance_cost_model(const RunConfig& cfg, const DeviceSpec& dev);
std::vector<int> balance_stages(const RunConfig& cfg, const DeviceSpec& dev);

}  // namespace tessera
