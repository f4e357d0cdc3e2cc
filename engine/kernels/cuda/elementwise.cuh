// Small elementwise ops on the GPU: accumulate, scale, casts, bias + residual, sum of squares,
// fill. n counts elements.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace tessera {

void accumulate_cuda(float* dst, const float* src, long n, cudaStream_t s);  // dst += src
void scale_cuda(float* x, float factor, long n, cudaStream_t s);             // x *= factor
void fill_cuda(float* x, float value, long n, cudaStream_t s);               // x = value
// dst (n) = round-to-nearest-even bf16 of src (n).
void cast_f32_to_bf16_cuda(__nv_bfloat16* dst, const float* src, long n, cudaStream_t s);
// dst (n) = float(src (n)); T is float (a copy) or bf16.
template <typename T>
void cast_to_f32_cuda(float* dst, const T* src, long n, cudaStream_t s);
// y (N, C) = (bias (C) + y) + res (N, C), summed in fp32 and rounded once; bias or res may be null.
template <typename T>
void add_bias_residual_cuda(T* y, const T* bias, const T* res, int N, int C, cudaStream_t s);
// *out (one double on the device) += sum of x[i]^2 (n), in double; deterministic (fixed two-pass
// order; uses the sum_squares scratch slot).
void sum_squares_cuda(double* out, const float* x, long n, cudaStream_t s);
// *out += the sum of x[k][i]^2 over count ranges of n[k] elements, in double: the ranges read as
// one concatenation, up to 128 a launch (two kernels each); deterministic, and the same bits
// however the ranges of a launch split the values it reads.
void sum_squares_multi_cuda(double* out, const float* const* x, const long* n, int count,
                            cudaStream_t s);
// *out += sum of x[i] (n), in double; same scheme (and scratch slot) as sum_squares_cuda.
void sum_cuda(double* out, const float* x, long n, cudaStream_t s);
// out (3 floats) := {*sum_squares, *sum, stop}: a training step's scalars, packed on the device
// for one all-reduce.
void pack_step_scalars_cuda(float* out, const double* sum_squares, const double* sum, float stop,
                            cudaStream_t s);

}  // namespace tessera
