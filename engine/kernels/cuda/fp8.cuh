// FP8 operands for the GEMMs of runtime.precision fp8 (matmul.cu): bf16 tensors quantized to
// e4m3 (activations and weights) or e5m2 (gradients) with one scale per tensor, computed from the
// tensor's own absolute maximum just before it is quantized ("current" scaling: no history, so a
// step's scales never lag a jump in its values). x_q = saturate(x · s) with s = fp8_max / amax;
// the GEMM multiplies its result by the dequantization factors 1/s (cuBLASLt's A/B scale
// pointers).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tessera {

enum class Fp8Format { e4m3, e5m2 };

// amax (one float, device) = max |x| over x (rows, cols); amax must hold 0 (or a smaller value)
// before the call: the kernel raises it atomically.
void fp8_amax(float* amax, const __nv_bfloat16* x, long n, cudaStream_t s);

// q = saturate(x · s) in `format`, s = fp8_max / *amax (1 when amax is 0); *scale_inv = 1 / s.
// x (rows, cols) row-major; q (rows, cols), or (cols, rows) when `transpose`.
void fp8_quantize(uint8_t* q, float* scale_inv, const __nv_bfloat16* x, const float* amax, int rows,
                  int cols, Fp8Format format, bool transpose, cudaStream_t s);

}  // namespace tessera
