// The host's AdamW (engine/kernels/cpu/adamw.cpp) is vectorised and split over threads in spans,
// yet must give each element the bits of the formula evaluated one operation at a time: the CUDA
// kernel rounds that way too, and optimizer offload relies on host and device updates being the
// same bits. Here the update is held bit for bit to that formula written as a plain scalar loop
// (this file is compiled with -ffp-contract=off, as adamw.cpp is), over lengths that leave
// vector tails, cross a span and run on several threads, with and without weight decay,
// clipping and at several steps of the bias correction.
#include "engine/kernels/cpu/adamw.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

using namespace tessera;

namespace {

void scalar_adamw(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m,
                  std::vector<float>& v, const AdamWHyper& h, float grad_scale) {
    const double bc1 = 1.0 - std::pow((double)h.beta1, (double)h.t);
    const double bc2 = 1.0 - std::pow((double)h.beta2, (double)h.t);
    const float step_size = static_cast<float>(h.lr / bc1);
    const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
    for (size_t i = 0; i < p.size(); ++i) {
        const float gi = g[i] * grad_scale;
        const float mi = m[i] + (1.0f - h.beta1) * (gi - m[i]);
        const float vi = h.beta2 * v[i] + (1.0f - h.beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        const float pi = p[i] * (1.0f - h.lr * h.weight_decay);
        p[i] = pi - step_size * mi / (std::sqrt(vi) / bc2_sqrt + h.eps);
    }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(AdamW, VectorisedUpdateIsTheScalarFormulaBitForBit) {
    ASSERT_GE(omp_get_max_threads(), 1);
    std::mt19937 rng(11);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (const int64_t n : {1, 7, 16, 17, 16384, 16389, 100003}) {
        for (const auto& [wd, scale, t] :
             {std::tuple{0.0f, 1.0f, int64_t{1}}, std::tuple{0.1f, 0.37f, int64_t{3}},
              std::tuple{0.01f, 1.0f, int64_t{1000}}}) {
            std::vector<float> p(n), g(n), m(n), v(n);
            for (int64_t i = 0; i < n; ++i) {
                p[i] = d(rng);
                g[i] = d(rng) * 1e-2f;
                m[i] = d(rng) * 1e-3f;
                v[i] = std::abs(d(rng)) * 1e-5f;
            }
            std::vector<float> p2 = p, m2 = m, v2 = v;
            const AdamWHyper h{6e-4f, 0.9f, 0.95f, 1e-8f, wd, t};
            adamw_update(p.data(), g.data(), m.data(), v.data(), n, h, scale);
            scalar_adamw(p2, g, m2, v2, h, scale);
            EXPECT_TRUE(same_bits(p, p2)) << "parameters, n " << n << ", t " << t;
            EXPECT_TRUE(same_bits(m, m2)) << "first moment, n " << n << ", t " << t;
            EXPECT_TRUE(same_bits(v, v2)) << "second moment, n " << n << ", t " << t;
        }
    }
}

}  // namespace
