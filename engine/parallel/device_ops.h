// The few vector operations the parallel runtime itself needs (ZeRO slices, gradient reduction,
// the optimizer, loss sums), on the rank's device: the CPU kernels, or the CUDA ones on the
// rank's compute stream. Layers bring their own kernels; this is only the glue.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/kernels/cpu/adamw.h"

namespace tessera {

class DeviceOps {
  public:
    virtual ~DeviceOps() = default;
    virtual Device device() const = 0;
    virtual void copy(float* dst, const float* src, int64_t n) = 0;  // same device
    virtual void upload(float* dst, const float* host_src, int64_t n) = 0;
    virtual void download(float* host_dst, const float* src, int64_t n) = 0;
    virtual void accumulate(float* dst, const float* src, int64_t n) = 0;  // dst += src
    // Accumulations on the device (GPUs: stream-ordered, no host wait): begin, then add any
    // number of ranges. The squared gradient norm goes on into step_scalars; the loss sum too,
    // or sum_end returns it (synchronising: evaluation).
    virtual void sum_squares_begin() = 0;
    virtual void sum_squares_add(const float* x, int64_t n) = 0;
    // sum_squares_add over every range (GPUs: a few launches in all, not one a range)
    virtual void sum_squares_ranges(const std::vector<std::pair<const float*, int64_t>>& ranges) {
        for (const auto& [x, n] : ranges) sum_squares_add(x, n);
    }
    virtual void sum_begin() = 0;
    virtual void sum_add(const float* x, int64_t n) = 0;
    virtual double sum_end() = 0;
    // A training step's three scalars, packed where one all-reduce sums them without a host
    // round trip (device memory on GPUs, stream-ordered): {the sum_squares accumulation (the
    // squared gradient norm), the sum accumulation (the loss), stop}. read_step_scalars copies
    // them to the host once the work queued so far is done.
    virtual float* step_scalars(float stop) = 0;
    virtual void read_step_scalars(float out[3]) = 0;
    // AdamW over many ranges, each with its own weight decay (h.weight_decay is ignored), the
    // gradients clipped to global norm `grad_clip` (<= 0: not clipped) by the squared norm at
    // *norm2, where it lies (see step_scalars): on GPUs one launch that reads it itself.
    virtual void adamw_ranges(const std::vector<AdamWRange>& ranges, const AdamWHyper& h,
                              double grad_clip, const float* norm2) = 0;
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
};

DeviceOps& device_ops_cpu();
// The meta device's (the estimator's ParamStore): no-ops; the buffers are meta tensors.
DeviceOps& device_ops_meta();
// The CUDA implementation (engine/parallel/device_ops_cuda.cpp); throws without a CUDA build.
DeviceOps& device_ops_cuda();
DeviceOps& device_ops_for(Device d);

}  // namespace tessera
