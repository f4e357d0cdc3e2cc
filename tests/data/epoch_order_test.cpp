// data.order: epoch. The permutation itself (engine/data/epoch_order.h), then the run's
// DataSource as the trainers call it: every rank's share of every step, for several window
// counts, global batches and data-parallel splits, must read each window of the train shard
// exactly once per epoch; the order must be a pure function of (seed, step, sample); the default
// order (random) and the evaluation batches must be what they were before the key existed.
#include "engine/data/epoch_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "data_test_util.h"
#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/data/shard.h"
#include "engine/data/token_sampler.h"
#include "engine/train/data_source.h"

using namespace tessera;

namespace {

constexpr int kSeqLen = 8;

// A shard whose token i is i: window w's first input is w * kSeqLen. `extra` tokens past the last
// whole window (fewer than kSeqLen) belong to no window.
std::vector<uint32_t> counting_tokens(int64_t n_windows, int extra) {
    std::vector<uint32_t> t((size_t)(n_windows * kSeqLen + 1 + extra));
    std::iota(t.begin(), t.end(), 0u);
    return t;
}

// A run config reading `shard` (ids up to 2^20: a Llama-family vocabulary holds them) with the
// given batch layout and order.
RunConfig config_for(const std::string& shard, const std::string& order, int micro_batch,
                     int grad_accum, int dp, uint64_t seed = 7) {
    RunConfig cfg;
    cfg.model.preset = "llama-tiny";
    cfg.model.seq_len = kSeqLen;
    cfg.model.vocab_size = 1 << 20;
    cfg.data.train = shard;
    cfg.data.order = order;
    cfg.train.micro_batch = micro_batch;
    cfg.train.grad_accum = grad_accum;
    cfg.train.seed = seed;
    cfg.parallel.dp = dp;
    return cfg;
}

// The windows a run reads in its first `steps` steps, indexed by global sample (step x global
// batch + sample), asking the DataSource as the rank loop does: micro-batch m of DP rank d reads
// samples [(m x dp + d) x micro_batch, ... + micro_batch) of the step. Also checks each row is a
// whole window with its shifted targets.
std::vector<int64_t> windows_read(const DataSource& ds, const RunConfig& cfg, int64_t steps) {
    const int mb = cfg.train.micro_batch, accum = cfg.train.grad_accum, dp = cfg.parallel.dp;
    const int64_t global = (int64_t)mb * accum * dp;
    std::vector<int64_t> seen((size_t)(steps * global), -1);
    for (int64_t step = 0; step < steps; ++step)
        for (int m = 0; m < accum; ++m)
            for (int d = 0; d < dp; ++d) {
                const int64_t first = ((int64_t)m * dp + d) * mb;
                Batch b = ds.train_batch(step, first, mb);
                EXPECT_EQ(b.batch_size, mb);
                for (int r = 0; r < mb; ++r) {
                    const int32_t* in = b.inputs.data() + (size_t)r * kSeqLen;
                    const int32_t* tg = b.targets.data() + (size_t)r * kSeqLen;
                    EXPECT_EQ(in[0] % kSeqLen, 0)
                        << "not a fixed window: starts at token " << in[0];
                    for (int t = 0; t < kSeqLen; ++t) {
                        EXPECT_EQ(in[t], in[0] + t);
                        EXPECT_EQ(tg[t], in[0] + t + 1);
                    }
                    seen[(size_t)(step * global + first + r)] = in[0] / kSeqLen;
                }
            }
    return seen;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// the permutation

TEST(EpochOrder, EachEpochIsAPermutationOfThePositions) {
    for (int64_t n : {1, 2, 3, 4, 5, 7, 16, 17, 100, 1000, 4097}) {
        for (int64_t epoch : {0, 1, 9}) {
            std::vector<int> hits((size_t)n, 0);
            for (int64_t p = 0; p < n; ++p) {
                int64_t w = epoch_order_permute(99, epoch, p, n);
                ASSERT_GE(w, 0);
                ASSERT_LT(w, n);
                hits[(size_t)w]++;
            }
            EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), n)
                << "n " << n << " epoch " << epoch;
        }
    }
}

