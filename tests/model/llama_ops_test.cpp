// The Llama family's CPU kernels against PyTorch (python3-torch, CPU, fp32): RMSNorm, SwiGLU,
// rotary embeddings (default, linear and llama3 frequencies) and grouped-query attention, each
// forward and backward (autograd on a random output gradient). The reference,
// tests/model/torch_llama_ops.py, is written from the published architecture. Tolerance: the
// largest difference within 1e-5 of the tensor's largest magnitude.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/io/safetensors.h"
#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/rmsnorm.h"
#include "engine/kernels/cpu/rope.h"
#include "engine/kernels/cpu/swiglu.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

struct Io {
    std::map<std::string, std::pair<Shape, std::vector<float>>> in;
    nlohmann::json cases = nlohmann::json::object();
    std::mt19937 rng{2024};
    std::vector<float>& add(const std::string& name, Shape shape, float scale = 1.0f) {
        std::normal_distribution<float> d(0.0f, scale);
        std::vector<float> v(shape_numel(shape));
        for (float& x : v) x = d(rng);
        return (in[name] = {shape, std::move(v)}).second;
    }
};

SafetensorsFile reference(Io& io) {
    static const tessera::test_support::TempDir scratch("llama_ops");  // removed at exit
    const fs::path& dir = scratch.path();
    std::vector<TensorView> views;
    for (auto& [name, t] : io.in) views.push_back({name, DType::f32, t.first, t.second.data()});
    const std::string in = (dir / "in.safetensors").string(),
                      out = (dir / "out.safetensors").string();
    safetensors_write(in, views, {{"cases", io.cases.dump()}});
    const std::string cmd = "/usr/bin/python3 " + std::string(TESSERA_TESTS_DIR) +
                            "/model/torch_llama_ops.py " + in + " " + out;
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("reference failed: " + cmd);
    return SafetensorsFile::open(out);
}

std::vector<float> get(const SafetensorsFile& f, const std::string& name) {
    const auto* e = f.find(name);
    if (!e) throw std::runtime_error("reference lacks " + name);
    std::vector<float> v(shape_numel(e->shape));
    f.read_f32(name, e->shape, v.data());
    return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& ref,
                  const std::string& what) {
    ASSERT_EQ(got.size(), ref.size()) << what;
    double md = 0, mb = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        md = std::max(md, (double)std::fabs(got[i] - ref[i]));
        mb = std::max(mb, (double)std::fabs(ref[i]));
    }
    EXPECT_LE(md, 1e-5 * mb) << what << ": largest difference " << md << " (largest value " << mb
                             << ")";
}

