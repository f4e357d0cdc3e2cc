// runtime.precision fp8: which GEMMs run in FP8 and the device workspace one takes: its scales
// and its quantized operands, allocated around the call. One rule for the CUDA GEMMs
// (kernels/cuda/matmul.cu) and the meta device the estimator runs (parallel/layer_ops.cpp). No
// CUDA.
#pragma once
#include <cstdint>

namespace tessera {

struct Fp8Workspace {
    // Which GEMMs gain from FP8, measured (bench/op_sweep on an H200, forward + backward with the
    // quantization passes, 2026-12-02): below about 1e11 multiply-adds, or with an inner or output
    // dimension under 1,024, the quantization costs more than the faster product saves (N 8192,
    // C = OC: 0.53x at 1,024, 0.79x at 2,048, 1.12x at 4,096). Over the sweep's grid this rule
    // comes within 0.6% of choosing the faster precision per shape.
    static constexpr int kMinDim = 1024;
    static constexpr double kMinMultiplyAdds = 1e11;
    // FP8 GEMMs also need every dimension a multiple of 16 (cuBLASLt's FP8 layouts).
    static bool eligible(int64_t N, int64_t C, int64_t OC) {
        return N % 16 == 0 && C % 16 == 0 && OC % 16 == 0 && N >= 512 && C >= kMinDim &&
               OC >= kMinDim && (double)N * (double)C * (double)OC >= kMinMultiplyAdds;
    }
    // Byte offsets: 256 bytes of scales (8 amax slots at 16·k, then 8 of 1/scale at 128 + 16·k:
    // 16-byte aligned, as cuBLASLt wants its scale pointers), then the quantized operands.
    static constexpr int64_t kSlotBytes = 16, kScaleInvOffset = 128;
    // forward:  x = inp (N, C) e4m3, w = weight (OC, C) e4m3
    // backward: x = inpᵀ (C, N) e4m3, w = weightᵀ (C, OC) e4m3, g = dout (N, OC) e5m2,
    //           gt = doutᵀ (OC, N) e5m2
    int64_t x = 0, w = 0, g = 0, gt = 0, bytes = 0;
    static int64_t align(int64_t b) { return (b + 255) / 256 * 256; }
    static Fp8Workspace of(int64_t N, int64_t C, int64_t OC, bool backward) {
        Fp8Workspace l;
        l.x = 256;
        l.w = l.x + align(N * C);
        l.g = l.w + align(OC * C);
        l.gt = l.g + (backward ? align(N * OC) : 0);
        l.bytes = l.gt + (backward ? align(N * OC) : 0);
        return l;
    }
};

}  // namespace tessera
