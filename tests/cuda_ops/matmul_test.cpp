// cuBLASLt matmul forward (bias, gelu epilogues and their fallbacks) and backward against the
// CPU matmul, fp32 and bf16.
#include "engine/kernels/cpu/matmul.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/kernels/cpu/gelu.h"
#include "engine/kernels/cuda/matmul.cuh"
#include "tests/cuda_ops/cuda_test_util.h"

using namespace tessera;
using namespace tessera::test;

template <typename T>
class MatmulCuda : public CudaTest {};
using ActTypes = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(MatmulCuda, ActTypes);

struct MmShape {
    int N, C, OC;
};
// (600, 32, 96): several row chunks of the bias gradient with 16-byte loads
static const MmShape kShapes[] = {
    {37, 96, 200}, {37, 96, 203}, {5, 17, 9}, {256, 768, 2304}, {600, 32, 96}};

template <typename T>
static void check_forward(const MmShape& sh, bool with_bias, bool gelu, bool with_pre) {
    const int N = sh.N, C = sh.C, OC = sh.OC;
    std::mt19937 rng(N * 131 + C * 7 + OC + with_bias * 3 + gelu * 5 + with_pre);
    auto inp = rand_vec<T>((size_t)N * C, rng), w = rand_vec<T>((size_t)OC * C, rng);
    auto b = rand_vec<T>(OC, rng);
    std::vector<float> ref((size_t)N * OC);
    matmul_forward(ref.data(), inp.data(), w.data(), with_bias ? b.data() : nullptr, N, C, OC);
    std::vector<float> act(ref.size());
    if (gelu) gelu_forward(act.data(), ref.data(), (int64_t)ref.size());

    DevBuf<T> d_inp(inp.size()), d_w(w.size()), d_b(b.size()), d_out(ref.size()), d_pre(ref.size());
    d_inp.set(inp);
    d_w.set(w);
    d_b.set(b);
    matmul_forward_cuda<T>(d_out.p, d_inp.p, d_w.p, with_bias ? d_b.p : nullptr, N, C, OC, 0, gelu,
                           with_pre ? d_pre.p : nullptr);
    std::string what = "forward N=" + std::to_string(N) + " C=" + std::to_string(C) +
                       " OC=" + std::to_string(OC) + (with_bias ? " bias" : "") +
                       (gelu ? " gelu" : "") + (with_pre ? " pre_gelu" : "");
    EXPECT_REL(d_out.get(), gelu ? act : ref, tol<T>(), what + " out");
    if (with_pre) EXPECT_REL(d_pre.get(), ref, tol<T>(), what + " pre_gelu");
}

TYPED_TEST(MatmulCuda, ForwardMatchesCpu) {
    for (const MmShape& sh : kShapes) {
        check_forward<TypeParam>(sh, true, false, false);
        check_forward<TypeParam>(sh, false, false, false);
    }
}

TYPED_TEST(MatmulCuda, ForwardGeluMatchesCpu) {
    for (const MmShape& sh : kShapes) {
        check_forward<TypeParam>(sh, true, true, true);
        check_forward<TypeParam>(sh, true, true, false);
        check_forward<TypeParam>(sh, false, true, true);
    }
}

