// Device buffers for the CUDA benches (bench/kernels_cuda, bench/op_sweep). CUDA builds only.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/cuda_handles.cuh"

namespace tessera::bench {

// A device buffer filled with random data (never time on zeros): bf16 values in [-2, 2]; read as
// fp32, every other 16 bits is such a bf16's pattern, so floats are finite and of similar size.
// The caller owns it (a DeviceBuffer frees it; the benches keep most buffers for the process).
inline void* device_random(size_t bytes) {
    static const std::vector<uint16_t> pattern = [] {
        std::vector<uint16_t> v(1 << 24);
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> d(-2.0f, 2.0f);
        for (auto& x : v) {
            float f = d(rng);
            uint32_t u;
            std::memcpy(&u, &f, 4);
            x = (uint16_t)(u >> 16);
        }
        return v;
    }();
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    const size_t chunk = pattern.size() * 2;
    for (size_t off = 0; off < bytes; off += chunk)
        CUDA_CHECK(cudaMemcpy((char*)p + off, pattern.data(), std::min(chunk, bytes - off),
                              cudaMemcpyHostToDevice));
    return p;
}

}  // namespace tessera::bench
