// The owning CUDA handles (engine/kernels/cuda/cuda_handles.cuh) and CUDA_CHECK_LAUNCH's message.
// The handle tests need a GPU (they skip without one); the launch-check test runs anywhere the
// CUDA runtime loads: any failed runtime call leaves the error that cudaGetLastError reports.
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/cuda_handles.cuh"
#include "tests/cuda_ops/cuda_test_util.h"

using namespace tessera;
using namespace tessera::test;

namespace {

cudaMemoryType memory_type(const void* p) {
    cudaPointerAttributes a{};
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        cudaGetLastError();  // older runtimes: an unknown pointer is an error, not "unregistered"
        return cudaMemoryTypeUnregistered;
    }
    return a.type;
}

}  // namespace

TEST(CudaCheckLaunch, TheMessageNamesTheKernel) {
    cudaGetLastError();
    cudaSetDevice(1 << 20);  // fails with or without a GPU, and leaves the error behind
    std::string what;
    try {
        CUDA_CHECK_LAUNCH("my_test_kernel");
    } catch (const Error& e) {
        what = e.what();
    }
    EXPECT_NE(what.find("launch of my_test_kernel"), std::string::npos) << what;
    EXPECT_NE(what.find("handles_test.cpp"), std::string::npos) << what;
    // with a working runtime the error was consumed (without a driver every call fails again)
    if (cuda_available()) EXPECT_NO_THROW(CUDA_CHECK_LAUNCH("my_test_kernel"));
}

class CudaHandles : public CudaTest {};

TEST_F(CudaHandles, StreamEventAndBuffersRoundTrip) {
    const size_t n = 1 << 16;
    CudaStream s = cuda_stream_create();
    ASSERT_TRUE(s);
    DeviceBuffer<float> dev = cuda_malloc_device<float>(n);
    PinnedBuffer<float> up = cuda_malloc_pinned<float>(n), down = cuda_malloc_pinned<float>(n);
    EXPECT_EQ(memory_type(dev.get()), cudaMemoryTypeDevice);
    EXPECT_EQ(memory_type(up.get()), cudaMemoryTypeHost);
    std::iota(up.get(), up.get() + n, 1.0f);
    std::memset(down.get(), 0, n * sizeof(float));
    ck(cudaMemcpyAsync(dev.get(), up.get(), n * sizeof(float), cudaMemcpyHostToDevice, s.get()),
       "H2D");
    ck(cudaMemcpyAsync(down.get(), dev.get(), n * sizeof(float), cudaMemcpyDeviceToHost, s.get()),
       "D2H");
    CudaEvent done = cuda_event_create();
    ck(cudaEventRecord(done.get(), s.get()), "record");
    ck(cudaEventSynchronize(done.get()), "synchronize");
    EXPECT_EQ(std::memcmp(up.get(), down.get(), n * sizeof(float)), 0);
}

TEST_F(CudaHandles, TimedEventsMeasure) {
    CudaStream s = cuda_stream_create();
    CudaEvent a = cuda_event_create(cudaEventDefault), b = cuda_event_create(cudaEventDefault);
    DeviceBuffer<> buf = cuda_malloc_device(64 << 20);
    ck(cudaEventRecord(a.get(), s.get()), "record a");
    ck(cudaMemsetAsync(buf.get(), 0, 64 << 20, s.get()), "memset");
    ck(cudaEventRecord(b.get(), s.get()), "record b");
    ck(cudaEventSynchronize(b.get()), "synchronize");
    float ms = -1;
    ck(cudaEventElapsedTime(&ms, a.get(), b.get()), "elapsed");
    EXPECT_GE(ms, 0.0f);
}

TEST_F(CudaHandles, MoveTransfersOwnershipAndResetFrees) {
    DeviceBuffer<float> a = cuda_malloc_device<float>(1024);
    float* p = a.get();
    DeviceBuffer<float> b = std::move(a);
    EXPECT_EQ(a.get(),
              nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
    EXPECT_EQ(b.get(), p);
    EXPECT_EQ(memory_type(p), cudaMemoryTypeDevice);
    b.reset();
    EXPECT_EQ(memory_type(p), cudaMemoryTypeUnregistered);  // freed once, by b

    CudaStream s1 = cuda_stream_create();
    cudaStream_t raw = s1.get();
    CudaStream s2 = std::move(s1);
    EXPECT_EQ(s1.get(), nullptr);  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(s2.get(), raw);
    EXPECT_EQ(cudaStreamQuery(s2.get()), cudaSuccess);  // still a live, idle stream
}

TEST_F(CudaHandles, ReleaseGivesUpOwnership) {
    DeviceBuffer<> a = cuda_malloc_device(4096);
    void* p = a.release();
    EXPECT_EQ(a.get(), nullptr);
    EXPECT_EQ(memory_type(p), cudaMemoryTypeDevice);  // not freed by release()
    DeviceBuffer<> again(p);                          // freed here, at the end
}

TEST_F(CudaHandles, StreamOrderedBufferIsFreedOnItsStream) {
    CudaStream s = cuda_stream_create();
    std::vector<float> host(4096, 1.0f);
    {
        StreamBuffer<float> tmp = cuda_malloc_async<float>(host.size(), s.get());
        EXPECT_EQ(tmp.get_deleter().stream, s.get());
        ck(cudaMemsetAsync(tmp.get(), 0, host.size() * sizeof(float), s.get()), "memset");
        ck(cudaMemcpyAsync(host.data(), tmp.get(), host.size() * sizeof(float),
                           cudaMemcpyDeviceToHost, s.get()),
           "D2H");
    }  // cudaFreeAsync on s, after the copy
    ck(cudaStreamSynchronize(s.get()), "synchronize");
    EXPECT_EQ(host[0], 0.0f);
    EXPECT_EQ(host.back(), 0.0f);
}
