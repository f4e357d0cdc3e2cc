#include "engine/parallel/device_ops.h"

#include <cmath>
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
    void sum_squares_begin() override { acc_squares_ = 0; }
    void sum_squares_add(const float* x, int64_t n) override {
        acc_squares_ += tessera::sum_squares(x, n);
    }
    void sum_begin() override { acc_sum_ = 0; }
    void sum_add(const float* x, int64_t n) override {
        double s = 0;
        for (int64_t i = 0; i < n; ++i) s += x[i];
        acc_sum_ += s;
    }
    double sum_end() override { return acc_sum_; }
    float* step_scalars(float stop) override {
        scalars_[0] = (float)acc_squares_;
        scalars_[1] = (float)acc_sum_;
        scalars_[2] = stop;
        return scalars_;
    }
    void read_step_scalars(float out[3]) override {
        for (int i = 0; i < 3; ++i) out[i] = scalars_[i];
    }
    void adamw_ranges(const std::vector<AdamWRange>& ranges, const AdamWHyper& h, double grad_clip,
                      const float* norm2) override {
        const float scale = clip_scale(grad_clip, std::sqrt((double)*norm2));
        for (const AdamWRange& r : ranges) {
            TS_CHECK(!r.image16, "adamw_ranges: bf16 images are kept on GPUs only");
            AdamWHyper hr = h;
            hr.weight_decay = r.weight_decay;
            adamw_update(r.param, r.grad, r.m, r.v, r.n, hr, scale);
        }
    }

  private:
    double acc_squares_ = 0, acc_sum_ = 0;
    float scalars_[3] = {0, 0, 0};
};

// The meta device (the estimator): buffers are meta tensors that hold no bytes, so every
// operation is a no-op; what a step allocates is all it has to show.
class MetaOps final : public DeviceOps {
  public:
    Device device() const override { return Device::meta; }
    void copy(float*, const float*, int64_t) override {}
    void upload(float*, const float*, int64_t) override {}
    void download(float*, const float*, int64_t) override {}
    void accumulate(float*, const float*, int64_t) override {}
    void sum_squares_begin() override {}
    void sum_squares_add(const float*, int64_t) override {}
    void sum_begin() override {}
    void sum_add(const float*, int64_t) override {}
    double sum_end() override { return 0; }
    float* step_scalars(float) override { return scalars_; }
    void read_step_scalars(float out[3]) override {
        for (int i = 0; i < 3; ++i) out[i] = 0;
    }
    void adamw_ranges(const std::vector<AdamWRange>&, const AdamWHyper&, double,
                      const float*) override {}
    void zero(float*, int64_t) override {}
    void to_bf16(void*, const float*, int64_t) override {}
    void from_bf16(float*, const void*, int64_t) override {}

  private:
    float scalars_[3] = {0, 0, 0};  // never read: the meta ops read nothing
};

}  // namespace

DeviceOps& device_ops_meta() {
    static MetaOps ops;
    return ops;
}

DeviceOps& device_ops_cpu() {
    static CpuOps ops;
    return ops;
}

#ifndef TESSERA_HAVE_CUDA
DeviceOps& device_ops_cuda() {
    throw InputError(
        "runtime.device: cuda, but this build of tessera has no CUDA backend "
        "(configure with -DTESSERA_CUDA=ON on a machine with nvcc)");
}
#endif

DeviceOps& device_ops_for(Device d) {
    return d == Device::cuda   ? device_ops_cuda()
           : d == Device::meta ? device_ops_meta()
                               : device_ops_cpu();
}

}  // namespace tessera
