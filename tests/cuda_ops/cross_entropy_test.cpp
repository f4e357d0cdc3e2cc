// Vocab-parallel fused cross-entropy against the CPU softmax + cross-entropy: one shard, and the
// vocabulary split in shards whose statistics are combined as TP's all-reduces combine them;
// rows padded like the GPU head's (padding ignored, its gradient zeroed).
#include "engine/kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "engine/kernels/cuda/cross_entropy.cuh"
#include "tests/cuda_ops/cuda_test_util.h"

using namespace tessera;
using namespace tessera::test;

template <typename T>
class CrossEntropyCuda : public CudaTest {};
using ActTypes = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(CrossEntropyCuda, ActTypes);

struct CeCase {
    int N, V, shards;
    bool pad =
        false;  // rows padded to a multiple of 128 columns (16-byte accesses), as the head does
};

template <typename T>
static void check_ce(const CeCase& cs) {
    const int N = cs.N, V = cs.V;
    std::mt19937 rng(N * 17 + V + cs.shards);
    auto logits = rand_vec<T>((size_t)N * V, rng, -6.0f, 6.0f);
    std::vector<int32_t> tgt(N);
    std::uniform_int_distribution<int> td(0, V - 1);
    for (int n = 0; n < N; ++n) tgt[n] = (n % 5 == 3) ? -1 : td(rng);  // some ignored rows
    tgt[0] = V - 1;
    const float dloss = 1.0f / 29.0f;
    std::vector<float> probs = logits, losses(N);
    cross_entropy_forward(losses.data(), probs.data(), tgt.data(), N, V);
    cross_entropy_backward(probs.data(), tgt.data(), dloss, N, V);

    DevBuf<int> d_tgt(N);
    d_tgt.set_raw(tgt);
    // per shard: columns [v0, v0 + Vs) copied into their own (N, Vs) array; each shard's one
    // pass gives its (max, sumexp, target term); the shards are combined as tensor parallelism
    // does: all-reduce(max), ce_rescale_cuda, all-reduce(sum) (the reductions on the host)
    std::vector<std::unique_ptr<DevBuf<T>>> shard_logits;
    std::vector<long> v0s;
    std::vector<int> lds, vss;
    std::vector<std::vector<float>> smax, ssum, sterm;
    std::vector<float> gmax(N, -INFINITY), gsum(N, 0.0f), gterm(N, 0.0f);
    for (int s = 0; s < cs.shards; ++s) {
        long v0 = (long)V * s / cs.shards, v1 = (long)V * (s + 1) / cs.shards;
        int Vs = (int)(v1 - v0);
        const int ld = cs.pad ? (Vs + 127) / 128 * 128 : Vs;
        lds.push_back(ld);
        // padding columns hold a huge logit: read as data, it would own the softmax
        std::vector<float> part((size_t)N * ld, 1.0e4f);
        for (int n = 0; n < N; ++n)
            for (int i = 0; i < Vs; ++i) part[(size_t)n * ld + i] = logits[(size_t)n * V + v0 + i];
        shard_logits.push_back(std::make_unique<DevBuf<T>>(part.size()));
        shard_logits.back()->set(part);
        v0s.push_back(v0);
        DevBuf<float> d_max(N), d_sum(N), d_term(N);
        vss.push_back(Vs);
        ce_row_stats_cuda<T>(d_max.p, d_sum.p, d_term.p, shard_logits.back()->p, d_tgt.p, v0, N, Vs,
                             0, ld);
        smax.push_back(d_max.get());
        ssum.push_back(d_sum.get());
        sterm.push_back(d_term.get());
        for (int n = 0; n < N; ++n) gmax[n] = std::max(gmax[n], smax.back()[n]);
    }
    DevBuf<float> d_gmax(N);
    d_gmax.set(gmax);
    for (int s = 0; s < cs.shards; ++s) {
        DevBuf<float> d_max(N), d_sum(N), d_term(N);
        d_max.set(smax[s]);
        d_sum.set(ssum[s]);
        d_term.set(sterm[s]);
        ce_rescale_cuda(d_max.p, d_sum.p, d_term.p, d_gmax.p, N, 0);
        auto mx = d_max.get(), su = d_sum.get(), te = d_term.get();
        for (int n = 0; n < N; ++n) {  // "all-reduce sum"
            EXPECT_EQ(mx[n], gmax[n]);
            gsum[n] += su[n];
            gterm[n] += te[n];
        }
    }
    if (cs.shards == 1)  // one shard: the pass alone gives the global statistics
        for (int n = 0; n < N; ++n) ASSERT_EQ(ssum[0][n], gsum[n]);
    DevBuf<float> d_gsum(N), d_gterm(N);
    d_gsum.set(gsum);
    d_gterm.set(gterm);
    std::string what = "N=" + std::to_string(N) + " V=" + std::to_string(V) +
                       " shards=" + std::to_string(cs.shards);
    // eval path
    DevBuf<float> d_loss_eval(N);
    ce_loss_only_cuda(d_loss_eval.p, d_gsum.p, d_gterm.p, d_tgt.p, N, 0);
    EXPECT_REL(d_loss_eval.get(), losses, tol<T>(), what + " loss_only");
    // training path: each shard writes the losses (identical) and its slice of dlogits
    std::vector<float> dlogits((size_t)N * V, NAN);
    for (int s = 0; s < cs.shards; ++s) {
        const int Vs = vss[s], ld = lds[s];
        DevBuf<float> d_loss(N);
        ce_loss_and_grad_cuda<T>(d_loss.p, shard_logits[s]->p, d_gmax.p, d_gsum.p, d_gterm.p,
                                 d_tgt.p, v0s[s], dloss, N, Vs, 0, ld);
        EXPECT_REL(d_loss.get(), losses, tol<T>(), what + " loss shard " + std::to_string(s));
        auto g = shard_logits[s]->get();
        for (int n = 0; n < N; ++n) {
            for (int i = 0; i < Vs; ++i)
                dlogits[(size_t)n * V + v0s[s] + i] = g[(size_t)n * ld + i];
            for (int i = Vs; i < ld; ++i)
                ASSERT_EQ(g[(size_t)n * ld + i], 0.0f)
                    << what << " padding not zeroed at row " << n;
        }
    }
    EXPECT_REL(dlogits, probs, tol<T>(), what + " dlogits");
}

