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

void* cuda_scratch(ScratchSlot slot, size_t bytes) {
    thread_local std::map<std::pair<int, int>, ScratchBuf> bufs;
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    ScratchBuf& b = bufs[{dev, (int)slot}];
    if (bytes > b.bytes) {
        size_t want = std::max(bytes, b.bytes * 2);
        want = (want + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);  // whole MiB
        b.ptr.reset();  // cudaFree synchronises, so no kernel still uses the old buffer
        b.ptr = cuda_malloc_device(want);
        b.bytes = want;
    }
    return b.ptr.get();
}

}  // namespace tessera
