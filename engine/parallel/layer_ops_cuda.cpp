// The layers' ops on the CUDA kernels (engine/kernels/cuda), on the rank's compute stream, with
// activations in T (bf16 or float): cuBLASLt GEMMs with bias and GELU epilogues, flash attention
// with grouped-query heads (saving only the log-sum-exp), the Llama family's RMSNorm, rotary
// embeddings and SwiGLU, the classifier writing its gradient during the forward pass.
// Compiled only in CUDA builds.
#ifdef TESSERA_HAVE_CUDA
#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/kernels/cpu/cross_entropy.h"
#include "engine/kernels/cuda/attention.cuh"
#include "engine/kernels/cuda/cross_entropy.cuh"
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/cuda_handles.cuh"
#include "engine/kernels/cuda/device.cuh"
#include "engine/kernels/cuda/elementwise.cuh"
#include "engine/kernels/cuda/embedding.cuh"
#include "engine/kernels/cuda/gelu.cuh"
#include "engine/kernels/cuda/layernorm.cuh"
#include "engine/kernels/cuda/matmul.cuh"
#include "engine/kernels/cuda/rope.cuh"
#include "engine/kernels/cuda/swiglu.cuh"
#include "engine/parallel/layer_ops.h"

namespace tessera {

namespace {

template <typename T>
constexpr DType dtype_of() {
    return std::is_same_v<T, float> ? DType::f32 : DType::bf16;
}

template <typename T>
class CudaLayerOps final : public LayerOps {
  public:
    explicit CudaLayerOps(bool fp8 = false)
        : LayerOps(layer_traits(Device::cuda, dtype_of<T>(), fp8)) {}