TEST(EpochOrder, EpochsAndSeedsGiveDifferentShuffles) {
    const int64_t n = 1000;
    auto order = [&](uint64_t seed, int64_t epoch) {
        std::vector<int64_t> o;
        for (int64_t p = 0; p < n; ++p) o.push_back(epoch_order_permute(seed, epoch, p, n));
        return o;
    };
    auto agree = [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
        int64_t k = 0;
        for (size_t i = 0; i < a.size(); ++i) k += a[i] == b[i];
        return k;
    };
    std::vector<int64_t> identity(n);
    std::iota(identity.begin(), identity.end(), 0);
    const auto e0 = order(5, 0), e1 = order(5, 1), e2 = order(5, 2), other_seed = order(6, 0);
    // a shuffle agrees with another in about one place of n; allow a few
    EXPECT_LT(agree(e0, identity), 10);
    EXPECT_LT(agree(e0, e1), 10);
    EXPECT_LT(agree(e1, e2), 10);
    EXPECT_LT(agree(e0, other_seed), 10);
    // small sets: not every epoch the same order
    std::set<std::vector<int64_t>> small;
    for (int64_t e = 0; e < 8; ++e) {
        std::vector<int64_t> o;
        for (int64_t p = 0; p < 5; ++p) o.push_back(epoch_order_permute(5, e, p, 5));
        small.insert(o);
    }
    EXPECT_GT(small.size(), 4u);
}

TEST(EpochOrder, GlobalSampleIndexRunsAcrossSteps) {
    // g = step x global_batch + sample; epoch g / n, position g % n
    EXPECT_EQ(epoch_order_item(3, 0, 5, 8, 10), epoch_order_permute(3, 0, 5, 10));
    EXPECT_EQ(epoch_order_item(3, 1, 1, 8, 10), epoch_order_permute(3, 0, 9, 10));
    EXPECT_EQ(epoch_order_item(3, 1, 2, 8, 10), epoch_order_permute(3, 1, 0, 10));
    EXPECT_EQ(epoch_order_item(3, 7, 3, 8, 3), epoch_order_permute(3, 19, 2, 3));  // g 59
    EXPECT_DOUBLE_EQ(epoch_order_epochs(3, 8, 10), 2.4);
    EXPECT_DOUBLE_EQ(epoch_order_epochs(0, 8, 10), 0.0);
    // a sample outside its step's batch is a caller's bug, not a quiet overlap with the next step
    EXPECT_THROW(epoch_order_item(3, 0, 8, 8, 10), Error);
}

TEST(EpochOrder, TheDocumentedRuleIsPinned) {
    // values from tests/data/epoch_order_ref.py (the rule as docs/data.md "Reading order" writes
    // it), so that a change of the rule (which would change every epoch-order run) is noticed
    EXPECT_EQ(epoch_order_permute(1337, 0, 0, 1000), 22);
    EXPECT_EQ(epoch_order_permute(1337, 0, 1, 1000), 330);
    EXPECT_EQ(epoch_order_permute(1337, 3, 999, 1000), 490);
    EXPECT_EQ(epoch_order_permute(42, 2, 7, 10), 2);
}

// ------------------------------------------------------------------------------------------
// the DataSource the trainers use

TEST(EpochOrderData, EveryWindowOncePerEpochOverAllRanks) {
    test::TempDir dir;
    struct Case {
        int64_t n_windows;
        int extra_tokens;
        int micro_batch, grad_accum, dp;
    };
    const Case cases[] = {
        {12, 0, 2, 2, 1},  // 12 windows, global batch 4: three steps an epoch
        {10, 3, 2, 1, 2},  // not divisible by the global batch (4); a partial window at the end
        {13, 7, 1, 3, 2},  // global batch 6 over two ranks
        {25, 1, 3, 2, 4},  // global batch 24 over four ranks
        {5, 0, 2, 2, 2},   // fewer windows (5) than the global batch (8): epochs wrap inside a step
        {1, 2, 2, 1, 1},   // one window
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(testing::Message() << c.n_windows << " windows, micro_batch " << c.micro_batch
                                        << " x grad_accum " << c.grad_accum << " x dp " << c.dp);
        const std::string shard = dir.file("w" + std::to_string(c.n_windows) + ".bin");
        shard_write(shard, counting_tokens(c.n_windows, c.extra_tokens));
        RunConfig cfg = config_for(shard, "epoch", c.micro_batch, c.grad_accum, c.dp);
        auto ds = data_source_open(cfg);
        ASSERT_EQ(ds->train_set_size(), c.n_windows);
        const int64_t global = (int64_t)c.micro_batch * c.grad_accum * c.dp;
        const int64_t epochs = 4;
        const int64_t steps = (epochs * c.n_windows + global - 1) / global + 1;
        std::vector<int64_t> seen = windows_read(*ds, cfg, steps);
        std::vector<std::vector<int64_t>> orders;
        for (int64_t e = 0; (e + 1) * c.n_windows <= (int64_t)seen.size(); ++e) {
            std::vector<int64_t> o(seen.begin() + e * c.n_windows,
                                   seen.begin() + (e + 1) * c.n_windows);
            std::vector<int64_t> sorted = o;
            std::sort(sorted.begin(), sorted.end());
            std::vector<int64_t> all((size_t)c.n_windows);
            std::iota(all.begin(), all.end(), 0);
            EXPECT_EQ(sorted, all) << "epoch " << e << " does not read every window exactly once";
            orders.push_back(o);
        }
        ASSERT_GE(orders.size(), (size_t)epochs);
        if (c.n_windows >= 10) {
            EXPECT_NE(orders[0], orders[1]) << "epochs 0 and 1 read the windows in the same order";
            EXPECT_NE(orders[1], orders[2]);
        }
        // the same samples in one call per step (one rank, no accumulation) are the same windows
        RunConfig one = config_for(shard, "epoch", (int)global, 1, 1);
        auto ds_one = data_source_open(one);
        EXPECT_EQ(windows_read(*ds_one, one, steps), seen);
    }
}

