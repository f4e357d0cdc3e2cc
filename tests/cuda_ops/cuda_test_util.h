// Helpers for the CUDA op tests: GPU-or-skip fixtures, device buffers, NaN poisoning, bf16
// rounding on the host, and the relative-error check (max|got - ref| / max|ref| per tensor).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera::test {

using bf16 = __nv_bfloat16;

inline void ck(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

inline bool cuda_available() {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Fixture: every test skips cleanly without a GPU.
class CudaTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!cuda_available())
            GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or returned 0)";
    }
};

template <typename T>
constexpr double tol() {
    return std::is_same_v<T, float> ? 1e-5 : 1e-2;
}

template <typename T>
inline T from_f(float x) {
    if constexpr (std::is_same_v<T, float>)
        return x;
    else
        return __float2bfloat16(x);
}
template <typename T>
inline float to_f(T x) {
    if constexpr (std::is_same_v<T, float>)
        return x;
    else
        return __bfloat162float(x);
}

// Uniform [lo, hi) values, already rounded to T (so the CPU reference sees the GPU's inputs).
template <typename T>
std::vector<float> rand_vec(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = to_f<T>(from_f<T>(d(rng)));
    return v;
}

// A device array of n T's; poisoned with 0xFF bytes (NaN for float and bf16) on creation.
template <typename T>
struct DevBuf {
    T* p = nullptr;
    size_t n = 0;
    explicit DevBuf(size_t count) : n(count) {
        ck(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
        poison();
    }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    ~DevBuf() { cudaFree(p); }
    void poison() { ck(cudaMemset(p, 0xFF, std::max<size_t>(n, 1) * sizeof(T)), "cudaMemset"); }
    // upload from floats (converted to T) or from raw T values
    void set(const std::vector<float>& v) {
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bf16>) {
            std::vector<T> h(v.size());
            for (size_t i = 0; i < v.size(); ++i) h[i] = from_f<T>(v[i]);
            ck(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
        }
    }
    void set_raw(const std::vector<T>& h) {
        ck(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
    }
    std::vector<float> get() const {
        ck(cudaDeviceSynchronize(), "kernel execution");
        std::vector<T> h(n);
        ck(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "download");
        std::vector<float> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = to_f<T>(h[i]);
        return v;
    }
    std::vector<T> get_raw() const {
        ck(cudaDeviceSynchronize(), "kernel execution");
        std::vector<T> h(n);
        ck(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "download");
        return h;
    }
};

// max|got - ref| / max|ref|; infinity when got has a NaN/inf where ref is finite (unwritten
// poisoned elements) or the sizes differ.
inline double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
    if (got.size() != ref.size()) return INFINITY;
    double maxdiff = 0, maxref = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!std::isfinite(got[i]) && std::isfinite(ref[i])) return INFINITY;
        maxdiff = std::max(maxdiff, (double)std::fabs(got[i] - ref[i]));
        maxref = std::max(maxref, (double)std::fabs(ref[i]));
    }
    return maxref > 0 ? maxdiff / maxref : maxdiff;
}

#define EXPECT_REL(got, ref, tolerance, what)                              \
    do {                                                                   \
        double e_ = ::tessera::test::rel_err((got), (ref));                \
        EXPECT_LE(e_, (tolerance)) << (what) << ": relative error " << e_; \
    } while (0)

}  // namespace tessera::test
