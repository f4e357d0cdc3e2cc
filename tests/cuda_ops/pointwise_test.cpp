// GELU, ReLU, embedding, AdamW and the small elementwise ops against the CPU kernels (or a host
// loop where the CPU has no twin).
#include <cmath>
#include <cstring>
#include <map>

#include "engine/kernels/cpu/adamw.h"
#include "engine/kernels/cpu/elementwise.h"
#include "engine/kernels/cpu/embedding.h"
#include "engine/kernels/cpu/gelu.h"
#include "engine/kernels/cuda/adamw.cuh"
#include "engine/kernels/cuda/elementwise.cuh"
#include "engine/kernels/cuda/embedding.cuh"
#include "engine/kernels/cuda/gelu.cuh"
#include "tests/cuda_ops/cuda_test_util.h"

using namespace tessera;
using namespace tessera::test;

template <typename T>
class PointwiseCuda : public CudaTest {};
using ActTypes = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(PointwiseCuda, ActTypes);

class ElementwiseCuda : public CudaTest {};

TYPED_TEST(PointwiseCuda, GeluMatchesCpu) {
    using T = TypeParam;
    for (long n : {1L, 1001L, 37L * 768 * 4}) {
        std::mt19937 rng((unsigned)n);
        auto x = rand_vec<T>(n, rng, -4.0f, 4.0f), g = rand_vec<T>(n, rng);
        std::vector<float> y(n), dx(n, 0.0f);  // CPU backward accumulates: start at 0
        gelu_forward(y.data(), x.data(), n);
        gelu_backward(dx.data(), x.data(), g.data(), n);
        DevBuf<T> d_x(n), d_g(n), d_y(n), d_dx(n);
        d_x.set(x);
        d_g.set(g);
        gelu_forward_cuda<T>(d_y.p, d_x.p, n, 0);
        gelu_backward_cuda<T>(d_dx.p, d_x.p, d_g.p, n, 0);
        EXPECT_REL(d_y.get(), y, tol<T>(), "gelu forward n=" + std::to_string(n));
        EXPECT_REL(d_dx.get(), dx, tol<T>(), "gelu backward (overwrite) n=" + std::to_string(n));
    }
}

TYPED_TEST(PointwiseCuda, ReluMatchesCpu) {
    using T = TypeParam;
    for (long n : {1L, 1001L, 128L * 512}) {
        std::mt19937 rng((unsigned)n + 7);
        auto x = rand_vec<T>(n, rng, -2.0f, 2.0f), g = rand_vec<T>(n, rng);
        std::vector<float> y(n), dx(n);
        relu_forward(y.data(), x.data(), n);
        relu_backward_set(dx.data(), x.data(), g.data(), n);
        DevBuf<T> d_x(n), d_g(n), d_y(n);
        d_x.set(x);
        d_g.set(g);
        relu_forward_cuda<T>(d_y.p, d_x.p, n, 0);
        relu_backward_cuda<T>(d_g.p, d_x.p, d_g.p, n, 0);  // in place, as the layers call it
        EXPECT_REL(d_y.get(), y, tol<T>(), "relu forward n=" + std::to_string(n));
        EXPECT_REL(d_g.get(), dx, tol<T>(), "relu backward (in place) n=" + std::to_string(n));
    }
}

