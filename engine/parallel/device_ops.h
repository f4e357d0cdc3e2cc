// The few vector operations the parallel runtime itself needs (ZeRO slices, gradient reduction,
// the optimizer, loss sums), on the rank's device: the CPU kernels, or the CUDA ones on the
// rank's compute stream. Layers bring their own kernels; this is only the glue.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/kernels/cpu/adamw.h"
#include "engine/optim/optimizer.h"

namespace tessera {

class DeviceOps {
public:
    virtual ~DeviceOps() = default;
    virtual Device device() const = 0;
    virtual void copy(float* dst, const float* src, int64_t n) = 0;  // same device
    virtual void upload(float* dst, const float* host_src, int64_t n) = 0;
    virtual void download(float* host_dst, const float* src, int64_t n) = 0;
    virtual void accumulate(float* dst, const float* src, int64_t n) = 0;  // dst += src
    virtual double sum_squares(const float* x, int64_t n) = 0;            // synchronous
    // Accumulating forms that synchronise once: begin, add any number of ranges, then end.
    virtual void sum_squares_begin() { acc_squares_ = 0; }
    virtual void sum_squares_add(const float* x, int64_t n) { acc_squares_ += sum_squares(x, n); }
    virtual double sum_squares_end() { return acc_squares_; }
    virtual void sum_begin() { acc_sum_ = 0; }
    virtual void sum_add(const float* x, int64_t n) { acc_sum_ += sum(x, n); }
    virtual double sum_end() { return acc_sum_; }
    // A training step's three scalars, packed where one all-reduce sums them without a host
    // round trip (device memory on GPUs, stream-ordered): {the sum_squares accumulation (the
    // squared gradient norm), the sum accumulation (the loss), stop}. read_step_scalars copies
    // them to the host once the work queued so far is done.
    virtual float* step_scalars(float stop) {
        scalars_[0] = (float)acc_squares_;
        scalars_[1] = (float)acc_sum_;
        scalars_[2] = stop;
        return scalars_;
    }
    virtual void read_step_scalars(float out[3]) {
        for (int i = 0; i < 3; ++i) out[i] = scalars_[i];
    }
    virtual double sum(const float* x, int64_t n) = 0;                    // synchronous
    virtual void adamw(float* p, const float* g, float* m, float* v, int64_t n, const AdamWHyper& h,
                       float grad_scale) = 0;
    // AdamW over many ranges, each with its own weight decay (h.weight_decay is ignored): one
    // adamw() per range, or (CUDA) one launch for all of them.
    virtual void adamw_ranges(const std::vector<AdamWRange>& ranges, const AdamWHyper& h,
                              float grad_scale) {
        for (const AdamWRange& r : ranges) {
            AdamWHyper hr = h;
            hr.weight_decay = r.weight_decay;
            adamw(r.param, r.grad, r.m, r.v, r.n, hr, grad_scale);
        }
    }
    // The same with the gradients clipped to global norm `grad_clip` (<= 0: not clipped), the
    // squared norm read from *norm2 where it lies (see step_scalars): on GPUs by the kernel.
    virtual void adamw_ranges_clipped(const std::vector<AdamWRange>& ranges, const AdamWHyper& h,
                                      double grad_clip, const float* norm2) {
        adamw_ranges(ranges, h, clip_scale(grad_clip, std::sqrt((double)*norm2)));
    }
    virtual void zero(float* x, int64_t n) {
        for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    }
    // fp32 <-> bf16 (round to nearest even, the GPU layers' weight cast) for parameters gathered
    // in bf16; only GPU backends have them.
    virtual void to_bf16(void* dst, const float* src, int64_t n) {
        (void)dst, (void)src, (void)n;
        throw Error("to_bf16: not available on this device");
    }
    virtual void from_bf16(float* dst, const void* src, int64_t n) {
        (void)dst, (void)src, (void)n;
        throw Error("from_bf16: not available on this device");
    }
    // A marker of the work queued so far on the compute stream; wait() blocks the calling host
    // thread until that work is done (the comm thread calls it before reading buffers).
    virtual std::shared_ptr<void> record() { return nullptr; }
    virtual void wait(const std::shared_ptr<void>&) {}
    virtual void synchronize() {}

protected:
    double acc_squares_ = 0, acc_sum_ = 0;
    float scalars_[3] = {0, 0, 0};
};

DeviceOps& device_ops_cpu();
// The CUDA implementation (engine/parallel/device_ops_cuda.cpp); throws without a CUDA build.
DeviceOps& device_ops_cuda();
DeviceOps& device_ops_for(Device d);

}  // namespace tessera
