// FP8 GEMMs (runtime.precision fp8): the quantizer against a host decode of its bytes, and the
// FP8 forward and backward against the CPU's fp32 matmul on the same bf16 inputs. e4m3 keeps 3
// mantissa bits (a value within 1/16 of itself), e5m2 2 bits (1/8): the tolerances below are the
// quantization error of sums over 1,024 terms with room, and the check that the results differ
// from bf16's shows the FP8 path ran.
#include "engine/kernels/cuda/fp8.cuh"

#include <cuda_fp8.h>

#include <cmath>

#include "engine/kernels/cpu/gelu.h"
#include "engine/kernels/cpu/matmul.h"
#include "engine/kernels/cuda/matmul.cuh"
#include "engine/kernels/fp8_workspace.h"
#include "tests/cuda_ops/cuda_test_util.h"

using namespace tessera;
using namespace tessera::test;

namespace {

class Fp8Cuda : public CudaTest {};

float decode(uint8_t b, Fp8Format f) {
    if (f == Fp8Format::e4m3) {
        __nv_fp8_e4m3 v;
        v.__x = b;
        return (float)v;
    }
    __nv_fp8_e5m2 v;
    v.__x = b;
    return (float)v;
}

double max_abs(const std::vector<float>& v) {
    double m = 0;
    for (float x : v) m = std::max(m, (double)std::fabs(x));
    return m;
}

}  // namespace

TEST_F(Fp8Cuda, QuantizeIsWithinTheFormatsPrecisionAndTransposes) {
    const int rows = 100, cols = 72;  // not multiples of the 64-wide tiles
    std::mt19937 rng(5);
    auto x = rand_vec<bf16>((size_t)rows * cols, rng, -3.0f, 3.0f);
    x[17] = 0.0f;
    x[18] = 1e-4f;  // below e4m3's normal range after scaling: a subnormal
    DevBuf<bf16> d_x(x.size());
    d_x.set(x);
    DevBuf<float> d_f(4);
    DevBuf<uint8_t> d_q(x.size()), d_qt(x.size());
    for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2}) {
        d_f.set({0.0f, 0.0f, 0.0f, 0.0f});
        fp8_amax(d_f.p, d_x.p, (long)x.size(), 0);
        fp8_quantize(d_q.p, d_f.p + 1, d_x.p, d_f.p, rows, cols, f, false, 0);
        fp8_quantize(d_qt.p, d_f.p + 2, d_x.p, d_f.p, rows, cols, f, true, 0);
        const auto fs = d_f.get();
        const double amax = max_abs(x);
        EXPECT_EQ(fs[0], (float)amax) << "amax";
        const double fmax = f == Fp8Format::e4m3 ? 448.0 : 57344.0;
        EXPECT_NEAR(fs[1], amax / fmax, 1e-6 * amax / fmax) << "1/scale";
        EXPECT_EQ(fs[2], fs[1]);
        const auto q = d_q.get_raw(), qt = d_qt.get_raw();
        const double rel = f == Fp8Format::e4m3 ? 1.0 / 16 : 1.0 / 8;
        const double sub =
            (f == Fp8Format::e4m3 ? std::ldexp(1.0, -9) : std::ldexp(1.0, -16)) * fs[1];
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) {
                const size_t i = (size_t)r * cols + c;
                ASSERT_EQ(q[i], qt[(size_t)c * rows + r]) << "transpose at " << r << "," << c;
                const double back = decode(q[i], f) * fs[1];
                ASSERT_LE(std::fabs(back - x[i]), rel * std::fabs(x[i]) + sub) << "element " << i;
            }
        EXPECT_EQ(decode(q[17], f), 0.0f);
    }
}

