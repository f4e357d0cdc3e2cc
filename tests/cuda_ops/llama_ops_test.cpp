// The Llama family's CUDA ops against the CPU kernels (themselves checked against PyTorch in
// tests/model/llama_ops_test): RMSNorm forward and backward, rotary embeddings (default and
// Llama 3 scaled frequencies, strided rows holding query and key heads, and the inverse as the
// backward) and SwiGLU forward and backward; fp32 to 1e-5, bf16 to 1e-2 relative (tol<T>()),
// the CPU fed the same T-rounded inputs.
#include "engine/core/rope_scaling.h"
#include "engine/kernels/cpu/rmsnorm.h"
#include "engine/kernels/cpu/rope.h"
#include "engine/kernels/cpu/swiglu.h"
#include "engine/kernels/cuda/layernorm.cuh"
#include "engine/kernels/cuda/rope.cuh"
#include "engine/kernels/cuda/swiglu.cuh"
#include "tests/cuda_ops/cuda_test_util.h"

using namespace tessera;
using namespace tessera::test;

template <typename T>
class LlamaOpsCuda : public CudaTest {};
using ActTypes = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(LlamaOpsCuda, ActTypes);

struct NC {
    int N, C;
};
// odd C (scalar path), C % 8 == 0 (vector path), SmolLM's d_model, Qwen3-0.6B's (the one-pass
// backward's widest rows in bf16 in registers), rows over several of its blocks, and
// Llama-3.2-1B's (the shared-memory kernel)
static const NC kNormShapes[] = {{37, 97},    {37, 96},    {3, 5},   {300, 576},
                                 {130, 1024}, {40000, 64}, {9, 2048}};

TYPED_TEST(LlamaOpsCuda, RmsnormForwardAndBackwardMatchCpu) {
    using T = TypeParam;
    for (const NC& sh : kNormShapes) {
        const int N = sh.N, C = sh.C;
        const float eps = 1e-5f;
        std::mt19937 rng(N * 1000 + C);
        auto inp = rand_vec<T>((size_t)N * C, rng, -2.0f, 3.0f);
        auto w = rand_vec<T>(C, rng, 0.5f, 1.5f), dout = rand_vec<T>((size_t)N * C, rng);
        auto dinp0 = rand_vec<T>((size_t)N * C, rng), dw0 = rand_vec<float>(C, rng);
        std::vector<float> out((size_t)N * C), rstd(N);
        rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), N, C, eps);
        std::vector<float> dinp = dinp0, dw = dw0;
        rmsnorm_backward(dinp.data(), dw.data(), dout.data(), inp.data(), w.data(), rstd.data(), N,
                         C);

        DevBuf<T> d_inp(inp.size()), d_w(C), d_out(out.size()), d_dout(dout.size()),
            d_dinp(dinp.size());
        DevBuf<float> d_rstd(N), d_dw(C);
        d_inp.set(inp);
        d_w.set(w);
        d_dout.set(dout);
        d_dinp.set(dinp0);
        d_dw.set(dw0);
        rmsnorm_forward_cuda<T>(d_out.p, d_rstd.p, d_inp.p, d_w.p, N, C, eps, 0);
        const std::string what = "N=" + std::to_string(N) + " C=" + std::to_string(C);
        EXPECT_REL(d_out.get(), out, tol<T>(), what + " out");
        EXPECT_REL(d_rstd.get(), rstd, 1e-5, what + " rstd");
        d_rstd.set(rstd);
        rmsnorm_backward_cuda<T>(d_dinp.p, d_dw.p, d_dout.p, d_inp.p, d_w.p, d_rstd.p, N, C, 0);
        EXPECT_REL(d_dinp.get(), dinp, tol<T>(), what + " dinp (+=)");
        EXPECT_REL(d_dw.get(), dw, tol<T>(), what + " dweight (+=)");
    }
}

