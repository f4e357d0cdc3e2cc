// The fused CUDA attention (engine/kernels/cuda/attention.cu) against the CPU reference
// (engine/kernels/cpu/attention.cpp): forward output, logsumexp and the backward's dq, dk, dv at
// shapes covering every head size, T = 1, T not a multiple of the tile, several tiles and
// grouped-query attention (fewer key/value heads than query heads, the Llama family); fp32
// to 1e-5 and bf16 to 1e-2 (relative to the largest reference value, the CPU fed the same
// bf16-rounded inputs). Outputs are poisoned with 0xFF bytes (NaN) first, so an element the
// kernels forget to write fails. Every GPU test skips when no CUDA device is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cuda/attention.cuh"

using namespace tessera;

namespace {

// ---------------------------------------------------------------------------------------------
// helpers

bool cuda_device_present() {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define SKIP_WITHOUT_GPU() \
    if (!cuda_device_present()) GTEST_SKIP() << "no CUDA device"

void check_cuda(cudaError_t err, const char* what) {
    if (err != cudaSuccess)
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

struct DeviceFree {
    void operator()(void* p) const { cudaFree(p); }
};
using DeviceBuf = std::unique_ptr<void, DeviceFree>;

DeviceBuf device_alloc(size_t bytes) {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, bytes), "cudaMalloc");
    return DeviceBuf(p);
}

// bf16 round-to-nearest-even, as __float2bfloat16 does (inputs here are finite).
uint16_t bf16_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
float bf16_value(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// x rounded to what T can hold.
template <typename T>
std::vector<float> round_to(std::vector<float> x) {
    if constexpr (std::is_same_v<T, bf16>)
        for (float& v : x) v = bf16_value(bf16_bits(v));
    return x;
}

template <typename T>
DeviceBuf upload(const std::vector<float>& x) {
    DeviceBuf d = device_alloc(x.size() * sizeof(T));
    if constexpr (std::is_same_v<T, bf16>) {
        std::vector<uint16_t> bits(x.size());
        for (size_t i = 0; i < x.size(); ++i) bits[i] = bf16_bits(x[i]);
        check_cuda(cudaMemcpy(d.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice),
                   "upload");
    } else {
        check_cuda(cudaMemcpy(d.get(), x.data(), x.size() * 4, cudaMemcpyHostToDevice), "upload");
    }
    return d;
}

template <typename T>
std::vector<float> download(const DeviceBuf& d, size_t n) {
    std::vector<float> x(n);
    if constexpr (std::is_same_v<T, bf16>) {
        std::vector<uint16_t> bits(n);
        check_cuda(cudaMemcpy(bits.data(), d.get(), n * 2, cudaMemcpyDeviceToHost), "download");
        for (size_t i = 0; i < n; ++i) x[i] = bf16_value(bits[i]);
    } else {
        check_cuda(cudaMemcpy(x.data(), d.get(), n * 4, cudaMemcpyDeviceToHost), "download");
    }
    return x;
}

void poison(const DeviceBuf& d, size_t bytes) {
    check_cuda(cudaMemset(d.get(), 0xFF, bytes), "cudaMemset");  // NaN in fp32 and bf16
}

std::vector<float> random_vector(size_t n, float lo, float hi, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> x(n);
    for (float& v : x) v = dist(rng);
    return x;
}

// Every element finite and max|got - ref| <= tol * max(max|ref|, floor). The floor matters where
// the reference is all zeros (dq, dk at T = 1: one key, softmax constant).
void expect_close(const char* what, const std::vector<float>& got, const std::vector<float>& ref,
                  double tol, double floor = 1e-6) {
    ASSERT_EQ(got.size(), ref.size()) << what;
    double max_ref = floor, max_diff = 0;
    size_t bad = 0, worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!std::isfinite(got[i])) {
            if (bad++ == 0)
                ADD_FAILURE() << what << ": element " << i << " is " << got[i] << " (unwritten?)";
            continue;
        }
        max_ref = std::max(max_ref, (double)std::fabs(ref[i]));
        const double d = std::fabs((double)got[i] - ref[i]);
        if (d > max_diff) max_diff = d, worst = i;
    }
    EXPECT_EQ(bad, 0u) << what << ": non-finite elements";
    std::printf("  %-4s max|diff|/max|ref| = %.3g\n", what, max_diff / max_ref);
    EXPECT_LE(max_diff / max_ref, tol)
        << what << ": max|diff| " << max_diff << " at " << worst << " (got " << got[worst]
        << ", ref " << ref[worst] << "), max|ref| " << max_ref;
}

