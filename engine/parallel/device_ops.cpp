#include "engine/parallel/device_ops.h"

#include <cstring>

#include "engine/core/error.h"
#include "engine/kernels/cpu/elementwise.h"

namespace tessera {

namespace {

class CpuOps final : public DeviceOps {
public:
    Device device() const override { return Device::cpu; }
    void copy(float* dst, const float* src, int64_t n) override {
        std::memcpy(dst, src, sizeof(float) * n);
    }
    void upload(float* dst, const float* src, int64_t n) override { copy(dst, src, n); }
    void download(float* dst, const float* src, int64_t n) override { copy(dst, src, n); }
    void accumulate(float* dst, const float* src, int64_t n) override {
        tessera::accumulate(dst, src, n);
    }
    double sum_squares(const float* x, int64_t n) override { return tessera::sum_squares(x, n); }
    double sum(const float* x, int64_t n) override {
        double s = 0;
        for (int64_t i = 0; i < n; ++i) s += x[i];
        return s;
    }
    void adamw(float* p, const float* g, float* m, float* v, int64_t n, const AdamWHyper& h,
               float grad_scale) override {
        adamw_update(p, g, m, v, n, h, grad_scale);
    }
};

}  // namespace

DeviceOps& device_ops_cpu() {
    static CpuOps ops;
    return ops;
}

#ifndef TESSERA_HAVE_CUDA
DeviceOps& device_ops_cuda() {
    throw InputError("runtime.device: cuda, but this build of tessera has no CUDA backend "
                     "(configure with -DTESSERA_CUDA=ON on a machine with nvcc)");
}
#endif

DeviceOps& device_ops_for(Device d) { return d == Device::cuda ? device_ops_cuda() : device_ops_cpu(); }

}  // namespace tessera
