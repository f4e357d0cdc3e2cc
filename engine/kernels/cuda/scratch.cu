// Per-thread, per-device scratch buffers for the two-pass reductions (see device_helpers.cuh).
#include <map>
#include <utility>

#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/cuda_handles.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"

namespace tessera {

namespace {
struct ScratchBuf {
    DeviceBuffer<> ptr;  // freed when the thread ends (at exit the context may be gone: ignored)
    size_t bytes = 0;
};
}  // namespace

// The slot's buffer, at least `bytes`; *grown: the size it was (re)allocated at, else 0.
static void* scratch_buffer(ScratchSlot slot, size_t bytes, size_t* grown) {
    thread_local std::map<std::pair<int, int>, ScratchBuf> bufs;
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    ScratchBuf& b = bufs[{dev, (int)slot}];
    *grown = 0;
    if (bytes > b.bytes) {
        size_t want = std::max(bytes, b.bytes * 2);
        want = (want + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);  // whole MiB
        b.ptr.reset();  // cudaFree synchronises, so no kernel still uses the old buffer
        b.ptr = cuda_malloc_device(want);
        b.bytes = want;
        *grown = want;
    }
    return b.ptr.get();
}

void* cuda_scratch(ScratchSlot slot, size_t bytes) {
    size_t grown = 0;
    return scratch_buffer(slot, bytes, &grown);
}

void* cuda_scratch_zeroed(ScratchSlot slot, size_t bytes, cudaStream_t s) {
    size_t grown = 0;
    void* p = scratch_buffer(slot, bytes, &grown);
    if (grown) CUDA_CHECK(cudaMemsetAsync(p, 0, grown, s));
    return p;
}

}  // namespace tessera
