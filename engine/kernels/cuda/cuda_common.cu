#include "engine/kernels/cuda/cuda_common.cuh"

namespace tessera {

void cuda_fail(const char* lib, const char* stmt, const char* file, int line,
               const std::string& what) {
    throw Error(str_cat(lib, " error: `", stmt, "` failed at ", file, ":", line, ": ", what));
}

CublasLt& cublaslt() {
    thread_local CublasLt lt;
    if (!lt.handle) {
        CUBLAS_CHECK(cublasLtCreate(&lt.handle));
        lt.workspace_bytes = 32u << 20;  // cuBLASLt's recommended Hopper workspace
        CUDA_CHECK(cudaMalloc(&lt.workspace, lt.workspace_bytes));
    }
    return lt;
}

}  // namespace tessera
