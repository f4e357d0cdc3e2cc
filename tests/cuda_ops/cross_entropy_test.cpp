// Vocab-parallel fused cross-entropy against the CPU softmax + cross-entropy: one shard, and the
// vocabulary split in shards whose partial max / sums are combined on the host (what TP's
// all-reduces do).
#include <algorithm>
#include <cmath>
#include <memory>

#include "engine/kernels/cpu/cross_entropy.h"
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
    std::vector<float> gmax(N, -INFINITY), gsum(N, 0.0f), gterm(N, 0.0f);
    // per shard: columns [v0, v0 + Vs) copied into their own (N, Vs) array
    std::vector<std::unique_ptr<DevBuf<T>>> shard_logits;
    std::vector<long> v0s;
    for (int s = 0; s < cs.shards; ++s) {
        long v0 = (long)V * s / cs.shards, v1 = (long)V * (s + 1) / cs.shards;
        int Vs = (int)(v1 - v0);
        std::vector<float> part((size_t)N * Vs);
        for (int n = 0; n < N; ++n)
            for (int i = 0; i < Vs; ++i) part[(size_t)n * Vs + i] = logits[(size_t)n * V + v0 + i];
        shard_logits.push_back(std::make_unique<DevBuf<T>>(part.size()));
        shard_logits.back()->set(part);
        v0s.push_back(v0);
        DevBuf<float> d_max(N);
        ce_row_max_cuda<T>(d_max.p, shard_logits.back()->p, N, Vs, 0);
        auto m = d_max.get();
        for (int n = 0; n < N; ++n) gmax[n] = std::max(gmax[n], m[n]);  // "all-reduce max"
    }
    DevBuf<float> d_gmax(N);
    d_gmax.set(gmax);
    for (int s = 0; s < cs.shards; ++s) {
        int Vs = (int)(shard_logits[s]->n / N);
        DevBuf<float> d_sum(N), d_term(N);
        ce_row_sumexp_cuda<T>(d_sum.p, d_term.p, shard_logits[s]->p, d_gmax.p, d_tgt.p, v0s[s], N,
                              Vs, 0);
        auto su = d_sum.get(), te = d_term.get();
        for (int n = 0; n < N; ++n) {  // "all-reduce sum"
            gsum[n] += su[n];
            gterm[n] += te[n];
        }
    }
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
        int Vs = (int)(shard_logits[s]->n / N);
        DevBuf<float> d_loss(N);
        ce_loss_and_grad_cuda<T>(d_loss.p, shard_logits[s]->p, d_gmax.p, d_gsum.p, d_gterm.p,
                                 d_tgt.p, v0s[s], dloss, N, Vs, 0);
        EXPECT_REL(d_loss.get(), losses, tol<T>(), what + " loss shard " + std::to_string(s));
        auto g = shard_logits[s]->get();
        for (int n = 0; n < N; ++n)
            for (int i = 0; i < Vs; ++i) dlogits[(size_t)n * V + v0s[s] + i] = g[(size_t)n * Vs + i];
    }
    EXPECT_REL(dlogits, probs, tol<T>(), what + " dlogits");
}

TYPED_TEST(CrossEntropyCuda, OneShardMatchesCpu) {
    check_ce<TypeParam>({37, 333, 1});
    check_ce<TypeParam>({5, 1, 1});
    check_ce<TypeParam>({8, 50257, 1});
}

TYPED_TEST(CrossEntropyCuda, VocabShardsMatchCpu) {
    check_ce<TypeParam>({37, 333, 2});
    check_ce<TypeParam>({37, 333, 3});
    check_ce<TypeParam>({8, 50257, 4});
}