TEST(LlamaOps, MatchPyTorch) {
    Io io;
    const int N = 24, C = 48, F = 40;
    // RMSNorm
    io.cases["rms"] = {{"kind", "rmsnorm"}, {"eps", 1e-5}};
    auto& rx = io.add("rms.x", {N, C});
    auto& rw = io.add("rms.w", {C}, 0.5f);
    for (float& w : rw) w += 1.0f;
    auto& rd = io.add("rms.dout", {N, C});
    // SwiGLU: gate and up stored apart for the reference, side by side per row for the kernel
    io.cases["swiglu"] = {{"kind", "swiglu"}};
    auto& sg = io.add("swiglu.gate", {N, F}, 2.0f);
    auto& su = io.add("swiglu.up", {N, F});
    auto& sd = io.add("swiglu.dout", {N, F});
    // rotary embeddings: (B, T, H, hd), three frequency rules
    const int B = 2, T = 16, H = 3, hd = 16;
    const std::vector<std::pair<std::string, RopeScaling>> ropes{
        {"rope", {}},
        {"rope_linear", {"linear", 4.0f}},
        {"rope_llama3", {"llama3", 32.0f, 1.0f, 4.0f, 8}}};
    for (const auto& [name, s] : ropes) {
        nlohmann::json sc = s.type.empty()
                                ? nlohmann::json::object()
                                : nlohmann::json{{"type", s.type},
                                                 {"factor", s.factor},
                                                 {"low_freq_factor", s.low_freq_factor},
                                                 {"high_freq_factor", s.high_freq_factor},
                                                 {"original_max_position_embeddings",
                                                  s.original_max_position_embeddings}};
        io.cases[name] = {
            {"kind", "rope"}, {"hd", hd}, {"theta", 10000.0}, {"T", T}, {"scaling", sc}};
        io.add(name + ".x", {B, T, H, hd});
        io.add(name + ".dout", {B, T, H, hd});
    }
    // grouped-query attention: 6 query heads over 2 kv heads
    const int NH = 6, KV = 2, ahd = 8;
    io.cases["gqa"] = {
        {"kind", "attention"}, {"B", B}, {"T", T}, {"NH", NH}, {"KV", KV}, {"hd", ahd}};
    auto& q = io.add("gqa.q", {B, T, NH, ahd});
    auto& k = io.add("gqa.k", {B, T, KV, ahd});
    auto& v = io.add("gqa.v", {B, T, KV, ahd});
    auto& ad = io.add("gqa.dout", {B, T, NH * ahd});
    const SafetensorsFile ref = reference(io);

    {
        std::vector<float> out((size_t)N * C), rstd(N), dx((size_t)N * C, 0.0f), dw(C, 0.0f);
        rmsnorm_forward(out.data(), rstd.data(), rx.data(), rw.data(), N, C, 1e-5f);
        rmsnorm_backward(dx.data(), dw.data(), rd.data(), rx.data(), rw.data(), rstd.data(), N, C);
        expect_close(out, get(ref, "rms.out"), "rmsnorm forward");
        expect_close(dx, get(ref, "rms.dx"), "rmsnorm d input");
        expect_close(dw, get(ref, "rms.dw"), "rmsnorm d weight");
    }
    {
        std::vector<float> gu((size_t)N * 2 * F), out((size_t)N * F), dgu((size_t)N * 2 * F);
        for (int n = 0; n < N; ++n)
            for (int i = 0; i < F; ++i)
                gu[(size_t)n * 2 * F + i] = sg[(size_t)n * F + i],
                                       gu[(size_t)n * 2 * F + F + i] = su[(size_t)n * F + i];
        swiglu_forward(out.data(), gu.data(), N, F);
        swiglu_backward(dgu.data(), sd.data(), gu.data(), N, F);
        std::vector<float> dg((size_t)N * F), du((size_t)N * F);
        for (int n = 0; n < N; ++n)
            for (int i = 0; i < F; ++i)
                dg[(size_t)n * F + i] = dgu[(size_t)n * 2 * F + i],
                                   du[(size_t)n * F + i] = dgu[(size_t)n * 2 * F + F + i];
        expect_close(out, get(ref, "swiglu.out"), "swiglu forward");
        expect_close(dg, get(ref, "swiglu.dgate"), "swiglu d gate");
        expect_close(du, get(ref, "swiglu.dup"), "swiglu d up");
    }
    for (const auto& [name, s] : ropes) {
        const std::vector<float> inv = rope_inv_freq(hd, 10000.0f, s);
        expect_close(inv, get(ref, name + ".inv_freq"), name + " inverse frequencies");
        std::vector<float> x = io.in[name + ".x"].second, d = io.in[name + ".dout"].second;
        rope_apply(x.data(), B, T, H, hd, (long)H * hd, inv, false);
        rope_apply(d.data(), B, T, H, hd, (long)H * hd, inv, true);
        expect_close(x, get(ref, name + ".out"), name + " forward");
        expect_close(d, get(ref, name + ".dx"), name + " backward");
    }
    {
        const int CQ = NH * ahd, CK = KV * ahd, S = CQ + 2 * CK;
        std::vector<float> qkv((size_t)B * T * S), out((size_t)B * T * CQ),
            att((size_t)B * NH * T * T);
        for (int r = 0; r < B * T; ++r)
            for (int i = 0; i < S; ++i)
                qkv[(size_t)r * S + i] = i < CQ        ? q[(size_t)r * CQ + i]
                                         : i < CQ + CK ? k[(size_t)r * CK + i - CQ]
                                                       : v[(size_t)r * CK + i - CQ - CK];
        attention_forward(out.data(), att.data(), qkv.data(), B, T, CQ, NH, KV);
        std::vector<float> dqkv(qkv.size(), 0.0f);
        attention_backward(dqkv.data(), ad.data(), qkv.data(), att.data(), B, T, CQ, NH, KV);
        std::vector<float> dq((size_t)B * T * CQ), dk((size_t)B * T * CK), dv((size_t)B * T * CK);
        for (int r = 0; r < B * T; ++r)
            for (int i = 0; i < S; ++i) {
                const float g = dqkv[(size_t)r * S + i];
                if (i < CQ)
                    dq[(size_t)r * CQ + i] = g;
                else if (i < CQ + CK)
                    dk[(size_t)r * CK + i - CQ] = g;
                else
                    dv[(size_t)r * CK + i - CQ - CK] = g;
            }
        expect_close(out, get(ref, "gqa.out"), "attention forward");
        expect_close(dq, get(ref, "gqa.dq"), "attention d q");
        expect_close(dk, get(ref, "gqa.dk"), "attention d k (summed over the group's query heads)");
        expect_close(dv, get(ref, "gqa.dv"), "attention d v");
    }
}

}  // namespace