// out = inp · weightᵀ + bias + residual, the residual as cuBLASLt's C operand, also one element
// off 16-byte alignment (cuBLASLt takes it at that alignment; the plan keys on it); the residual
// is left as it was.
TYPED_TEST(MatmulCuda, ForwardResidualMatchesCpu) {
    using T = TypeParam;
    for (const MmShape& sh : kShapes)
        for (int with_bias = 0; with_bias < 2; ++with_bias)
            for (int offset = 0; offset < 2; ++offset) {
                const int N = sh.N, C = sh.C, OC = sh.OC;
                std::mt19937 rng(N * 31 + C + OC * 3 + with_bias + 2 * offset);
                auto inp = rand_vec<T>((size_t)N * C, rng), w = rand_vec<T>((size_t)OC * C, rng);
                auto b = rand_vec<T>(OC, rng), res = rand_vec<T>((size_t)N * OC, rng);
                std::vector<float> ref((size_t)N * OC);
                matmul_forward(ref.data(), inp.data(), w.data(), with_bias ? b.data() : nullptr, N,
                               C, OC);
                for (size_t i = 0; i < ref.size(); ++i) ref[i] += res[i];

                DevBuf<T> d_inp(inp.size()), d_w(w.size()), d_b(b.size()),
                    d_res(res.size() + offset), d_out(ref.size());
                d_inp.set(inp);
                d_w.set(w);
                d_b.set(b);
                std::vector<float> res_at(offset + res.size(), 0.0f);
                std::copy(res.begin(), res.end(), res_at.begin() + offset);
                d_res.set(res_at);
                matmul_forward_cuda<T>(d_out.p, d_inp.p, d_w.p, with_bias ? d_b.p : nullptr, N, C,
                                       OC, 0, false, nullptr, nullptr, d_res.p + offset);
                const std::string what = "forward + residual N=" + std::to_string(N) +
                                         " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                                         (with_bias ? " bias" : "") +
                                         (offset ? " residual off alignment" : "");
                EXPECT_REL(d_out.get(), ref, tol<T>(), what);
                EXPECT_EQ(d_res.get(), res_at) << what << ": the residual changed";
            }
    DevBuf<T> d(16);
    EXPECT_THROW(
        matmul_forward_cuda<T>(d.p, d.p, d.p, nullptr, 2, 2, 2, 0, true, nullptr, nullptr, d.p),
        tessera::Error)
        << "a residual after a GELU is refused";
}

TYPED_TEST(MatmulCuda, BackwardMatchesCpu) {
    using T = TypeParam;
    for (const MmShape& sh : kShapes) {
        const int N = sh.N, C = sh.C, OC = sh.OC;
        std::mt19937 rng(N + C + OC);
        auto inp = rand_vec<T>((size_t)N * C, rng), w = rand_vec<T>((size_t)OC * C, rng);
        auto dout = rand_vec<T>((size_t)N * OC, rng);
        auto dw0 = rand_vec<float>((size_t)OC * C, rng), db0 = rand_vec<float>(OC, rng);
        // CPU: dinp accumulates, so start it at zero (the GPU overwrites a poisoned buffer)
        std::vector<float> dinp((size_t)N * C, 0.0f), dw = dw0, db = db0;
        matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C,
                        OC);

        DevBuf<T> d_inp(inp.size()), d_w(w.size()), d_dout(dout.size()), d_dinp(dinp.size());
        DevBuf<float> d_dw(dw.size()), d_db(db.size());
        d_inp.set(inp);
        d_w.set(w);
        d_dout.set(dout);
        d_dw.set(dw0);
        d_db.set(db0);
        matmul_backward_cuda<T>(d_dinp.p, d_dw.p, d_db.p, d_dout.p, d_inp.p, d_w.p, N, C, OC, 0);
        std::string what = "backward N=" + std::to_string(N) + " C=" + std::to_string(C) +
                           " OC=" + std::to_string(OC);
        EXPECT_REL(d_dinp.get(), dinp, tol<T>(), what + " dinp");
        EXPECT_REL(d_dw.get(), dw, tol<T>(), what + " dweight (+=)");
        EXPECT_REL(d_db.get(), db, tol<T>(), what + " dbias (+=)");

        // null outputs are skipped: dweight only, twice -> accumulates twice
        d_dw.set(dw0);
        matmul_backward_cuda<T>(nullptr, d_dw.p, nullptr, d_dout.p, d_inp.p, d_w.p, N, C, OC, 0);
        matmul_backward_cuda<T>(nullptr, d_dw.p, nullptr, d_dout.p, d_inp.p, d_w.p, N, C, OC, 0);
        std::vector<float> dw2 = dw;
        for (size_t i = 0; i < dw2.size(); ++i) dw2[i] += dw[i] - dw0[i];
        EXPECT_REL(d_dw.get(), dw2, tol<T>(), what + " dweight twice");

        // dweight_overwrite (the step's first write of an unzeroed gradient): a NaN-filled
        // buffer comes out with the bits of += onto zeros
        d_dw.set(std::vector<float>(dw.size(), 0.0f));
        matmul_backward_cuda<T>(nullptr, d_dw.p, nullptr, d_dout.p, d_inp.p, d_w.p, N, C, OC, 0);
        const std::vector<float> onto_zeros = d_dw.get();
        d_dw.set(std::vector<float>(dw.size(), std::numeric_limits<float>::quiet_NaN()));
        matmul_backward_cuda<T>(nullptr, d_dw.p, nullptr, d_dout.p, d_inp.p, d_w.p, N, C, OC, 0,
                                nullptr, nullptr, true);
        EXPECT_EQ(d_dw.get(), onto_zeros) << what << " dweight overwritten";
    }
}