TYPED_TEST(PointwiseCuda, EmbeddingMatchesCpu) {
    using T = TypeParam;
    struct S {
        int B, Tq, C, V;
    };
    // Tokens repeat (17 ids): a shape whose commonest token has at most 16 rows is added in the
    // CPU's order, one with more takes the backward's long runs (its own fixed order); at least
    // one shape must be of the first kind.
    int in_cpu_order = 0;
    for (S sh : {S{3, 13, 97, 333}, S{2, 64, 768, 1000}, S{4, 64, 768, 1000}, S{8, 200, 40, 20}}) {
        const int B = sh.B, Tq = sh.Tq, C = sh.C, V = sh.V;
        std::mt19937 rng(B * Tq + C);
        std::uniform_int_distribution<int> tokd(0, V - 1);
        std::vector<int32_t> tok((size_t)B * Tq);
        for (auto& t : tok) t = tokd(rng) % 17;  // small range: repeated tokens
        tok[1] = V - 1;
        auto wte = rand_vec<T>((size_t)V * C, rng), wpe = rand_vec<T>((size_t)Tq * C, rng);
        auto dout = rand_vec<T>((size_t)B * Tq * C, rng);
        std::vector<float> out((size_t)B * Tq * C);
        embedding_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, Tq, C);
        auto dwte0 = rand_vec<float>((size_t)V * C, rng),
             dwpe0 = rand_vec<float>((size_t)Tq * C, rng);
        std::vector<float> dwte = dwte0, dwpe = dwpe0;
        embedding_backward(dwte.data(), dwpe.data(), dout.data(), tok.data(), B, Tq, C);

        DevBuf<int> d_tok(tok.size());
        d_tok.set_raw(tok);
        DevBuf<T> d_wte(wte.size()), d_wpe(wpe.size()), d_out(out.size()), d_dout(dout.size());
        d_wte.set(wte);
        d_wpe.set(wpe);
        d_dout.set(dout);
        std::string what = "embedding B=" + std::to_string(B) + " C=" + std::to_string(C);
        embedding_forward_cuda<T>(d_out.p, d_tok.p, d_wte.p, d_wpe.p, 0, V, B, Tq, C, 0);
        EXPECT_REL(d_out.get(), out, tol<T>(), what + " forward");

        // vocab shard [v0, v1): rows outside are 0 + wpe; wte pointer is the shard's first row
        const long v0 = 5, v1 = 11;
        std::vector<float> out_shard = out;
        for (int r = 0; r < B * Tq; ++r)
            for (int i = 0; i < C; ++i) {
                const int t = tok[r];
                const bool mine = t >= v0 && t < v1;
                float e = mine ? wte[(size_t)t * C + i] : 0.0f;
                out_shard[(size_t)r * C + i] =
                    to_f<T>(from_f<T>(e + wpe[(size_t)(r % Tq) * C + i]));
            }
        d_out.poison();
        embedding_forward_cuda<T>(d_out.p, d_tok.p, d_wte.p + v0 * C, d_wpe.p, v0, v1, B, Tq, C, 0);
        EXPECT_REL(d_out.get(), out_shard, tol<T>(), what + " sharded forward");
        // no wpe
        std::vector<float> out_nowpe(out.size());
        embedding_forward(out_nowpe.data(), tok.data(), wte.data(), nullptr, B, Tq, C);
        d_out.poison();
        embedding_forward_cuda<T>(d_out.p, d_tok.p, d_wte.p, nullptr, 0, V, B, Tq, C, 0);
        EXPECT_REL(d_out.get(), out_nowpe, tol<T>(), what + " forward without wpe");

        DevBuf<float> d_dwte(dwte.size()), d_dwpe(dwpe.size());
        d_dwte.set(dwte0);
        d_dwpe.set(dwpe0);
        embedding_backward_cuda<T>(d_dwte.p, d_dwpe.p, d_dout.p, d_tok.p, 0, V, B, Tq, C, 0);
        // A token's rows, up to 16 of them, and a position's are added in the CPU's order: its
        // bits. More rows of one token are added in a fixed order of the GPU's own. Either way
        // the same bits every call (fp32 atomics gave neither).
        std::map<int, int> count;
        for (int t : tok) ++count[t];
        int longest = 0;
        for (const auto& [t, c] : count) longest = std::max(longest, c);
        const double dwte_tol = longest <= 16 ? 0.0 : 1e-5;
        in_cpu_order += longest <= 16;
        const std::vector<float> got = d_dwte.get();
        EXPECT_REL(got, dwte, dwte_tol,
                   what + " dwte (+=), longest run " + std::to_string(longest));
        EXPECT_REL(d_dwpe.get(), dwpe, 0.0, what + " dwpe (+=)");
        d_dwte.set(dwte0);
        embedding_backward_cuda<T>(d_dwte.p, nullptr, d_dout.p, d_tok.p, 0, V, B, Tq, C, 0);
        EXPECT_TRUE(d_dwte.get() == got) << what << ": dwte differs from one call to the next";

        // shard backward: only rows [v0, v1) of the full dwte change
        std::vector<float> dwte_shard(dwte0.begin() + v0 * C, dwte0.begin() + v1 * C);
        for (int r = 0; r < B * Tq; ++r)
            if (tok[r] >= v0 && tok[r] < v1)
                for (int i = 0; i < C; ++i)
                    dwte_shard[(size_t)(tok[r] - v0) * C + i] +=
                        to_f<T>(from_f<T>(dout[(size_t)r * C + i]));
        DevBuf<float> d_shard(dwte_shard.size());
        d_shard.set(std::vector<float>(dwte0.begin() + v0 * C, dwte0.begin() + v1 * C));
        embedding_backward_cuda<T>(d_shard.p, nullptr, d_dout.p, d_tok.p, v0, v1, B, Tq, C, 0);
        EXPECT_REL(d_shard.get(), dwte_shard, dwte_tol, what + " sharded dwte");
    }
    EXPECT_GE(in_cpu_order, 1) << "no shape had every token's run within 16 rows";
}

