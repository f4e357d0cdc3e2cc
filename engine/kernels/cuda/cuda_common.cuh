// Shared by every CUDA op: error checks that name the statement, file, line and the library's own
// error string; dtype helpers (the owning handles are in cuda_handles.cuh). Kernels are templated
// on the activation type T (float for the fp32 mode, __nv_bfloat16 for bf16) and accumulate in
// fp32.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "engine/core/error.h"

namespace tessera {

// cuBLASLt's entry points, bound on first use. Linking the library costs every process about 0.4 s
// of load-time initialisation (measured: an empty program linked to it takes 0.39 s to run), which
// `tessera plan`, `--help` and every CPU run would pay for nothing; it is opened on the first GEMM
// instead. Fails with the library's name and dlerror() when it cannot be found.
struct CublasLtApi {
    decltype(&::cublasLtCreate) Create;
    decltype(&::cublasLtGetStatusString) GetStatusString;
    decltype(&::cublasLtGetVersion) GetVersion;
    decltype(&::cublasLtMatmul) Matmul;
    decltype(&::cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
    decltype(&::cublasLtMatmulDescCreate) MatmulDescCreate;
    decltype(&::cublasLtMatmulDescDestroy) MatmulDescDestroy;
    decltype(&::cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
    decltype(&::cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
    decltype(&::cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
    decltype(&::cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
    decltype(&::cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
    decltype(&::cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
};
const CublasLtApi& lt_api();

[[noreturn]] void cuda_fail(const char* lib, const char* stmt, const char* file, int line,
                            const std::string& what);

}  // namespace tessera

#define CUDA_CHECK(stmt)                                                                       \
    do {                                                                                       \
        cudaError_t err_ = (stmt);                                                             \
        if (err_ != cudaSuccess)                                                               \
            ::tessera::cuda_fail("CUDA", #stmt, __FILE__, __LINE__, cudaGetErrorString(err_)); \
    } while (0)

#define CUBLAS_CHECK(stmt)                                                  \
    do {                                                                    \
        cublasStatus_t st_ = (stmt);                                        \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                   \
            ::tessera::cuda_fail("cuBLAS", #stmt, __FILE__, __LINE__,       \
                                 ::tessera::lt_api().GetStatusString(st_)); \
    } while (0)

// After a kernel launch: launch-configuration errors surface here, with the kernel's name
// ("CUDA error: `launch of layernorm_forward_kernel` failed at layernorm.cu:233: invalid
// argument").
#define CUDA_CHECK_LAUNCH(name)                                                                    \
    do {                                                                                           \
        cudaError_t err_ = cudaGetLastError();                                                     \
        if (err_ != cudaSuccess)                                                                   \
            ::tessera::cuda_fail("CUDA", ::tessera::str_cat("launch of ", name).c_str(), __FILE__, \
                                 __LINE__, cudaGetErrorString(err_));                              \
    } while (0)

// Shape/dtype preconditions of a launcher.
#define TS_CUDA_REQUIRE(cond, ...) TS_CHECK(cond, __VA_ARGS__)

namespace tessera {

using bf16 = __nv_bfloat16;

template <typename T>
__host__ __device__ inline float to_float(T x);
template <>
__host__ __device__ inline float to_float<float>(float x) {
    return x;
}
template <>
__host__ __device__ inline float to_float<bf16>(bf16 x) {
    return __bfloat162float(x);
}

template <typename T>
__host__ __device__ inline T from_float(float x);
template <>
__host__ __device__ inline float from_float<float>(float x) {
    return x;
}
template <>
__host__ __device__ inline bf16 from_float<bf16>(float x) {
    return __float2bfloat16(x);
}

inline int ceil_div(long a, long b) {
    return (int)((a + b - 1) / b);
}

}  // namespace tessera