// A shape's first call times cuBLASLt's candidates with the call's own operands (matmul.cu): the
// weight gradient, which adds into what the buffer held, must come out as if only the chosen
// algorithm had run, and the choice is in the host's file. The shape is new to the host on every
// run (N from the process id), so the candidates are timed every time this test runs.
TEST(MatmulCudaChoice, TheFirstCallChoosesAndLeavesTheAccumulatedGradientAsItWas) {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    if (!matmul_choice_on()) GTEST_SKIP() << "TESSERA_GEMM_TUNING=off: no choosing";
    const int N = 1024 + 8 * (int)(getpid() % 4093), C = 256, OC = 512;
    std::mt19937 rng(7);
    auto inp = rand_vec<bf16>((size_t)N * C, rng), w = rand_vec<bf16>((size_t)OC * C, rng);
    auto dout = rand_vec<bf16>((size_t)N * OC, rng);
    auto dw0 = rand_vec<float>((size_t)OC * C, rng);
    std::vector<float> dinp((size_t)N * C, 0.0f), dw = dw0;
    matmul_backward(dinp.data(), dw.data(), nullptr, dout.data(), inp.data(), w.data(), N, C, OC);
    DevBuf<bf16> d_inp(inp.size()), d_w(w.size()), d_dout(dout.size()), d_dinp(dinp.size());
    DevBuf<float> d_dw(dw.size());
    d_inp.set(inp);
    d_w.set(w);
    d_dout.set(dout);
    d_dw.set(dw0);
    matmul_backward_cuda<bf16>(d_dinp.p, d_dw.p, nullptr, d_dout.p, d_inp.p, d_w.p, N, C, OC, 0);
    EXPECT_REL(d_dinp.get(), dinp, tol<bf16>(), "dinp");
    EXPECT_REL(d_dw.get(), dw, tol<bf16>(), "dweight (+=), once");
    std::ifstream in(matmul_choice_file());
    std::stringstream all;
    all << in.rdbuf();
    const std::string dweight_key =
        "_m" + std::to_string(C) + "n" + std::to_string(OC) + "k" + std::to_string(N) + "_";
    EXPECT_NE(all.str().find(dweight_key), std::string::npos)
        << matmul_choice_file() << " has no choice for the weight gradient's " << dweight_key;
}