template <typename T>
static void check_bias_residual(int N, int C);

TYPED_TEST(PointwiseCuda, AddBiasResidualAndCast) {
    using T = TypeParam;
    for (int C : {200, 100})  // 16-byte accesses (C a multiple of 8), and not for bf16
        check_bias_residual<T>(37, C);
}

template <typename T>
static void check_bias_residual(int N, int C) {
    std::mt19937 rng(11 + C);
    auto y = rand_vec<T>((size_t)N * C, rng), b = rand_vec<T>(C, rng),
         r = rand_vec<T>((size_t)N * C, rng);
    std::vector<float> ref(y.size()), ref_nob(y.size());
    for (size_t i = 0; i < y.size(); ++i) {
        ref[i] = to_f<T>(from_f<T>((b[i % C] + y[i]) + r[i]));
        ref_nob[i] = to_f<T>(from_f<T>(y[i] + r[i]));
    }
    DevBuf<T> d_y(y.size()), d_b(C), d_r(r.size());
    d_y.set(y);
    d_b.set(b);
    d_r.set(r);
    add_bias_residual_cuda<T>(d_y.p, d_b.p, d_r.p, N, C, 0);
    EXPECT_REL(d_y.get(), ref, 1e-6, "add_bias_residual");
    d_y.set(y);
    add_bias_residual_cuda<T>(d_y.p, nullptr, d_r.p, N, C, 0);
    EXPECT_REL(d_y.get(), ref_nob, 1e-6, "add_bias_residual without bias");

    DevBuf<float> d_f(y.size());
    cast_to_f32_cuda<T>(d_f.p, d_r.p, (long)r.size(), 0);
    EXPECT_REL(d_f.get(), r, 0.0, "cast_to_f32");
}

TEST_F(ElementwiseCuda, AccumulateScaleFillCast) {
    const long n = 100003;
    std::mt19937 rng(5);
    auto a = rand_vec<float>(n, rng), b = rand_vec<float>(n, rng);
    std::vector<float> acc = a;
    accumulate(acc.data(), b.data(), n);
    DevBuf<float> d_a(n), d_b(n);
    d_a.set(a);
    d_b.set(b);
    accumulate_cuda(d_a.p, d_b.p, n, 0);
    EXPECT_REL(d_a.get(), acc, 0.0, "accumulate");
    scale_inplace(acc.data(), 0.37f, n);
    scale_cuda(d_a.p, 0.37f, n, 0);
    EXPECT_REL(d_a.get(), acc, 0.0, "scale");
    fill_cuda(d_a.p, 2.5f, n, 0);
    EXPECT_EQ(d_a.get(), std::vector<float>(n, 2.5f));

    DevBuf<bf16> d_h(n);
    cast_f32_to_bf16_cuda(d_h.p, d_b.p, n, 0);
    auto h = d_h.get_raw();
    for (long i = 0; i < n; ++i)
        ASSERT_EQ(to_f<bf16>(h[i]), to_f<bf16>(__float2bfloat16(b[i]))) << "cast at " << i;
}