// lse (B, NH, T) of the scaled causal scores, in double; qkv rows [q (C) | k (KV·hs) | v].
std::vector<float> reference_lse(const std::vector<float>& qkv, int B, int T, int C, int NH,
                                 int KV) {
    const int hs = C / NH;
    const size_t W = C + 2 * KV * hs;
    const double scale = 1.0 / std::sqrt((double)hs);
    std::vector<float> lse((size_t)B * NH * T);
    std::vector<double> s(T);
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; ++h)
            for (int t = 0; t < T; ++t) {
                const float* q = &qkv[((size_t)b * T + t) * W + h * hs];
                double m = -INFINITY;
                for (int j = 0; j <= t; ++j) {
                    const float* k = &qkv[((size_t)b * T + j) * W + C + (h / (NH / KV)) * hs];
                    double dot = 0;
                    for (int d = 0; d < hs; ++d) dot += (double)q[d] * k[d];
                    s[j] = dot * scale;
                    m = std::max(m, s[j]);
                }
                double sum = 0;
                for (int j = 0; j <= t; ++j) sum += std::exp(s[j] - m);
                lse[((size_t)b * NH + h) * T + t] = (float)(m + std::log(sum));
            }
    return lse;
}

// Columns [c0, c0 + n) of a (BT, W) array.
std::vector<float> columns(const std::vector<float>& x, int BT, size_t W, size_t c0, size_t n) {
    std::vector<float> y((size_t)BT * n);
    for (int r = 0; r < BT; ++r)
        for (size_t c = 0; c < n; ++c) y[(size_t)r * n + c] = x[(size_t)r * W + c0 + c];
    return y;
}

struct Shape {
    int B, T, C, NH, KV = 0;  // KV 0: as many key/value heads as query heads
    int kv() const { return KV ? KV : NH; }
};

std::string shape_name(const Shape& s) {
    return "B" + std::to_string(s.B) + "_T" + std::to_string(s.T) + "_C" + std::to_string(s.C) +
           "_NH" + std::to_string(s.NH) + (s.KV ? "_KV" + std::to_string(s.KV) : "");
}

// Forward and backward of one shape on the GPU vs the CPU.
template <typename T>
void check_against_cpu(const Shape& sh, double tol, uint32_t seed) {
    const int B = sh.B, T_ = sh.T, C = sh.C, NH = sh.NH, KV = sh.kv(), hs = C / NH;
    const size_t W = C + 2 * (size_t)KV * hs;  // a qkv row
    const size_t n_qkv = (size_t)B * T_ * W, n_out = (size_t)B * T_ * C,
                 n_lse = (size_t)B * NH * T_;
    std::mt19937 rng(seed);
    const std::vector<float> qkv = round_to<T>(random_vector(n_qkv, -1.5f, 1.5f, rng));
    const std::vector<float> dout = round_to<T>(random_vector(n_out, -1.0f, 1.0f, rng));

    // CPU reference (its backward accumulates: start from zeros)
    std::vector<float> out_ref(n_out), att((size_t)B * NH * T_ * T_), dqkv_ref(n_qkv, 0.0f);
    attention_forward(out_ref.data(), att.data(), qkv.data(), B, T_, C, NH, KV);
    attention_backward(dqkv_ref.data(), dout.data(), qkv.data(), att.data(), B, T_, C, NH, KV);
    const std::vector<float> lse_ref = reference_lse(qkv, B, T_, C, NH, KV);

    DeviceBuf d_qkv = upload<T>(qkv), d_dout = upload<T>(dout);
    DeviceBuf d_out = device_alloc(n_out * sizeof(T)), d_lse = device_alloc(n_lse * 4),
              d_dqkv = device_alloc(n_qkv * sizeof(T));
    poison(d_out, n_out * sizeof(T));
    poison(d_lse, n_lse * 4);
    poison(d_dqkv, n_qkv * sizeof(T));
    attention_forward_cuda<T>((T*)d_out.get(), (float*)d_lse.get(), (const T*)d_qkv.get(), B, T_, C,
                              NH, KV, nullptr);
    attention_backward_cuda<T>((T*)d_dqkv.get(), (const T*)d_dout.get(), (const T*)d_qkv.get(),
                               (const T*)d_out.get(), (const float*)d_lse.get(), B, T_, C, NH, KV,
                               nullptr);
    check_cuda(cudaDeviceSynchronize(), "attention kernels");

    expect_close("out", download<T>(d_out, n_out), out_ref, tol);
    // lse is O(1) or larger: compare it absolutely (relative to max(1, |lse|))
    std::vector<float> lse = download<float>(d_lse, n_lse), lse_ref1 = lse_ref;
    lse.push_back(1.0f);  // a common element 1 makes the denominator max(1, max|lse|)
    lse_ref1.push_back(1.0f);
    expect_close("lse", lse, lse_ref1, tol);
    const std::vector<float> dqkv = download<T>(d_dqkv, n_qkv);
    double max_dqkv = 0;
    for (float v : dqkv_ref) max_dqkv = std::max(max_dqkv, (double)std::fabs(v));
    const char* parts[3] = {"dq", "dk", "dv"};
    const size_t c0[3] = {0, (size_t)C, (size_t)C + (size_t)KV * hs},
                 n[3] = {(size_t)C, (size_t)KV * hs, (size_t)KV * hs};
    for (int p = 0; p < 3; ++p)
        expect_close(parts[p], columns(dqkv, B * T_, W, c0[p], n[p]),
                     columns(dqkv_ref, B * T_, W, c0[p], n[p]), tol, 0.1 * max_dqkv);
}