TYPED_TEST(CrossEntropyCuda, OneShardMatchesCpu) {
    check_ce<TypeParam>({37, 333, 1});
    check_ce<TypeParam>({5, 1, 1});
    check_ce<TypeParam>({8, 50257, 1});
    check_ce<TypeParam>({8, 50257, 1, true});  // padded rows: the 16-byte path, a scalar tail
    check_ce<TypeParam>({19, 1024, 1});        // no tail
}

TYPED_TEST(CrossEntropyCuda, VocabShardsMatchCpu) {
    check_ce<TypeParam>({37, 333, 2});
    check_ce<TypeParam>({37, 333, 3});
    check_ce<TypeParam>({8, 50257, 4});
    check_ce<TypeParam>({8, 50257, 2, true});
}

// Training over the whole vocabulary (ce_train_cuda): one pass where the rows take 16-byte
// accesses (padded) and fit a cluster's shared memory, the two passes elsewhere; the same losses
// and gradient as the CPU, padding zeroed, ignored rows without a gradient.
template <typename T>
static void check_ce_train(int N, int V, bool pad) {
    std::mt19937 rng(N * 31 + V);
    const int ld = pad ? (V + 127) / 128 * 128 : V;
    auto logits = rand_vec<T>((size_t)N * V, rng, -6.0f, 6.0f);
    std::vector<int32_t> tgt(N);
    std::uniform_int_distribution<int> td(0, V - 1);
    for (int n = 0; n < N; ++n) tgt[n] = (n % 5 == 3) ? -1 : td(rng);  // some ignored rows
    tgt[0] = V - 1;
    if (N > 1) tgt[1] = 0;
    const float dloss = 1.0f / 29.0f;
    std::vector<float> probs = logits, losses(N);
    cross_entropy_forward(losses.data(), probs.data(), tgt.data(), N, V);
    cross_entropy_backward(probs.data(), tgt.data(), dloss, N, V);

    std::vector<float> rows((size_t)N * ld, 1.0e4f);  // padding: a huge logit, if read as data
    for (int n = 0; n < N; ++n)
        for (int i = 0; i < V; ++i) rows[(size_t)n * ld + i] = logits[(size_t)n * V + i];
    DevBuf<T> d_logits(rows.size());
    d_logits.set(rows);
    DevBuf<int> d_tgt(N);
    d_tgt.set_raw(tgt);
    DevBuf<float> d_loss(N), d_stats(3 * (size_t)N);
    ce_train_cuda<T>(d_loss.p, d_stats.p, d_logits.p, d_tgt.p, dloss, N, V, 0, ld);
    ck(cudaDeviceSynchronize(), "ce_train_cuda");
    const std::string what =
        "N=" + std::to_string(N) + " V=" + std::to_string(V) + " ld=" + std::to_string(ld);
    // fp32: the CPU's reference sums V exponentials in order, an error growing as √V; 1e-5 of
    // the largest loss up to GPT-2's vocabulary, in proportion past it
    const double loss_tol = tol<T>() * std::max(1.0, std::sqrt(V / 50257.0));
    EXPECT_REL(d_loss.get(), losses, loss_tol, what + " loss");
    auto g = d_logits.get();
    std::vector<float> dlogits((size_t)N * V);
    for (int n = 0; n < N; ++n) {
        for (int i = 0; i < V; ++i) dlogits[(size_t)n * V + i] = g[(size_t)n * ld + i];
        for (int i = V; i < ld; ++i)
            ASSERT_EQ(g[(size_t)n * ld + i], 0.0f) << what << " padding not zeroed at row " << n;
        if (tgt[n] < 0)
            for (int i = 0; i < V; ++i)
                ASSERT_EQ(g[(size_t)n * ld + i], 0.0f) << what << " ignored row " << n;
    }
    EXPECT_REL(dlogits, probs, tol<T>(), what + " dlogits");
}

TYPED_TEST(CrossEntropyCuda, TrainingOverTheWholeVocabularyMatchesCpu) {
    check_ce_train<TypeParam>(5, 1, true);       // one real column, the rest padding
    check_ce_train<TypeParam>(37, 333, true);    // one block a row
    check_ce_train<TypeParam>(37, 333, false);   // rows not 16-byte aligned: the two passes
    check_ce_train<TypeParam>(9, 50257, true);   // GPT-2: 3 blocks a row in bf16, 5 in fp32
    check_ce_train<TypeParam>(6, 151936, true);  // Qwen: 7 in bf16; fp32 past 8: the two passes
    check_ce_train<TypeParam>(3, 300000, true);  // past the largest cluster: the two passes
}