TEST_F(ElementwiseCuda, SumSquaresAccumulatesInDouble) {
    for (long n : {1L, 1000L, 3000017L}) {
        std::mt19937 rng((unsigned)n);
        auto x = rand_vec<float>(n, rng);
        DevBuf<double> d_out(1);
        double start = 1.25;
        ck(cudaMemcpy(d_out.p, &start, sizeof(double), cudaMemcpyHostToDevice), "upload");
        DevBuf<float> d_x(n);
        d_x.set(x);
        sum_squares_cuda(d_out.p, d_x.p, n, 0);
        double got = 0, ref = start + sum_squares(x.data(), n);
        ck(cudaMemcpy(&got, d_out.p, sizeof(double), cudaMemcpyDeviceToHost), "download");
        EXPECT_NEAR(got, ref, 1e-12 * std::fabs(ref)) << "n=" << n;
        // deterministic: the same call again adds the same bits
        double got2 = 0;
        ck(cudaMemcpy(d_out.p, &start, sizeof(double), cudaMemcpyHostToDevice), "upload");
        sum_squares_cuda(d_out.p, d_x.p, n, 0);
        ck(cudaMemcpy(&got2, d_out.p, sizeof(double), cudaMemcpyDeviceToHost), "download");
        EXPECT_EQ(got, got2);
    }
}

// The squared norm over many ranges (the gradient norm of split gradients): every range's squares
// in double, the same bits however the ranges cut one buffer and however many launches it takes
// (more than 128 ranges), and the same bits run to run.
TEST_F(ElementwiseCuda, SumSquaresOverRangesIgnoresWhereTheyCut) {
    const long n = 2000003;
    std::mt19937 rng(7);
    auto x = rand_vec<float>(n, rng);
    DevBuf<float> d_x(n);
    d_x.set(x);
    DevBuf<double> d_out(1);
    auto run = [&](const std::vector<long>& cuts) {  // ranges [cuts[k], cuts[k + 1])
        std::vector<const float*> p;
        std::vector<long> len;
        for (size_t k = 0; k + 1 < cuts.size(); ++k) {
            p.push_back(d_x.p + cuts[k]);
            len.push_back(cuts[k + 1] - cuts[k]);
        }
        const double start = 0.5;
        ck(cudaMemcpy(d_out.p, &start, sizeof(double), cudaMemcpyHostToDevice), "upload");
        sum_squares_multi_cuda(d_out.p, p.data(), len.data(), (int)p.size(), 0);
        double got = 0;
        ck(cudaMemcpy(&got, d_out.p, sizeof(double), cudaMemcpyDeviceToHost), "download");
        return got;
    };
    const double whole = run({0, n});
    const double ref = 0.5 + sum_squares(x.data(), n);
    EXPECT_NEAR(whole, ref, 1e-12 * ref);
    EXPECT_EQ(run({0, n}), whole);
    // uneven cuts, an empty range among them, within one launch
    EXPECT_EQ(run({0, 1, 1, 1000, 300000, 1999999, n}), whole);
    // 200 ranges: two launches, each its own partials: equal to a sum of two halves in double
    std::vector<long> many;
    for (int k = 0; k <= 200; ++k) many.push_back(n * k / 200);
    const double split = run(many);
    EXPECT_NEAR(split, ref, 1e-12 * ref);
    EXPECT_EQ(run(many), split);
    std::vector<long> many2 = many;  // 200 ranges again, the first launch's cut elsewhere
    many2.insert(many2.begin() + 1, 5);
    many2.erase(many2.begin() + 3);
    EXPECT_EQ(run(many2), split);
}

// An AdamW state of n elements at random (parameters and gradients in [-1, 1), m small, v small
// and positive), on the host and uploaded.
struct AdamWState {
    std::vector<float> p, g, m, v;
    DevBuf<float> d_p, d_g, d_m, d_v;
    AdamWState(long n, std::mt19937& rng)
        : p(rand_vec<float>(n, rng)),
          g(rand_vec<float>(n, rng)),
          m(rand_vec<float>(n, rng, -0.1f, 0.1f)),
          v(rand_vec<float>(n, rng, 0.0f, 0.01f)),
          d_p(n),
          d_g(n),
          d_m(n),
          d_v(n) {
        d_p.set(p);
        d_g.set(g);
        d_m.set(m);
        d_v.set(v);
    }
};