    void layernorm_forward(void* out, float* mean, float* rstd, const void* inp, const void* w,
                           const void* b, int N, int C) override {
        layernorm_forward_cuda<T>(P(out), mean, rstd, P(inp), P(w), P(b), N, C, st());
    }
    void layernorm_backward(void* dinp, float* dw, float* db, const void* dout, const void* inp,
                            const void* w, const float* mean, const float* rstd, int N,
                            int C) override {
        layernorm_backward_cuda<T>(P(dinp), dw, db, P(dout), P(inp), P(w), mean, rstd, N, C, st());
    }
    void matmul_forward(void* out, const void* inp, const void* w, const void* b, int N, int C,
                        int OC) override {
        Tensor ws = fp8_workspace(N, C, OC, false);
        matmul_forward_cuda<T>(P(out), P(inp), P(w), P(b), N, C, OC, st(), false, nullptr,
                               ws.data());
    }
    void matmul_residual_forward(void* out, const void* inp, const void* w, const void* b,
                                 const void* res, int N, int C, int OC) override {
        Tensor ws = fp8_workspace(N, C, OC, false);
        matmul_forward_cuda<T>(P(out), P(inp), P(w), P(b), N, C, OC, st(), false, nullptr,
                               ws.data(), P(res));
    }
    void matmul_gelu_forward(void* out, void* pre, const void* inp, const void* w, const void* b,
                             int N, int C, int OC) override {
        Tensor ws = fp8_workspace(N, C, OC, false);
        matmul_forward_cuda<T>(P(out), P(inp), P(w), P(b), N, C, OC, st(), true, P(pre), ws.data());
    }
    void matmul_backward(void* dinp, float* dw, float* db, const void* dout, const void* inp,
                         const void* w, int N, int C, int OC, bool dw_overwrite) override {
        Tensor ws = fp8_workspace(N, C, OC, true);
        matmul_backward_cuda<T>(P(dinp), dw, db, P(dout), P(inp), P(w), N, C, OC, st(), ws.data(),
                                nullptr, dw_overwrite);
    }
    void matmul_gelu_backward(void* dinp, float* dw, float* db, const void* dout, const void* inp,
                              const void* w, const void* pre, int N, int C, int OC,
                              bool dw_overwrite) override {
        Tensor ws = fp8_workspace(N, C, OC, true);
        matmul_backward_cuda<T>(P(dinp), dw, db, P(dout), P(inp), P(w), N, C, OC, st(), ws.data(),
                                P(pre), dw_overwrite);
    }
    void gelu_forward(void* out, const void* inp, int64_t n) override {
        gelu_forward_cuda<T>(P(out), P(inp), (long)n, st());
    }
    void gelu_backward(void* dinp, const void* inp, const void* dout, int64_t n) override {
        gelu_backward_cuda<T>(P(dinp), P(inp), P(dout), (long)n, st());
    }
    void attention_forward(void* out, float* lse, const void* qkv, int B, int T_, int C, int NH,
                           int KV) override {
        attention_forward_cuda<T>(P(out), lse, P(qkv), B, T_, C, NH, KV, st());
    }
    void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* out,
                            const float* lse, int B, int T_, int C, int NH, int KV) override {
        attention_backward_cuda<T>(P(dqkv), P(dout), P(qkv), P(out), lse, B, T_, C, NH, KV, st());
    }
    void rmsnorm_forward(void* out, float* rstd, const void* inp, const void* w, int N, int C,
                         float eps) override {
        rmsnorm_forward_cuda<T>(P(out), rstd, P(inp), P(w), N, C, eps, st());
    }
    void rmsnorm_backward(void* dinp, float* dw, const void* dout, const void* inp, const void* w,
                          const float* rstd, int N, int C) override {
        rmsnorm_backward_cuda<T>(P(dinp), dw, P(dout), P(inp), P(w), rstd, N, C, st());
    }
    void head_rmsnorm_forward(void* out, float* rstd, const void* inp, const void* w, int N,
                              int heads, int hd, int64_t stride, float eps) override {
        rmsnorm_heads_forward_cuda<T>(P(out), rstd, P(inp), P(w), N, heads, hd, (long)stride, eps,
                                      st());
    }
    void head_rmsnorm_backward(void* dinp, float* dw, const void* dout, const void* inp,
                               const void* w, const float* rstd, int N, int heads, int hd,
                               int64_t stride) override {
        rmsnorm_heads_backward_cuda<T>(P(dinp), dw, P(dout), P(inp), P(w), rstd, N, heads, hd,
                                       (long)stride, st());
    }
    void rope(void* x, int B, int T_, int heads, int hd, int64_t stride,
              const std::vector<float>& inv_freq, bool inverse, int pos0) override {
        rope_cuda<T>(P(x), B, T_, heads, hd, (long)stride, device_table(inv_freq), inverse, st(),
                     pos0);
    }
    void attention_decode(void* out, const void* q, int64_t q_stride, const void* kc,
                          const void* vc, int B, int n, int pos0, int NH, int KV, int hd,
                          int Tmax) override {
        attention_decode_cuda<T>(P(out), P(q), (long)q_stride, P(kc), P(vc), B, n, pos0, NH, KV, hd,
                                 Tmax, st());
    }
    void copy_rows(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t rows,
                   int64_t row_bytes) override {
        CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows,
                                     cudaMemcpyDeviceToDevice, st()));
    }
    std::vector<float> read_f32(const void* x, int64_t n) override {
        Tensor f = Tensor::empty({n}, MemCategory::workspace, DType::f32, Device::cuda);
        cast_to_f32_cuda<T>(f.f32(), P(x), (long)n, st());
        std::vector<float> h((size_t)n);
        CUDA_CHECK(
            cudaMemcpyAsync(h.data(), f.f32(), sizeof(float) * n, cudaMemcpyDeviceToHost, st()));
        CUDA_CHECK(cudaStreamSynchronize(st()));
        return h;
    }
    void swiglu_forward(void* out, const void* gu, int N, int F) override {
        swiglu_forward_cuda<T>(P(out), P(gu), N, F, st());
    }
    void swiglu_backward(void* dgu, const void* dout, const void* gu, int N, int F) override {
        swiglu_backward_cuda<T>(P(dgu), P(dout), P(gu), N, F, st());
    }
    void add_bias_residual(void* y, const void* bias, const void* res, int N, int C) override {
        add_bias_residual_cuda<T>(P(y), P(bias), P(res), N, C, st());
    }
    void embedding_forward(void* out, const int* tokens, const void* wte, const void* wpe,
                           int64_t v0, int64_t v1, int B, int T_, int C) override {
        embedding_forward_cuda<T>(P(out), tokens, P(wte), P(wpe), v0, v1, B, T_, C, st());
    }
    void embedding_backward(float* dwte, float* dwpe, const void* dout, const int* tokens,
                            int64_t v0, int64_t v1, int B, int T_, int C) override {
        embedding_backward_cuda<T>(dwte, dwpe, P(dout), tokens, v0, v1, B, T_, C, st());
    }
    // Training over the whole vocabulary: one pass. Else one online pass per shard for the
    // statistics (tensor parallel combines the shards with a rescale), then the loss and the
    // gradient.
    void cross_entropy(float* losses, float* stats, float* gmax, void* logits, const int* targets,
                       int64_t v0, int N, int Vl, int Vp, const TpGroup& tp, float loss_scale,
                       bool grad) override {
        if (grad && tp.size == 1 && v0 == 0) {
            ce_train_cuda<T>(losses, stats, P(logits), targets, loss_scale, N, Vl, st(), Vp);
            return;
        }
        float* mx = stats;
        float* sum = mx + N;
        float* tt = sum + N;
        ce_row_stats_cuda<T>(mx, sum, tt, P(logits), targets, v0, N, Vl, st(), Vp);
        if (tp.size > 1) {  // global max, then the rescaled sums
            CUDA_CHECK(
                cudaMemcpyAsync(gmax, mx, sizeof(float) * N, cudaMemcpyDeviceToDevice, st()));
            tp.all_reduce(gmax, N, DType::f32, ReduceOp::max);
            ce_rescale_cuda(mx, sum, tt, gmax, N, st());
            tp.all_reduce(sum, 2 * (int64_t)N, DType::f32);
        }
        if (grad)
            ce_loss_and_grad_cuda<T>(losses, P(logits), mx, sum, tt, targets, v0, loss_scale, N, Vl,
                                     st(), Vp);
        else
            ce_loss_only_cuda(losses, sum, tt, targets, N, st());
    }
    void relu_forward(void* out, const void* inp, int64_t n) override {
        relu_forward_cuda<T>(P(out), P(inp), (long)n, st());
    }
    void relu_backward(void* dinp, const void* inp, const void* dout, int64_t n) override {
        relu_backward_cuda<T>(P(dinp), P(inp), P(dout), (long)n, st());
    }
    // Evaluation only: the scores widened to fp32 and read back with the targets, counted on
    // the host (one synchronisation).
    int64_t count_correct(const void* logits, const int* targets, int N, int V) override {
        Tensor f =
            Tensor::empty({(int64_t)N * V}, MemCategory::workspace, DType::f32, Device::cuda);
        cast_to_f32_cuda<T>(f.f32(), P(logits), (long)N * V, st());
        std::vector<float> h((size_t)N * V);
        std::vector<int32_t> t((size_t)N);
        CUDA_CHECK(cudaMemcpyAsync(h.data(), f.f32(), sizeof(float) * h.size(),
                                   cudaMemcpyDeviceToHost, st()));
        CUDA_CHECK(
            cudaMemcpyAsync(t.data(), targets, sizeof(int32_t) * N, cudaMemcpyDeviceToHost, st()));
        CUDA_CHECK(cudaStreamSynchronize(st()));
        return tessera::count_correct(h.data(), t.data(), N, V);
    }
    void accumulate(float* dst, const float* src, int64_t n) override {
        accumulate_cuda(dst, src, (long)n, st());
    }
    void cast_weights(void* dst, const float* src, int64_t n) override {
        if constexpr (std::is_same_v<T, float>)
            CUDA_CHECK(
                cudaMemcpyAsync(dst, src, sizeof(float) * n, cudaMemcpyDeviceToDevice, st()));
        else
            cast_f32_to_bf16_cuda((T*)dst, src, (long)n, st());
    }
    void copy(void* dst, const void* src, int64_t bytes) override {
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st()));
    }
    // Through a pinned staging buffer per slot, so the copy is asynchronous; a slot is reused
    // only in a later step, after the step's final synchronisation (a repeat upload of the same
    // micro-batch writes the same bytes: harmless).
    void upload_tokens(TokenSlot& slot, const std::vector<int32_t>& ids) override {
        const size_t bytes = sizeof(int32_t) * ids.size();
        if (slot.staging_bytes < bytes) {
            slot.staging.reset();
            slot.staging = {cuda_malloc_pinned(bytes).release(), cuda_free_pinned};
            slot.staging_bytes = bytes;
        }
        std::memcpy(slot.staging.get(), ids.data(), bytes);
        CUDA_CHECK(cudaMemcpyAsync(slot.device.data(), slot.staging.get(), bytes,
                                   cudaMemcpyHostToDevice, st()));
    }

  private:
    // A small constant table (the rotary frequencies) on the current device, uploaded once per
    // device and content and kept for the process (a few hundred bytes per model).
    static const float* device_table(const std::vector<float>& v) {
        static std::mutex mu;
        static std::map<std::pair<int, std::vector<float>>, DeviceBuffer<float>> tables;
        int dev = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        std::lock_guard<std::mutex> lock(mu);
        DeviceBuffer<float>& p = tables[{dev, v}];
        if (!p) {
            p = cuda_malloc_device<float>(v.size());
            CUDA_CHECK(
                cudaMemcpy(p.get(), v.data(), sizeof(float) * v.size(), cudaMemcpyHostToDevice));
        }
        return p.get();
    }
    static cudaStream_t st() { return cuda_stream(); }
    static T* P(void* p) { return static_cast<T*>(p); }
    static const T* P(const void* p) { return static_cast<const T*>(p); }
};

}  // namespace

LayerOps& layer_ops_cuda(DType act, bool fp8) {
    static CudaLayerOps<bf16> ops16;
    static CudaLayerOps<bf16> ops16_fp8(true);
    static CudaLayerOps<float> ops32;
    TS_CHECK(!fp8 || act == DType::bf16, "FP8 GEMMs need bf16 activations");
    if (act == DType::bf16) return fp8 ? ops16_fp8 : ops16;
    TS_CHECK(act == DType::f32, "CUDA layers compute in bf16 or fp32, not ", dtype_name(act));
    return ops32;
}

}  // namespace tessera
#endif