TEST(EpochOrderData, AStepReadsTheSameInAFreshSourceAsInALongRun) {
    test::TempDir dir;
    const std::string shard = dir.file("t.bin");
    shard_write(shard, counting_tokens(37, 2));
    RunConfig cfg = config_for(shard, "epoch", 2, 3, 2);  // global batch 12
    auto long_run = data_source_open(cfg);
    std::vector<Batch> batches;
    for (int64_t step = 0; step < 20; ++step) batches.push_back(long_run->train_batch(step, 4, 2));
    auto fresh = data_source_open(cfg);  // as after a resume at step 17
    for (int64_t step : {17, 3, 19}) {
        Batch b = fresh->train_batch(step, 4, 2);
        EXPECT_EQ(b.inputs, batches[(size_t)step].inputs) << "step " << step;
        EXPECT_EQ(b.targets, batches[(size_t)step].targets) << "step " << step;
    }
    // and the seed chooses the order
    auto reseeded = data_source_open(config_for(shard, "epoch", 2, 3, 2, 8));
    int differ = 0;
    for (int64_t step = 0; step < 20; ++step)
        differ += reseeded->train_batch(step, 4, 2).inputs != batches[(size_t)step].inputs;
    EXPECT_GT(differ, 10);
}

TEST(EpochOrderData, RandomOrderAndEvaluationAreUnchanged) {
    test::TempDir dir;
    const std::string shard = dir.file("t.bin");
    const std::vector<uint32_t> tokens = counting_tokens(500, 5);
    shard_write(shard, tokens);
    RunConfig random_cfg = config_for(shard, "random", 4, 2, 2);
    auto random_ds = data_source_open(random_cfg);
    auto epoch_ds = data_source_open(config_for(shard, "epoch", 4, 2, 2));
    for (int64_t step : {0, 1, 250}) {
        // random: the sampler's windows for (seed, step, global sample), as before data.order
        Batch b = random_ds->train_batch(step, 8, 4);
        std::vector<int32_t> in(4 * kSeqLen), tg(4 * kSeqLen);
        sample_token_batch(tokens, random_cfg.train.seed, step, 8, 4, kSeqLen, in.data(),
                           tg.data());
        EXPECT_EQ(b.inputs, in) << "step " << step;
        EXPECT_EQ(b.targets, tg) << "step " << step;
        EXPECT_NE(b.inputs, epoch_ds->train_batch(step, 8, 4).inputs);  // the orders do differ
        // evaluation: the same random windows of val (here the train shard) in both orders
        EXPECT_EQ(epoch_ds->eval_batch(step, 8, 4).inputs,
                  random_ds->eval_batch(step, 8, 4).inputs);
    }
    // a pinned random window (the rule of docs/data.md "Sampling GPT batches")
    EXPECT_EQ(random_ds->train_batch(7, 0, 1).inputs[0],
              token_sampler_start(random_cfg.train.seed, 7, 0, (int64_t)tokens.size(), kSeqLen));
}

TEST(EpochOrderData, ShardShorterThanOneWindowIsTheSameInputError) {
    test::TempDir dir;
    const std::string shard = dir.file("short.bin");
    shard_write(shard,
                std::vector<uint32_t>(kSeqLen, 1));  // seq_len tokens: no window of seq_len + 1
    std::string messages[2];
    int i = 0;
    for (const char* order : {"random", "epoch"}) {
        try {  // refused when the data is opened, before the first step, in either order
            data_source_open(config_for(shard, order, 2, 1, 1));
            ADD_FAILURE() << order << ": no error for a shard of " << kSeqLen << " tokens";
        } catch (const InputError& e) {
            messages[i] = e.what();
        }
        ++i;
    }
    EXPECT_NE(messages[0].find(shard + ": 8 tokens, expected at least seq_len + 1 = 9"),
              std::string::npos)
        << messages[0];
    EXPECT_EQ(messages[1], messages[0]);
}
