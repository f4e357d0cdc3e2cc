// DeviceOps on the rank's CUDA compute stream (compiled only in CUDA builds).
#ifdef TESSERA_HAVE_CUDA
#include <cuda_runtime.h>

#include "engine/kernels/cuda/adamw.cuh"
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/cuda_handles.cuh"
#include "engine/kernels/cuda/device.cuh"
#include "engine/kernels/cuda/elementwise.cuh"
#include "engine/parallel/device_ops.h"

namespace tessera {

namespace {

class CudaOps final : public DeviceOps {
  public:
    CudaOps()
        : scalar_buf_(cuda_malloc_device<double>(1)),
          sum_buf_(cuda_malloc_device<double>(1)),
          step_scalars_buf_(cuda_malloc_device<float>(3)),
          step_scalars_host_buf_(cuda_malloc_pinned<float>(3)) {}
    Device device() const override { return Device::cuda; }
    void copy(float* dst, const float* src, int64_t n) override {
        CUDA_CHECK(
            cudaMemcpyAsync(dst, src, sizeof(float) * n, cudaMemcpyDeviceToDevice, cuda_stream()));
    }
    void upload(float* dst, const float* src, int64_t n) override {
        CUDA_CHECK(
            cudaMemcpyAsync(dst, src, sizeof(float) * n, cudaMemcpyHostToDevice, cuda_stream()));
        cuda_synchronize();
    }
    void download(float* dst, const float* src, int64_t n) override {
        CUDA_CHECK(
            cudaMemcpyAsync(dst, src, sizeof(float) * n, cudaMemcpyDeviceToHost, cuda_stream()));
        cuda_synchronize();
    }
    void accumulate(float* dst, const float* src, int64_t n) override {
        accumulate_cuda(dst, src, n, cuda_stream());
    }
    // device-side accumulation into scalar_ and sum_
    void sum_squares_begin() override {
        CUDA_CHECK(cudaMemsetAsync(scalar_, 0, sizeof(double), cuda_stream()));
    }
    void sum_squares_add(const float* x, int64_t n) override {
        sum_squares_cuda(scalar_, x, n, cuda_stream());
    }
    void sum_squares_ranges(const std::vector<std::pair<const float*, int64_t>>& ranges) override {
        std::vector<const float*> x;
        std::vector<long> n;
        for (const auto& [p, k] : ranges) x.push_back(p), n.push_back((long)k);
        sum_squares_multi_cuda(scalar_, x.data(), n.data(), (int)x.size(), cuda_stream());
    }
    void sum_begin() override {
        CUDA_CHECK(cudaMemsetAsync(sum_, 0, sizeof(double), cuda_stream()));
    }
    void sum_add(const float* x, int64_t n) override { sum_cuda(sum_, x, n, cuda_stream()); }
    double sum_end() override {
        double h = 0;
        CUDA_CHECK(
            cudaMemcpyAsync(&h, sum_, sizeof(double), cudaMemcpyDeviceToHost, cuda_stream()));
        cuda_synchronize();
        return h;
    }
    float* step_scalars(float stop) override {
        pack_step_scalars_cuda(step_scalars_, scalar_, sum_, stop, cuda_stream());
        return step_scalars_;
    }
    void read_step_scalars(float out[3]) override {
        CUDA_CHECK(cudaMemcpyAsync(step_scalars_host_, step_scalars_, 3 * sizeof(float),
                                   cudaMemcpyDeviceToHost, cuda_stream()));
        cuda_synchronize();
        for (int i = 0; i < 3; ++i) out[i] = step_scalars_host_[i];
    }
    void adamw_ranges(const std::vector<AdamWRange>& ranges, const AdamWHyper& h, double grad_clip,
                      const float* norm2) override {
        adamw_multi_cuda(ranges.data(), (int)ranges.size(), h.lr, h.beta1, h.beta2, h.eps, h.t,
                         1.0f, cuda_stream(), norm2, grad_clip);
    }
    void zero(float* x, int64_t n) override {
        CUDA_CHECK(cudaMemsetAsync(x, 0, sizeof(float) * n, cuda_stream()));
    }
    void to_bf16(void* dst, const float* src, int64_t n) override {
        cast_f32_to_bf16_cuda(static_cast<__nv_bfloat16*>(dst), src, n, cuda_stream());
    }
    void from_bf16(float* dst, const void* src, int64_t n) override {
        cast_to_f32_cuda(dst, static_cast<const __nv_bfloat16*>(src), n, cuda_stream());
    }
    std::shared_ptr<void> record() override {
        CudaEvent e = cuda_event_create(cudaEventDisableTiming);
        CUDA_CHECK(cudaEventRecord(e.get(), cuda_stream()));
        return std::shared_ptr<void>(std::move(e));  // the event's deleter comes along
    }
    void wait(const std::shared_ptr<void>& token) override {
        if (token) CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)token.get()));
    }
    void synchronize() override { cuda_synchronize(); }

  private:
    // owned for the process (a function-static singleton, destroyed at exit before the CUDA
    // runtime's teardown, which registered earlier, at cuda_device_init)
    DeviceBuffer<double> scalar_buf_, sum_buf_;
    DeviceBuffer<float> step_scalars_buf_;
    PinnedBuffer<float> step_scalars_host_buf_;
    double* const scalar_ = scalar_buf_.get();
    double* const sum_ = sum_buf_.get();
    float* const step_scalars_ = step_scalars_buf_.get();            // device
    float* const step_scalars_host_ = step_scalars_host_buf_.get();  // pinned
};

}  // namespace

DeviceOps& device_ops_cuda() {
    static CudaOps ops;
    return ops;
}

}  // namespace tessera
#endif