TEST_F(ElementwiseCuda, AdamWMatchesCpu) {
    const long n = 10007;
    std::mt19937 rng(9);
    AdamWState st(n, rng);
    auto &p = st.p, &g = st.g, &m = st.m, &v = st.v;
    auto &d_p = st.d_p, &d_g = st.d_g, &d_m = st.d_m, &d_v = st.d_v;
    for (long t : {1L, 2L, 50L}) {
        AdamWHyper h{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t};
        adamw_update(p.data(), g.data(), m.data(), v.data(), n, h, 0.5f);
        adamw_cuda(d_p.p, d_g.p, d_m.p, d_v.p, n, h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, t,
                   0.5f, 0);
        EXPECT_REL(d_p.get(), p, 1e-5, "adamw param t=" + std::to_string(t));
        EXPECT_REL(d_m.get(), m, 1e-5, "adamw m t=" + std::to_string(t));
        EXPECT_REL(d_v.get(), v, 1e-5, "adamw v t=" + std::to_string(t));
    }
}

// The multi-range update equals one adamw_cuda per range, bit for bit: 60 ranges (two launches),
// odd lengths, an empty range, and each range its own weight decay; once at odd offsets (the
// element-wise path), once with every range 16-byte aligned (four elements a thread, and the
// range's last few one by one).
class AdamWMulti : public ElementwiseCuda, public ::testing::WithParamInterface<bool> {};
INSTANTIATE_TEST_SUITE_P(Offsets, AdamWMulti, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? "Aligned" : "Odd"; });
TEST_P(AdamWMulti, EqualsOneUpdatePerRange) {
    const bool aligned = GetParam();
    auto next = [&](long off) { return aligned ? (off + 3) / 4 * 4 : off; };
    std::mt19937 rng(13);
    std::vector<long> lens;
    for (int k = 0; k < 60; ++k) lens.push_back(k == 7 ? 0 : 1 + (long)(rng() % 5000));
    lens[3] = 3 * 2048 + 1;  // a range over several blocks
    lens[4] = 2 * 2048;      // whole blocks
    long total = 4;
    for (long n : lens) total = next(total + n + 3);  // gaps between ranges stay untouched
    auto p = rand_vec<float>(total, rng), g = rand_vec<float>(total, rng),
         m = rand_vec<float>(total, rng, -0.1f, 0.1f), v = rand_vec<float>(total, rng, 0.0f, 0.01f);
    DevBuf<float> a_p(total), a_m(total), a_v(total), b_p(total), b_m(total), b_v(total),
        d_g(total);
    for (auto* b : {&a_p, &b_p}) b->set(p);
    for (auto* b : {&a_m, &b_m}) b->set(m);
    for (auto* b : {&a_v, &b_v}) b->set(v);
    d_g.set(g);
    std::vector<AdamWRange> ranges;
    long off = aligned ? 4 : 1;
    for (size_t k = 0; k < lens.size(); ++k) {
        const float wd = k % 3 == 0 ? 0.0f : 0.1f;
        adamw_cuda(a_p.p + off, d_g.p + off, a_m.p + off, a_v.p + off, lens[k], 3e-3f, 0.9f, 0.95f,
                   1e-8f, wd, 4, 0.7f, 0);
        ranges.push_back({b_p.p + off, d_g.p + off, b_m.p + off, b_v.p + off, lens[k], wd});
        off = next(off + lens[k] + 3);
    }
    adamw_multi_cuda(ranges.data(), (int)ranges.size(), 3e-3f, 0.9f, 0.95f, 1e-8f, 4, 0.7f, 0);
    EXPECT_EQ(a_p.get(), b_p.get());
    EXPECT_EQ(a_m.get(), b_m.get());
    EXPECT_EQ(a_v.get(), b_v.get());
    EXPECT_EQ(b_p.get()[0], p[0]);  // outside every range
}