// The input gradient through a GELU on the input (gelu_pre: its pre-activation), against the CPU's
// backward and gelu_backward; bf16 takes cuBLASLt's DGELU epilogue from 4096 rows where C % 8 == 0
// and the pre-activation is 16-byte aligned (the last shape), the separate kernel otherwise
// (fewer rows; C = 17; pre offset by one).
TYPED_TEST(MatmulCuda, BackwardThroughGeluMatchesCpu) {
    using T = TypeParam;
    std::vector<MmShape> shapes(std::begin(kShapes), std::end(kShapes));
    shapes.push_back({4096, 256, 64});
    for (const MmShape& sh : shapes)
        for (int offset : {0, 1}) {
            const int N = sh.N, C = sh.C, OC = sh.OC;
            std::mt19937 rng(N * 3 + C + OC + offset);
            auto inp = rand_vec<T>((size_t)N * C, rng), w = rand_vec<T>((size_t)OC * C, rng);
            auto dout = rand_vec<T>((size_t)N * OC, rng);
            // into GELU's curved part and its tails
            auto pre = rand_vec<T>((size_t)N * C + offset, rng, -3.0f, 3.0f);
            auto dw0 = rand_vec<float>((size_t)OC * C, rng), db0 = rand_vec<float>(OC, rng);
            std::vector<float> dinp((size_t)N * C, 0.0f), dw = dw0, db = db0;
            std::vector<float> pref(pre.begin() + offset, pre.end());
            matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N,
                            C, OC);
            gelu_backward_set(dinp.data(), pref.data(), dinp.data(), (int64_t)dinp.size());

            DevBuf<T> d_inp(inp.size()), d_w(w.size()), d_dout(dout.size()), d_pre(pre.size()),
                d_dinp(dinp.size());
            DevBuf<float> d_dw(dw.size()), d_db(db.size());
            d_inp.set(inp);
            d_w.set(w);
            d_dout.set(dout);
            d_pre.set(pre);
            d_dw.set(dw0);
            d_db.set(db0);
            matmul_backward_cuda<T>(d_dinp.p, d_dw.p, d_db.p, d_dout.p, d_inp.p, d_w.p, N, C, OC, 0,
                                    nullptr, d_pre.p + offset);
            std::string what = "backward through GELU N=" + std::to_string(N) +
                               " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                               " pre offset " + std::to_string(offset);
            EXPECT_REL(d_dinp.get(), dinp, tol<T>(), what + " dinp");
            EXPECT_REL(d_dw.get(), dw, tol<T>(), what + " dweight (+=)");
            EXPECT_REL(d_db.get(), db, tol<T>(), what + " dbias (+=)");
        }
}

TYPED_TEST(MatmulCuda, DbiasIsDeterministic) {
    using T = TypeParam;
    const int N = 1000, C = 8, OC = 77;
    std::mt19937 rng(3);
    auto dout = rand_vec<T>((size_t)N * OC, rng);
    DevBuf<T> d_dout(dout.size());
    DevBuf<float> d_db(OC);
    d_dout.set(dout);
    std::vector<float> first;
    for (int rep = 0; rep < 3; ++rep) {
        d_db.set(std::vector<float>(OC, 0.0f));
        matmul_backward_cuda<T>(nullptr, nullptr, d_db.p, d_dout.p, nullptr, nullptr, N, C, OC, 0);
        auto got = d_db.get();
        if (rep == 0)
            first = got;
        else
            EXPECT_EQ(got, first) << "dbias differs between identical runs";
    }
}

// The bias gradient over more rows than 128 chunks of 256 hold (each chunk then takes more rows),
// in two column groups (the second short): against the column sums in double, and the same bits
// in every run (the last block of each group adds the chunks up and sets its counter back).
TYPED_TEST(MatmulCuda, DbiasOverManyChunksMatchesCpuInEveryRun) {
    using T = TypeParam;
    const int N = 40011, OC = 264;
    std::mt19937 rng(7);
    auto dout = rand_vec<T>((size_t)N * OC, rng);
    auto db0 = rand_vec<float>(OC, rng);
    std::vector<float> ref(OC);
    for (int o = 0; o < OC; ++o) {
        double sum = db0[o];
        for (int n = 0; n < N; ++n) sum += dout[(size_t)n * OC + o];
        ref[o] = (float)sum;
    }
    DevBuf<T> d_dout(dout.size());
    DevBuf<float> d_db(OC);
    d_dout.set(dout);
    std::vector<float> first;
    for (int rep = 0; rep < 3; ++rep) {
        d_db.set(db0);
        matmul_backward_cuda<T>(nullptr, nullptr, d_db.p, d_dout.p, nullptr, nullptr, N, 8, OC, 0);
        auto got = d_db.get();
        EXPECT_REL(got, ref, 1e-4, "dbias N=40011 OC=264, run " + std::to_string(rep));
        if (rep == 0)
            first = got;
        else
            EXPECT_EQ(got, first) << "dbias differs between identical runs";
    }
}

TEST(MatmulCudaShapes, RejectsBadShape) {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    float* p = nullptr;
    EXPECT_THROW(matmul_forward_cuda<float>(p, p, p, p, 4, 0, 4, 0), tessera::Error);
}
