// LayerNorm forward, fused residual + layernorm, and backward against the CPU layernorm.
#include "engine/kernels/cpu/layernorm.h"

#include "engine/kernels/cuda/layernorm.cuh"
#include "tests/cuda_ops/cuda_test_util.h"

using namespace tessera;
using namespace tessera::test;

template <typename T>
class LayernormCuda : public CudaTest {};
using ActTypes = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(LayernormCuda, ActTypes);

struct LnShape {
    int N, C;
};
// odd C (scalar path), C % 8 == 0 (vector path), C < 32, GPT-2 C, and gpt2-large's and gpt2-xl's
// (the backward's shared-memory kernel; in fp32 GPT-2's C as well), over several of its blocks
static const LnShape kShapes[] = {{37, 97},   {37, 96},    {3, 5},      {64, 768},
                                  {300, 768}, {300, 1280}, {3000, 1600}};

TYPED_TEST(LayernormCuda, ForwardMatchesCpu) {
    using T = TypeParam;
    for (const LnShape& sh : kShapes) {
        const int N = sh.N, C = sh.C;
        std::mt19937 rng(N * 1000 + C);
        auto inp = rand_vec<T>((size_t)N * C, rng, -2.0f, 3.0f);
        auto w = rand_vec<T>(C, rng), b = rand_vec<T>(C, rng);
        std::vector<float> out((size_t)N * C), mean(N), rstd(N);
        layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N,
                          C);
        DevBuf<T> d_inp(inp.size()), d_w(C), d_b(C), d_out(out.size());
        DevBuf<float> d_mean(N), d_rstd(N);
        d_inp.set(inp);
        d_w.set(w);
        d_b.set(b);
        layernorm_forward_cuda<T>(d_out.p, d_mean.p, d_rstd.p, d_inp.p, d_w.p, d_b.p, N, C, 0);
        std::string what = "N=" + std::to_string(N) + " C=" + std::to_string(C);
        EXPECT_REL(d_out.get(), out, tol<T>(), what + " out");
        // statistics come from the same T inputs in fp32 on both sides: fp32-tight
        EXPECT_REL(d_mean.get(), mean, 1e-5, what + " mean");
        EXPECT_REL(d_rstd.get(), rstd, 1e-5, what + " rstd");
    }
}

TYPED_TEST(LayernormCuda, FusedResidualMatchesCpu) {
    using T = TypeParam;
    for (const LnShape& sh : kShapes) {
        const int N = sh.N, C = sh.C;
        std::mt19937 rng(N * 7 + C);
        auto a = rand_vec<T>((size_t)N * C, rng), bb = rand_vec<T>((size_t)N * C, rng);
        auto w = rand_vec<T>(C, rng), b = rand_vec<T>(C, rng);
        std::vector<float> resid(a.size());
        for (size_t i = 0; i < a.size(); ++i) resid[i] = to_f<T>(from_f<T>(a[i] + bb[i]));
        std::vector<float> out(a.size()), mean(N), rstd(N);
        layernorm_forward(out.data(), mean.data(), rstd.data(), resid.data(), w.data(), b.data(), N,
                          C);
        DevBuf<T> d_a(a.size()), d_bb(a.size()), d_w(C), d_b(C), d_res(a.size()), d_out(a.size());
        DevBuf<float> d_mean(N), d_rstd(N);
        d_a.set(a);
        d_bb.set(bb);
        d_w.set(w);
        d_b.set(b);
        fused_residual_layernorm_forward_cuda<T>(d_res.p, d_out.p, d_mean.p, d_rstd.p, d_a.p,
                                                 d_bb.p, d_w.p, d_b.p, N, C, 0);
        std::string what = "fused N=" + std::to_string(N) + " C=" + std::to_string(C);
        EXPECT_REL(d_res.get(), resid, 1e-6, what + " residual");
        EXPECT_REL(d_out.get(), out, tol<T>(), what + " out");
        EXPECT_REL(d_mean.get(), mean, 1e-5, what + " mean");
        EXPECT_REL(d_rstd.get(), rstd, 1e-5, what + " rstd");

        // in place: residual_out aliases a
        d_a.set(a);
        d_out.poison();
        fused_residual_layernorm_forward_cuda<T>(d_a.p, d_out.p, d_mean.p, d_rstd.p, d_a.p, d_bb.p,
                                                 d_w.p, d_b.p, N, C, 0);
        EXPECT_REL(d_a.get(), resid, 1e-6, what + " in-place residual");
        EXPECT_REL(d_out.get(), out, tol<T>(), what + " in-place out");
    }
}

