#include <dlfcn.h>

#include <mutex>

#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/cuda_handles.cuh"

namespace tessera {

void cuda_fail(const char* lib, const char* stmt, const char* file, int line,
               const std::string& what) {
    throw Error(str_cat(lib, " error: `", stmt, "` failed at ", file, ":", line, ": ", what));
}

namespace {

// Loads the library by its soname (so LD_LIBRARY_PATH and the system's paths are honoured), then
// from the toolkit directory the build found it in. Never dlclose'd: lt_api()'s function table
// lives as long as the process.
void* open_cublaslt(std::string& tried) {
    const std::string soname = str_cat("libcublasLt.so.", CUBLAS_VER_MAJOR);
    std::string candidates[] = {soname, str_cat(TESSERA_CUDA_LIBRARY_DIR, "/", soname)};
    for (const std::string& path : candidates) {
        if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
        const char* e = dlerror();
        tried += str_cat("\n  ", path, ": ", e ? e : "not found");
    }
    return nullptr;
}

template <typename F>
void bind(void* lib, F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    if (!fn) throw Error(str_cat("cuBLASLt: the library has no symbol ", name));
}

}  // namespace

const CublasLtApi& lt_api() {
    static CublasLtApi api;
    static std::once_flag once;
    std::call_once(once, [] {
        std::string tried;
        void* lib = open_cublaslt(tried);
        if (!lib)
            throw Error(str_cat("cannot load cuBLASLt for the GPU matrix products; tried:", tried));
        bind(lib, api.Create, "cublasLtCreate");
        bind(lib, api.GetStatusString, "cublasLtGetStatusString");
        bind(lib, api.GetVersion, "cublasLtGetVersion");
        bind(lib, api.Matmul, "cublasLtMatmul");
        bind(lib, api.MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
        bind(lib, api.MatmulDescCreate, "cublasLtMatmulDescCreate");
        bind(lib, api.MatmulDescDestroy, "cublasLtMatmulDescDestroy");
        bind(lib, api.MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
        bind(lib, api.MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
        bind(lib, api.MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
        bind(lib, api.MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
        bind(lib, api.MatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
        bind(lib, api.MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
    });
    return api;
}

// The handle is deliberately never destroyed (a few KiB of host memory per thread): the main
// thread's thread_local would run cublasLtDestroy during exit, and destroying cuBLAS handles
// then has been seen to crash once the CUDA context is being torn down (PyTorch leaks its cuBLAS
// and cuBLASLt handles for the same reason). The 32 MiB workspace is a DeviceBuffer: cudaFree
// ignores a context that is already gone.
CublasLt& cublaslt() {
    thread_local CublasLt lt;
    if (!lt.handle) {
        CUBLAS_CHECK(lt_api().Create(&lt.handle));
        lt.workspace_bytes = 32u << 20;  // cuBLASLt's recommended Hopper workspace
        lt.workspace = cuda_malloc_device(lt.workspace_bytes);
    }
    return lt;
}

}  // namespace tessera