const Shape kShapes[] = {
    {2, 1, 64, 2},      // T = 1
    {2, 37, 64, 2},     // T not a multiple of any tile
    {1, 128, 128, 4},   // hs 32
    {2, 200, 256, 2},   // hs 128, partial last tile
    {2, 256, 768, 12},  // GPT-2 heads (hs 64), several tiles
    // many tiles with a partial last one: the double-buffered (cp.async) tile loops of the bf16
    // kernels run through both stages several times, per head size
    {1, 1000, 256, 4},  // hs 64
    {1, 333, 256, 2},   // hs 128 (the backward's 32-row steps)
    {2, 520, 128, 4},   // hs 32
    // grouped-query attention: several query heads per key/value head (SmolLM: 9 on 3, hs 64;
    // Llama 3.2: 32 on 8; Qwen3-like hs 128 on 1 kv head), partial tiles
    {2, 200, 576, 9, 3},
    {1, 333, 512, 8, 2},
    {2, 130, 512, 4, 1},
    {1, 1000, 256, 4, 2},
    // grids of more than 1.5 waves on an H200 (132 SMs, 2 dK/dV blocks each): the dK/dV pass on
    // 128-key tiles; every smaller grid above takes its 64-key tiles (dkv_grid_is_small)
    {10, 520, 768, 12},    // 5 key tiles x 12 heads x 10 = 600 blocks, a partial last tile
    {20, 520, 512, 8, 4},  // 5 x 4 kv heads x 20 = 400 blocks
};

// ---------------------------------------------------------------------------------------------
// tests

class CudaAttention : public ::testing::TestWithParam<Shape> {};

TEST_P(CudaAttention, Fp32MatchesCpu) {
    SKIP_WITHOUT_GPU();
    check_against_cpu<float>(GetParam(), 1e-5, 1234);
}

TEST_P(CudaAttention, Bf16MatchesCpu) {
    SKIP_WITHOUT_GPU();
    check_against_cpu<bf16>(GetParam(), 1e-2, 4321);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttention, ::testing::ValuesIn(kShapes),
                         [](const ::testing::TestParamInfo<Shape>& i) {
                             return shape_name(i.param);
                         });

// Changing the key and value at position t0 leaves outputs before t0 unchanged and changes the
// ones from t0 on.
template <typename T>
void check_causal() {
    const int B = 1, T_ = 100, C = 64, NH = 2, t0 = 50;  // t0 mid-tile for both tile sizes
    const size_t n_qkv = (size_t)B * T_ * 3 * C, n_out = (size_t)B * T_ * C;
    std::mt19937 rng(7);
    std::vector<float> qkv = round_to<T>(random_vector(n_qkv, -1.5f, 1.5f, rng));
    DeviceBuf d_out = device_alloc(n_out * sizeof(T)),
              d_lse = device_alloc((size_t)B * NH * T_ * 4);
    auto run = [&](const std::vector<float>& x) {
        DeviceBuf d_qkv = upload<T>(x);
        poison(d_out, n_out * sizeof(T));
        attention_forward_cuda<T>((T*)d_out.get(), (float*)d_lse.get(), (const T*)d_qkv.get(), B,
                                  T_, C, NH, NH, nullptr);
        check_cuda(cudaDeviceSynchronize(), "attention forward");
        return download<T>(d_out, n_out);
    };
    const std::vector<float> before = run(qkv);
    for (int c = C; c < 3 * C; ++c)
        qkv[(size_t)t0 * 3 * C + c] = round_to<T>({(float)(c % 7) - 3.0f})[0];
    const std::vector<float> after = run(qkv);
    double max_abs = 0;
    for (float v : before) max_abs = std::max(max_abs, (double)std::fabs(v));
    double past_diff = 0, future_diff = 0;
    for (int t = 0; t < T_; ++t)
        for (int c = 0; c < C; ++c) {
            const double d =
                std::fabs((double)after[(size_t)t * C + c] - before[(size_t)t * C + c]);
            double& worst = t < t0 ? past_diff : future_diff;
            worst = std::max(worst, d);
        }
    EXPECT_LE(past_diff, 1e-6 * max_abs) << "outputs before t0 depend on the key/value at t0";
    EXPECT_GT(future_diff, 1e-3 * max_abs) << "outputs from t0 on ignore the key/value at t0";
}

