#include "engine/kernels/cpu/gelu.h"

#include <math.h>

namespace tessera {

static constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

// This file is compiled with -ffast-math so that GCC calls glibc's vectorised tanhf (libmvec),
// and each function is cloned for AVX-512 / AVX2 / baseline and picked at load time. The math
// has no reductions, so fast-math only changes rounding within a few ulp.
// Not under ThreadSanitizer: the loader calls the clones' resolvers before TSan's runtime is up,
// and the instrumented resolver crashes the program at load (scripts/sanitize.sh).
#if defined(__SANITIZE_THREAD__)  // GCC
#define TS_UNDER_TSAN 1
#elif defined(__has_feature)  // Clang
#if __has_feature(thread_sanitizer)
#define TS_UNDER_TSAN 1
#endif
#endif
#ifdef TS_UNDER_TSAN
#define TS_SIMD_CLONES
#else
#define TS_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

TS_SIMD_CLONES void gelu_forward(float* out, const float* inp, int64_t N) {
#pragma omp parallel for simd
    for (int64_t i = 0; i < N; ++i) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + tanhf(kGeluScale * (x + cube)));
    }
}

// d gelu(x) / dx, as PyTorch computes it
static inline float gelu_local_grad(float x) {
    float cube = 0.044715f * x * x * x;
    float tanh_out = tanhf(kGeluScale * (x + cube));
    float sech2 = 1.0f - tanh_out * tanh_out;
    return 0.5f * (1.0f + tanh_out) +
           x * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
}

TS_SIMD_CLONES void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N) {
#pragma omp parallel for simd
    for (int64_t i = 0; i < N; ++i) dinp[i] += gelu_local_grad(inp[i]) * dout[i];
}

TS_SIMD_CLONES void gelu_backward_set(float* dinp, const float* inp, const float* dout, int64_t N) {
#pragma omp parallel for simd
    for (int64_t i = 0; i < N; ++i) dinp[i] = gelu_local_grad(inp[i]) * dout[i];
}

}  // namespace tessera