// The bf16 image a range may carry (AdamWRange::image16, what bf16 layers compute with) holds
// exactly what cast_f32_to_bf16_cuda makes of the updated values, for the ranges that have one;
// the other ranges' images, and the gaps, are left as they were.
class AdamWImage : public ElementwiseCuda, public ::testing::WithParamInterface<bool> {};
INSTANTIATE_TEST_SUITE_P(Offsets, AdamWImage, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? "Aligned" : "Odd"; });
TEST_P(AdamWImage, WritesWhatTheCastWouldMake) {
    const bool aligned = GetParam();  // as AdamWMulti: odd offsets, or every range aligned
    auto next = [&](long off) { return aligned ? (off + 3) / 4 * 4 : off; };
    std::mt19937 rng(17);
    std::vector<long> lens = {1, 2048, 5000, 3 * 2048 + 7, 333};
    long total = aligned ? 4 : 1;  // the first elements, then each range followed by a gap
    for (long n : lens) total = next(total + n + 3);
    AdamWState st(total, rng);
    auto &d_p = st.d_p, &d_g = st.d_g, &d_m = st.d_m, &d_v = st.d_v;
    DevBuf<bf16> image(total), cast(total);  // poisoned: 0xFFFF, a NaN no update writes
    std::vector<AdamWRange> ranges;
    long off = aligned ? 4 : 1;
    for (size_t k = 0; k < lens.size(); ++k) {
        uint16_t* img = k % 2 == 0 ? reinterpret_cast<uint16_t*>(image.p + off) : nullptr;
        ranges.push_back({d_p.p + off, d_g.p + off, d_m.p + off, d_v.p + off, lens[k], 0.1f, img});
        off = next(off + lens[k] + 3);
    }
    adamw_multi_cuda(ranges.data(), (int)ranges.size(), 3e-3f, 0.9f, 0.95f, 1e-8f, 2, 1.0f, 0);
    cast_f32_to_bf16_cuda(cast.p, d_p.p, total, 0);
    const auto got = image.get_raw(), want = cast.get_raw();
    auto bits = [](bf16 x) {
        uint16_t b;
        std::memcpy(&b, &x, 2);
        return b;
    };
    off = aligned ? 4 : 1;
    size_t written = 0;
    for (size_t k = 0; k < lens.size(); ++k) {
        for (long i = off; i < off + lens[k]; ++i) {
            const uint16_t expect = k % 2 == 0 ? bits(want[i]) : uint16_t{0xFFFF};
            ASSERT_EQ(bits(got[i]), expect) << "range " << k << " element " << i - off;
            written += k % 2 == 0;
        }
        const long after = next(off + lens[k] + 3);
        for (long i = off + lens[k]; i < after; ++i)  // the gap after the range
            ASSERT_EQ(bits(got[i]), uint16_t{0xFFFF}) << "gap " << i;
        off = after;
    }
    EXPECT_EQ(written, (size_t)(1 + 5000 + 333));
}

// accumulate and the fp32 -> bf16 cast from unaligned starts (scalar paths) and lengths that leave
// a tail after the 16-byte accesses.
TEST_F(ElementwiseCuda, VectorisedPathsHandleOffsetsAndTails) {
    const long n = 4099;
    std::mt19937 rng(21);
    auto a = rand_vec<float>(n + 1, rng), b = rand_vec<float>(n + 1, rng);
    for (long start : {0L, 1L}) {
        DevBuf<float> d_a(n + 1), d_b(n + 1);
        d_a.set(a);
        d_b.set(b);
        accumulate_cuda(d_a.p + start, d_b.p + start, n, 0);
        auto got = d_a.get();
        for (long i = 0; i < n + 1; ++i) {
            const bool in = i >= start && i < start + n;
            ASSERT_EQ(got[i], in ? a[i] + b[i] : a[i])
                << "accumulate start " << start << " at " << i;
        }
        DevBuf<bf16> d_h(n + 1);
        cast_f32_to_bf16_cuda(d_h.p + start, d_b.p + start, n, 0);
        auto h = d_h.get_raw();
        for (long i = start; i < start + n; ++i)
            ASSERT_EQ(to_f<bf16>(h[i]), to_f<bf16>(__float2bfloat16(b[i])))
                << "cast start " << start << " at " << i;
    }
}
