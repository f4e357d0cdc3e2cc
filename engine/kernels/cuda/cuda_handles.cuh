// Owning handles for the CUDA runtime and cuBLASLt: streams, events, device buffers (cudaMalloc
// and stream-ordered cudaMallocAsync), pinned host buffers, cuBLASLt descriptors. Each is a
// std::unique_ptr with a deleter (move-only; .get(), .release(), .reset()); the deleters are the
// only places where cudaStreamDestroy, cudaEventDestroy, cudaFree*, cudaFreeHost and the
// cuBLASLt *Destroy calls appear (scripts/check_raw_handles.sh keeps it so).
//
// Deleters ignore the returned error: they run in destructors (never throw from one), and a
// handle destroyed at process exit may find the CUDA context already torn down.
//
// Deliberately never destroyed (process lifetime; see device.cu and cuda_common.cu): the rank's
// compute and copy streams, the recycled copy events and pinned blocks of the device allocator,
// and each thread's cuBLASLt handle.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <type_traits>

#include "engine/kernels/cuda/cuda_common.cuh"

namespace tessera {

// ---------------------------------------------------------------------------------------------
// Streams and events

struct CudaStreamDeleter {
    void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
using CudaStream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, CudaStreamDeleter>;

// A new stream (non-blocking by default) at `priority` (0: the default; lower numbers are higher
// priority, see cudaDeviceGetStreamPriorityRange).
inline CudaStream cuda_stream_create(unsigned flags = cudaStreamNonBlocking, int priority = 0) {
    cudaStream_t s = nullptr;
    CUDA_CHECK(cudaStreamCreateWithPriority(&s, flags, priority));
    return CudaStream(s);
}

struct CudaEventDeleter {
    void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
using CudaEvent = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, CudaEventDeleter>;

// A new event; cudaEventDisableTiming by default (cheaper; pass cudaEventDefault to time).
inline CudaEvent cuda_event_create(unsigned flags = cudaEventDisableTiming) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, flags));
    return CudaEvent(e);
}

// ---------------------------------------------------------------------------------------------
// Memory

namespace detail {
template <typename T>
constexpr size_t elem_bytes() {
    if constexpr (std::is_void_v<T>)
        return 1;
    else
        return sizeof(T);
}
}  // namespace detail

// cudaMalloc'd device memory. cudaFree synchronises the device: freeing is never early.
struct CudaFreeDeleter {
    void operator()(void* p) const { cudaFree(p); }
};
template <typename T = void>
using DeviceBuffer = std::unique_ptr<T, CudaFreeDeleter>;

// `count` elements of T (bytes when T is void) of device memory, uninitialised.
template <typename T = void>
DeviceBuffer<T> cuda_malloc_device(size_t count) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, count * detail::elem_bytes<T>()));
    return DeviceBuffer<T>(static_cast<T*>(p));
}

// Stream-ordered device memory (cudaMallocAsync): freed on the stream it was allocated on, after
// the work queued there so far.
struct CudaFreeAsyncDeleter {
    cudaStream_t stream = nullptr;
    void operator()(void* p) const { cudaFreeAsync(p, stream); }
};
template <typename T = void>
using StreamBuffer = std::unique_ptr<T, CudaFreeAsyncDeleter>;

template <typename T = void>
StreamBuffer<T> cuda_malloc_async(size_t count, cudaStream_t s) {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocAsync(&p, count * detail::elem_bytes<T>(), s));
    return StreamBuffer<T>(static_cast<T*>(p), CudaFreeAsyncDeleter{s});
}

// Page-locked host memory (cudaMallocHost). cuda_free_pinned is the deleter as a plain function,
// for owners that hold a function pointer (TokenSlot).
inline void cuda_free_pinned(void* p) {
    cudaFreeHost(p);
}
struct CudaFreeHostDeleter {
    void operator()(void* p) const { cuda_free_pinned(p); }
};
template <typename T = void>
using PinnedBuffer = std::unique_ptr<T, CudaFreeHostDeleter>;

template <typename T = void>
PinnedBuffer<T> cuda_malloc_pinned(size_t count) {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, count * detail::elem_bytes<T>()));
    return PinnedBuffer<T>(static_cast<T*>(p));
}

// ---------------------------------------------------------------------------------------------
// cuBLASLt descriptors (the library is opened lazily: lt_api() in cuda_common.cuh)

struct CublasLtDescDeleter {
    void operator()(cublasLtMatmulDesc_t d) const { lt_api().MatmulDescDestroy(d); }
};
struct CublasLtLayoutDeleter {
    void operator()(cublasLtMatrixLayout_t l) const { lt_api().MatrixLayoutDestroy(l); }
};
struct CublasLtPrefDeleter {
    void operator()(cublasLtMatmulPreference_t p) const { lt_api().MatmulPreferenceDestroy(p); }
};
using CublasLtDesc =
    std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>, CublasLtDescDeleter>;
using CublasLtLayout =
    std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>, CublasLtLayoutDeleter>;
using CublasLtPref =
    std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, CublasLtPrefDeleter>;

// cuBLASLt handle and workspace shared by the GEMM launchers (one per thread, lazily created).
// The workspace is owned (freed when the thread ends); the handle is deliberately never
// destroyed, see cublaslt() in cuda_common.cu.
struct CublasLt {
    cublasLtHandle_t handle = nullptr;
    DeviceBuffer<> workspace;
    size_t workspace_bytes = 0;
};
CublasLt& cublaslt();

}  // namespace tessera