TEST(CudaAttentionCausal, Fp32FutureKeyDoesNotLeak) {
    SKIP_WITHOUT_GPU();
    check_causal<float>();
}

TEST(CudaAttentionCausal, Bf16FutureKeyDoesNotLeak) {
    SKIP_WITHOUT_GPU();
    check_causal<bf16>();
}

// Two backward runs on the same inputs give bit-identical gradients (no atomics).
TEST(CudaAttentionDeterminism, Bf16BackwardIsBitIdentical) {
    SKIP_WITHOUT_GPU();
    const int B = 2, T_ = 300, C = 256, NH = 4;
    const size_t n_qkv = (size_t)B * T_ * 3 * C, n_out = (size_t)B * T_ * C;
    std::mt19937 rng(11);
    DeviceBuf d_qkv = upload<bf16>(round_to<bf16>(random_vector(n_qkv, -1.5f, 1.5f, rng)));
    DeviceBuf d_dout = upload<bf16>(round_to<bf16>(random_vector(n_out, -1.0f, 1.0f, rng)));
    DeviceBuf d_out = device_alloc(n_out * 2), d_lse = device_alloc((size_t)B * NH * T_ * 4),
              d_dqkv = device_alloc(n_qkv * 2);
    attention_forward_cuda<bf16>((bf16*)d_out.get(), (float*)d_lse.get(), (const bf16*)d_qkv.get(),
                                 B, T_, C, NH, NH, nullptr);
    std::vector<uint16_t> first(n_qkv), second(n_qkv);
    for (std::vector<uint16_t>* dst : {&first, &second}) {
        poison(d_dqkv, n_qkv * 2);
        attention_backward_cuda<bf16>((bf16*)d_dqkv.get(), (const bf16*)d_dout.get(),
                                      (const bf16*)d_qkv.get(), (const bf16*)d_out.get(),
                                      (const float*)d_lse.get(), B, T_, C, NH, NH, nullptr);
        check_cuda(cudaMemcpy(dst->data(), d_dqkv.get(), n_qkv * 2, cudaMemcpyDeviceToHost),
                   "download");
    }
    EXPECT_TRUE(first == second) << "backward is not deterministic";
}

// The launchers reject bad shapes before touching the device (runs without a GPU).
TEST(CudaAttentionChecks, RejectsUnsupportedShapes) {
    float* fake = reinterpret_cast<float*>(uintptr_t{4096});
    auto fwd = [&](int B, int T_, int C, int NH) {
        attention_forward_cuda<float>(fake, fake, fake, B, T_, C, NH, NH, nullptr);
    };
    auto bwd = [&](int B, int T_, int C, int NH) {
        attention_backward_cuda<float>(fake, fake, fake, fake, fake, B, T_, C, NH, NH, nullptr);
    };
    try {
        fwd(1, 4, 48, 1);  // hs 48
        FAIL() << "head size 48 accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("head size C/NH=48"), std::string::npos) << e.what();
    }
    EXPECT_THROW(fwd(1, 4, 64, 3), Error);  // C % NH != 0
    EXPECT_THROW(attention_forward_cuda<float>(fake, fake, fake, 1, 4, 256, 4, 3, nullptr),
                 Error);                     // 4 query heads do not share 3 kv heads
    EXPECT_THROW(fwd(1, 0, 64, 2), Error);   // T = 0
    EXPECT_THROW(fwd(1, 4, 512, 2), Error);  // hs 256
    EXPECT_THROW(bwd(1, 4, 48, 1), Error);
    EXPECT_THROW(bwd(1, 4, 64, 3), Error);
    EXPECT_THROW(attention_forward_cuda<float>(nullptr, fake, fake, 1, 4, 64, 2, 2, nullptr),
                 Error);
    EXPECT_THROW(
        attention_backward_cuda<float>(fake, fake, nullptr, fake, fake, 1, 4, 64, 2, 2, nullptr),
        Error);
    EXPECT_THROW(attention_forward_cuda<float>(fake, fake, fake + 1, 1, 4, 64, 2, 2, nullptr),
                 Error);  // qkv not 16-byte aligned
}

}  // namespace
