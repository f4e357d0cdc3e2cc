// Per-layer gradient checks by central finite differences: for each CPU kernel, the analytic
// backward against (f(x + h) - f(x - h)) / 2h of the scalar f = sum(out * R) with random R.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/cross_entropy.h"
#include "engine/kernels/cpu/embedding.h"
#include "engine/kernels/cpu/gelu.h"
#include "engine/kernels/cpu/layernorm.h"
#include "engine/kernels/cpu/matmul.h"

using namespace tessera;
using Vec = std::vector<float>;

namespace {

Vec randn(size_t n, unsigned seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    Vec v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// Checks d f / d x[i] for a spread of indices; f re-evaluates the forward in double sum.
void expect_gradient(Vec& x, const Vec& analytic, const std::function<double()>& f,
                     const char* what, double h = 1e-2, double tol = 2e-2) {
    ASSERT_EQ(x.size(), analytic.size());
    size_t step = std::max<size_t>(1, x.size() / 37);
    int checked = 0;
    for (size_t i = 0; i < x.size(); i += step) {
        float orig = x[i];
        x[i] = orig + (float)h;
        double fp = f();
        x[i] = orig - (float)h;
        double fm = f();
        x[i] = orig;
        double numeric = (fp - fm) / (2 * h);
        double denom = std::max(1.0, std::fabs(numeric));
        EXPECT_LE(std::fabs(numeric - analytic[i]) / denom, tol)
            << what << " index " << i << ": numeric " << numeric << " analytic " << analytic[i];
        ++checked;
    }
    EXPECT_GE((size_t)checked, std::min<size_t>(x.size(), 30));
}

double dot(const Vec& a, const Vec& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += (double)a[i] * b[i];
    return s;
}

}  // namespace

TEST(GradCheck, Matmul) {
    const int N = 6, C = 8, OC = 5;
    Vec x = randn(N * C, 1), w = randn(OC * C, 2), b = randn(OC, 3), R = randn(N * OC, 4);
    Vec out(N * OC);
    auto f = [&] {
        matmul_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC);
        return dot(out, R);
    };
    Vec dx(N * C, 0), dw(OC * C, 0), db(OC, 0);
    matmul_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), N, C, OC);
    expect_gradient(x, dx, f, "matmul dinp");
    expect_gradient(w, dw, f, "matmul dweight");
    expect_gradient(b, db, f, "matmul dbias");
}

TEST(GradCheck, LayerNorm) {
    const int N = 5, C = 16;
    Vec x = randn(N * C, 5), w = randn(C, 6), b = randn(C, 7), R = randn(N * C, 8);
    Vec out(N * C), mean(N), rstd(N);
    auto f = [&] {
        layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
        return dot(out, R);
    };
    f();
    Vec dx(N * C, 0), dw(C, 0), db(C, 0);
    layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), mean.data(),
                       rstd.data(), N, C);
    expect_gradient(x, dx, f, "layernorm dinp");
    expect_gradient(w, dw, f, "layernorm dweight");
    expect_gradient(b, db, f, "layernorm dbias");
}

TEST(GradCheck, Gelu) {
    const int N = 64;
    Vec x = randn(N, 9, 2.0f), R = randn(N, 10), out(N);
    auto f = [&] {
        gelu_forward(out.data(), x.data(), N);
        return dot(out, R);
    };
    Vec dx(N, 0);
    gelu_backward(dx.data(), x.data(), R.data(), N);
    expect_gradient(x, dx, f, "gelu", 1e-3);
}

TEST(GradCheck, CausalAttention) {
    const int B = 2, T = 7, C = 12, NH = 3;
    Vec qkv = randn(B * T * 3 * C, 11), R = randn(B * T * C, 12);
    Vec out(B * T * C), att(B * NH * T * T);
    auto f = [&] {
        attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
        return dot(out, R);
    };
    f();
    Vec dqkv(qkv.size(), 0);
    attention_backward(dqkv.data(), R.data(), qkv.data(), att.data(), B, T, C, NH);
    expect_gradient(qkv, dqkv, f, "attention dqkv");
    // causality: output at t = 0 must not depend on any later key or value
    Vec before = out;
    qkv[(size_t)(1 * 3 * C) + C + 0] += 5.0f;  // key of position 1, batch 0
    f();
    for (int c = 0; c < C; ++c) EXPECT_EQ(before[c], out[c]) << "position 0 saw position 1";
}

TEST(GradCheck, CrossEntropy) {
    const int N = 4, V = 11;
    Vec logits = randn(N * V, 13);
    std::vector<int32_t> tgt{3, 0, 10, 7};
    Vec work(N * V), losses(N);
    auto f = [&] {
        work = logits;
        cross_entropy_forward(losses.data(), work.data(), tgt.data(), N, V);
        double s = 0;
        for (float l : losses) s += l;
        return s;
    };
    f();
    Vec probs = work;
    cross_entropy_backward(probs.data(), tgt.data(), 1.0f, N, V);
    expect_gradient(logits, probs, f, "cross entropy dlogits", 1e-3);
}

TEST(GradCheck, Embedding) {
    const int B = 2, T = 3, C = 4, V = 5;
    Vec wte = randn(V * C, 14), wpe = randn(T * C, 15), R = randn(B * T * C, 16);
    std::vector<int32_t> inp{1, 4, 1, 0, 2, 1};  // token 1 repeats: gradients must add up
    Vec out(B * T * C);
    auto f = [&] {
        embedding_forward(out.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
        return dot(out, R);
    };
    Vec dwte(V * C, 0), dwpe(T * C, 0);
    embedding_backward(dwte.data(), dwpe.data(), R.data(), inp.data(), B, T, C);
    expect_gradient(wte, dwte, f, "embedding dwte");
    expect_gradient(wpe, dwpe, f, "embedding dwpe");
}
