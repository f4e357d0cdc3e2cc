// Balanced pipeline partition (see partitioner.h): DP over contiguous block ranges.
#include "engine/plan/partitioner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/error.h"

namespace tessera {

std::vector<int> balance_blocks(int n_blocks, const ChunkCostModel& m) {
    const int K = (int)m.fixed_s.size();
    TS_CHECK(K >= 1 && (int)m.mem_base.size() == K && (int)m.mem_per_block.size() == K,
             "chunk cost model needs one entry per chunk");
    if (n_blocks < K)
        throw InputError(str_cat("parallel.stages: ", n_blocks, " blocks cannot fill ", K,
                                 " chunks (each needs at least one block)"));
    const double inf = std::numeric_limits<double>::infinity();
    auto fits = [&](int k, int n) {
        return m.mem_base[k] + m.mem_per_block[k] * n <= (double)m.capacity_bytes;
    };
    // best[k][j]: the smallest slowest-chunk time placing blocks [0, j) on chunks 0..k
    std::vector<std::vector<double>> best(K, std::vector<double>(n_blocks + 1, inf));
    std::vector<std::vector<int>> from(K, std::vector<int>(n_blocks + 1, -1));
    for (int j = 1; j <= n_blocks; ++j)
        if (fits(0, j)) best[0][j] = m.block_s * j + m.fixed_s[0];
    for (int k = 1; k < K; ++k)
        for (int j = k + 1; j <= n_blocks; ++j)
            for (int i = k; i < j; ++i) {
                if (best[k - 1][i] == inf || !fits(k, j - i)) continue;
                double t = std::max(best[k - 1][i], m.block_s * (j - i) + m.fixed_s[k]);
                if (t < best[k][j]) best[k][j] = t, from[k][j] = i;
            }
    if (best[K - 1][n_blocks] == inf) {
        // the reason: the chunk that overflows in the even split, with its bytes
        int worst_k = 0;
        double worst_over = -inf, need = 0;
        for (int k = 0; k < K; ++k) {
            int n = n_blocks / K + (k >= K - n_blocks % K ? 1 : 0);
            double mem = m.mem_base[k] + m.mem_per_block[k] * n;
            if (mem - m.capacity_bytes > worst_over)
                worst_over = mem - m.capacity_bytes, worst_k = k, need = mem;
        }
        double one = m.mem_base[worst_k] + m.mem_per_block[worst_k];
        throw InputError(str_cat("no split of ", n_blocks, " blocks over ", K, " chunks fits in ",
                                 m.capacity_bytes, " bytes per device: chunk ", worst_k, " needs ",
                                 (int64_t)need, " bytes with an even split and ", (int64_t)one,
                                 " with a single block (raise pp, tp, zero or recompute, or lower "
                                 "micro_batch)"));
    }
    std::vector<int> out(K);
    int j = n_blocks;
    for (int k = K - 1; k > 0; --k) {
        int i = from[k][j];
        out[k] = j - i;
        j = i;
    }
    out[0] = j;
    return out;
}

ChunkCostModel balance_cost_model(const RunConfig& cfg, const DeviceSpec& dev) {
    const ParallelConfig& par = cfg.parallel;
    const int pp = par.pp, v = par.virtual_stages, K = pp * v;
    // probe: every chunk holds n blocks (n_layer = K n); stage memory is affine in its blocks
    auto probe = [&](int n) {
        RunConfig c = cfg;
        c.model.n_layer = K * n;
        c.parallel.stages.assign(K, n);
        if (pp * par.tp * par.dp == 1) c.parallel.dp = 1;
        return estimate_plan(c, dev);
    };
    PlanEstimate a = probe(2), b = probe(3);
    ChunkCostModel m;
    m.capacity_bytes = plan_rank_capacity(a);
    m.fixed_s.assign(K, 0.0);
    m.mem_base.assign(K, 0.0);
    m.mem_per_block.assign(K, 0.0);
    // the stage's slowest rank (TP ranks differ only by their vocabulary shard)
    std::vector<double> ta(pp, 0), tb(pp, 0), ma(pp, 0), mb(pp, 0);
    for (const auto& r : a.ranks) {
        ta[r.coord.pp] = std::max(ta[r.coord.pp], r.compute_s);
        ma[r.coord.pp] = std::max(ma[r.coord.pp], (double)r.device_peak_bytes);
    }
    for (const auto& r : b.ranks) {
        tb[r.coord.pp] = std::max(tb[r.coord.pp], r.compute_s);
        mb[r.coord.pp] = std::max(mb[r.coord.pp], (double)r.device_peak_bytes);
    }
    // per stage: time = v * block_s * n + fixed; spread over its v chunks
    m.block_s = (tb[pp - 1] - ta[pp - 1] + tb[0] - ta[0]) / (2.0 * v);
    for (int s = 0; s < pp; ++s) {
        double per_block_t = (tb[s] - ta[s]) / v;
        double fixed = ta[s] - 2 * v * per_block_t;
        double per_block_m = (mb[s] - ma[s]) / v;
        double base = ma[s] - 2 * v * per_block_m;
        for (int c = 0; c < v; ++c) {
            int k = c * pp + s;
            m.mem_per_block[k] = per_block_m;
            m.mem_base[k] = base / v;  // v > 1: each chunk gets an equal share of the stage's base
        }
        // fixed time (embedding, head) belongs to the first / last global chunk
        if (s == 0) m.fixed_s[0] += std::max(0.0, fixed);
        if (s == pp - 1 && (pp > 1 || v == 1))
            m.fixed_s[K - 1] += pp > 1 ? std::max(0.0, fixed) : 0.0;
    }
    if (pp == 1 && v == 1) m.fixed_s[0] = std::max(0.0, ta[0] - 2 * (tb[0] - ta[0]));
    return m;
}

std::vector<int> balance_stages(const RunConfig& cfg, const DeviceSpec& dev) {
    ChunkCostModel m = balance_cost_model(cfg, dev);
    std::vector<int> blocks = balance_blocks(cfg.model.n_layer, m);
    RunConfig c = cfg;
    c.parallel.stages = blocks;
    PlanEstimate e = estimate_plan(c, dev);
    if (!e.fits) throw InputError(str_cat("the balanced split does not fit: ", e.reason));
    return blocks;
}

}  // namespace tessera