TYPED_TEST(LayernormCuda, BackwardAccumulatesLikeCpu) {
    using T = TypeParam;
    for (const LnShape& sh : kShapes) {
        const int N = sh.N, C = sh.C;
        std::mt19937 rng(N * 31 + C);
        auto inp = rand_vec<T>((size_t)N * C, rng, -2.0f, 3.0f);
        auto w = rand_vec<T>(C, rng), b = rand_vec<T>(C, rng);
        auto dout = rand_vec<T>((size_t)N * C, rng);
        auto dinp0 = rand_vec<T>((size_t)N * C, rng), dw0 = rand_vec<float>(C, rng),
             db0 = rand_vec<float>(C, rng);
        std::vector<float> out((size_t)N * C), mean(N), rstd(N);
        layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N,
                          C);
        std::vector<float> dinp = dinp0, dw = dw0, db = db0;
        layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(),
                           mean.data(), rstd.data(), N, C);

        DevBuf<T> d_inp(inp.size()), d_w(C), d_dout(dout.size()), d_dinp(dinp.size());
        DevBuf<float> d_mean(N), d_rstd(N), d_dw(C), d_db(C);
        d_inp.set(inp);
        d_w.set(w);
        d_dout.set(dout);
        d_dinp.set(dinp0);
        d_dw.set(dw0);
        d_db.set(db0);
        d_mean.set(mean);
        d_rstd.set(rstd);
        layernorm_backward_cuda<T>(d_dinp.p, d_dw.p, d_db.p, d_dout.p, d_inp.p, d_w.p, d_mean.p,
                                   d_rstd.p, N, C, 0);
        std::string what = "backward N=" + std::to_string(N) + " C=" + std::to_string(C);
        EXPECT_REL(d_dinp.get(), dinp, tol<T>(), what + " dinp (+=)");
        EXPECT_REL(d_dw.get(), dw, tol<T>(), what + " dweight (+=)");
        EXPECT_REL(d_db.get(), db, tol<T>(), what + " dbias (+=)");

        // deterministic: a second identical call adds exactly the same amounts
        auto dinp1 = d_dinp.get(), dw1 = d_dw.get(), db1 = d_db.get();
        d_dinp.set(dinp0);
        d_dw.set(dw0);
        d_db.set(db0);
        layernorm_backward_cuda<T>(d_dinp.p, d_dw.p, d_db.p, d_dout.p, d_inp.p, d_w.p, d_mean.p,
                                   d_rstd.p, N, C, 0);
        EXPECT_EQ(d_dinp.get(), dinp1) << what << ": dinp differs between identical runs";
        EXPECT_EQ(d_dw.get(), dw1) << what << ": dweight differs between identical runs";
        EXPECT_EQ(d_db.get(), db1) << what << ": dbias differs between identical runs";

        // the parameter gradients alone (no dinp: the two-pass kernels) against the CPU too
        d_dw.set(dw0);
        d_db.set(db0);
        layernorm_backward_cuda<T>(nullptr, d_dw.p, d_db.p, d_dout.p, d_inp.p, d_w.p, d_mean.p,
                                   d_rstd.p, N, C, 0);
        EXPECT_REL(d_dw.get(), dw, tol<T>(), what + " dweight alone (+=)");
        EXPECT_REL(d_db.get(), db, tol<T>(), what + " dbias alone (+=)");
    }
}