// q heads then k heads in rows of a wider qkv row, rotated in one call, then rotated back
TYPED_TEST(LlamaOpsCuda, RopeMatchesCpuAndInverts) {
    using T = TypeParam;
    struct Case {
        int B, T, heads, hd;
        long stride;
        RopeScaling scaling;
        float theta;
    };
    const Case cases[] = {
        {2, 37, 3, 64, 3 * 64 + 2 * 64, {}, 1e4f},  // GQA row, default
        {1, 300, 12, 64, 12 * 64 + 8 * 64, {"llama3", 32.0, 1.0, 4.0, 8192}, 5e5f},  // Llama 3.2
        {2, 5, 2, 128, 2 * 128, {"linear", 4.0, 1.0, 4.0, 8192}, 1e6f},  // linear, hd 128
    };
    for (const Case& c : cases) {
        const std::vector<float> inv = rope_inv_freq(c.hd, c.theta, c.scaling);
        std::mt19937 rng(c.T * 7 + c.hd);
        auto x = rand_vec<T>((size_t)c.B * c.T * c.stride, rng);
        std::vector<float> ref = x;
        rope_apply(ref.data(), c.B, c.T, c.heads, c.hd, c.stride, inv, false);
        DevBuf<T> d_x(x.size());
        DevBuf<float> d_inv(inv.size());
        d_x.set(x);
        d_inv.set(inv);
        rope_cuda<T>(d_x.p, c.B, c.T, c.heads, c.hd, c.stride, d_inv.p, false, 0);
        const std::string what =
            "T=" + std::to_string(c.T) + " hd=" + std::to_string(c.hd) + " " + c.scaling.type;
        EXPECT_REL(d_x.get(), ref, tol<T>(), what + " rotated");
        rope_cuda<T>(d_x.p, c.B, c.T, c.heads, c.hd, c.stride, d_inv.p, true, 0);
        EXPECT_REL(d_x.get(), x, 2 * tol<T>(), what + " rotated back");
    }
}

TYPED_TEST(LlamaOpsCuda, SwigluForwardAndBackwardMatchCpu) {
    using T = TypeParam;
    for (const NC& sh : {NC{37, 97}, NC{64, 1536}, NC{3, 8}}) {
        const int N = sh.N, F = sh.C;
        std::mt19937 rng(N * 13 + F);
        auto gu = rand_vec<T>((size_t)N * 2 * F, rng, -4.0f, 4.0f),
             dout = rand_vec<T>((size_t)N * F, rng);
        std::vector<float> out((size_t)N * F), dgu((size_t)N * 2 * F);
        swiglu_forward(out.data(), gu.data(), N, F);
        swiglu_backward(dgu.data(), dout.data(), gu.data(), N, F);
        DevBuf<T> d_gu(gu.size()), d_out(out.size()), d_dout(dout.size()), d_dgu(dgu.size());
        d_gu.set(gu);
        d_dout.set(dout);
        swiglu_forward_cuda<T>(d_out.p, d_gu.p, N, F, 0);
        swiglu_backward_cuda<T>(d_dgu.p, d_dout.p, d_gu.p, N, F, 0);
        const std::string what = "N=" + std::to_string(N) + " F=" + std::to_string(F);
        EXPECT_REL(d_out.get(), out, tol<T>(), what + " out");
        EXPECT_REL(d_dgu.get(), dgu, tol<T>(), what + " dgate, dup");
    }
}

// Qwen3's per-head RMSNorm on the q heads of qkv rows (row stride wider than the heads), the
// backward in place as the block calls it
TYPED_TEST(LlamaOpsCuda, HeadRmsnormMatchesCpuInPlace) {
    using T = TypeParam;
    const int N = 70, heads = 3, hd = 128;
    const long stride = heads * hd + 2 * hd;  // q heads, then k and v of one kv head
    std::mt19937 rng(5);
    auto inp = rand_vec<T>((size_t)N * stride, rng, -2.0f, 2.0f),
         dout = rand_vec<T>((size_t)N * stride, rng);
    auto w = rand_vec<T>(hd, rng, 0.5f, 1.5f), dw0 = rand_vec<float>(hd, rng);
    std::vector<float> out = inp, rstd((size_t)N * heads), dinp = dout, dw = dw0;
    rmsnorm_heads_forward(out.data(), rstd.data(), inp.data(), w.data(), N, heads, hd, stride,
                          1e-6f);
    rmsnorm_heads_backward(dinp.data(), dw.data(), dinp.data(), inp.data(), w.data(), rstd.data(),
                           N, heads, hd, stride);
    DevBuf<T> d_inp(inp.size()), d_out(inp.size()), d_w(hd), d_g(dout.size());
    DevBuf<float> d_rstd(rstd.size()), d_dw(hd);
    d_inp.set(inp);
    d_out.set(inp);  // the columns past the heads keep their values
    d_w.set(w);
    d_g.set(dout);
    d_dw.set(dw0);
    rmsnorm_heads_forward_cuda<T>(d_out.p, d_rstd.p, d_inp.p, d_w.p, N, heads, hd, stride, 1e-6f,
                                  0);
    EXPECT_REL(d_out.get(), out, tol<T>(), "heads forward");
    EXPECT_REL(d_rstd.get(), rstd, 1e-5, "heads rstd");
    rmsnorm_heads_backward_cuda<T>(d_g.p, d_dw.p, d_g.p, d_inp.p, d_w.p, d_rstd.p, N, heads, hd,
                                   stride, 0);
    EXPECT_REL(d_g.get(), dinp, tol<T>(), "heads backward in place");
    EXPECT_REL(d_dw.get(), dw, tol<T>(), "heads dweight (+=)");
}