TEST_F(Fp8Cuda, GemmsMatchFp32WithinFp8Precision) {
    const int N = 512, C = 1024, OC = 768;  // FP8 forced: the workspace is given whatever the shape
    std::mt19937 rng(11);
    auto inp = rand_vec<bf16>((size_t)N * C, rng), w = rand_vec<bf16>((size_t)OC * C, rng);
    auto b = rand_vec<bf16>(OC, rng), dout = rand_vec<bf16>((size_t)N * OC, rng);
    auto dw0 = rand_vec<float>((size_t)OC * C, rng);
    DevBuf<bf16> d_inp(inp.size()), d_w(w.size()), d_b(b.size()), d_dout(dout.size());
    d_inp.set(inp), d_w.set(w), d_b.set(b), d_dout.set(dout);
    DevBuf<uint8_t> ws(Fp8Workspace::of(N, C, OC, true).bytes);

    // forward, with the bias and with bias + GELU (pre-activation kept)
    std::vector<float> ref((size_t)N * OC), act(ref.size());
    matmul_forward(ref.data(), inp.data(), w.data(), b.data(), N, C, OC);
    gelu_forward(act.data(), ref.data(), (int64_t)ref.size());
    DevBuf<bf16> d_out(ref.size()), d_pre(ref.size()), d_out16(ref.size());
    const Fp8Counts before = matmul_fp8_counts();
    matmul_forward_cuda<bf16>(d_out.p, d_inp.p, d_w.p, d_b.p, N, C, OC, 0, false, nullptr, ws.p);
    EXPECT_EQ(matmul_fp8_counts().forward, before.forward + 1) << "the forward did not run in FP8";
    matmul_forward_cuda<bf16>(d_out16.p, d_inp.p, d_w.p, d_b.p, N, C, OC, 0);
    const auto out8 = d_out.get(), out16 = d_out16.get();
    std::printf("forward: fp8 %.4f, bf16 %.4f (max error / max |ref|)\n", rel_err(out8, ref),
                rel_err(out16, ref));
    EXPECT_LT(rel_err(out8, ref), 0.05);
    EXPECT_GT(rel_err(out8, out16), 1e-3) << "the FP8 forward gave bf16's result: did it run?";
    matmul_forward_cuda<bf16>(d_out.p, d_inp.p, d_w.p, d_b.p, N, C, OC, 0, true, d_pre.p, ws.p);
    EXPECT_LT(rel_err(d_pre.get(), ref), 0.05) << "pre-GELU";
    EXPECT_LT(rel_err(d_out.get(), act), 0.05) << "GELU";

    // backward: dinp overwritten, dweight accumulated
    std::vector<float> dinp((size_t)N * C, 0.0f), dw = dw0;
    matmul_backward(dinp.data(), dw.data(), nullptr, dout.data(), inp.data(), w.data(), N, C, OC);
    DevBuf<bf16> d_dinp(dinp.size());
    DevBuf<float> d_dw(dw.size());
    d_dw.set(dw0);
    const Fp8Counts mid = matmul_fp8_counts();
    matmul_backward_cuda<bf16>(d_dinp.p, d_dw.p, nullptr, d_dout.p, d_inp.p, d_w.p, N, C, OC, 0,
                               ws.p);
    const Fp8Counts after = matmul_fp8_counts();
    std::printf("FP8 GEMMs run: forward %ld, dinp %ld, dweight %ld\n", after.forward, after.dinp,
                after.dweight);
    EXPECT_EQ(after.dinp, mid.dinp + 1) << "dinp did not run in FP8";
    EXPECT_EQ(after.dweight, mid.dweight + 1) << "dweight did not run in FP8 (fp32 output, beta 1)";
    std::vector<float> dw_delta = d_dw.get(), ref_delta = dw;
    for (size_t i = 0; i < dw.size(); ++i) dw_delta[i] -= dw0[i], ref_delta[i] -= dw0[i];
    std::printf("backward: dinp %.4f, dweight %.4f\n", rel_err(d_dinp.get(), dinp),
                rel_err(dw_delta, ref_delta));
    EXPECT_LT(rel_err(d_dinp.get(), dinp), 0.1);
    EXPECT_LT(rel_err(dw_delta, ref_delta), 0.1) << "dweight += (its increment)";
}
