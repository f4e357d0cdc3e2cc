// The layers' ops on the CPU kernels (engine/kernels/cpu), fp32. The kernels accumulate their
// input gradients (dinp +=); the ops that overwrite zero first, which gives the same bits.
#include <cmath>
#include <cstring>

#include "engine/core/error.h"
#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/cross_entropy.h"
#include "engine/kernels/cpu/elementwise.h"
#include "engine/kernels/cpu/gelu.h"
#include "engine/kernels/cpu/layernorm.h"
#include "engine/kernels/cpu/matmul.h"
#include "engine/kernels/cpu/rmsnorm.h"
#include "engine/kernels/cpu/rope.h"
#include "engine/kernels/cpu/swiglu.h"
#include "engine/parallel/layer_ops.h"

namespace tessera {

namespace {

float* F(void* p) {
    return static_cast<float*>(p);
}
const float* F(const void* p) {
    return static_cast<const float*>(p);
}

class CpuLayerOps final : public LayerOps {
  public:
    CpuLayerOps() : LayerOps(layer_traits(Device::cpu, DType::f32)) {}

    void layernorm_forward(void* out, float* mean, float* rstd, const void* inp, const void* w,
                           const void* b, int N, int C) override {
        tessera::layernorm_forward(F(out), mean, rstd, F(inp), F(w), F(b), N, C);
    }
    void layernorm_backward(void* dinp, float* dw, float* db, const void* dout, const void* inp,
                            const void* w, const float* mean, const float* rstd, int N,
                            int C) override {
        tessera::layernorm_backward(F(dinp), dw, db, F(dout), F(inp), F(w), mean, rstd, N, C);
    }
    void matmul_forward(void* out, const void* inp, const void* w, const void* b, int N, int C,
                        int OC) override {
        tessera::matmul_forward(F(out), F(inp), F(w), F(b), N, C, OC);
    }
    void matmul_gelu_forward(void* out, void* pre, const void* inp, const void* w, const void* b,
                             int N, int C, int OC) override {
        tessera::matmul_forward(F(pre), F(inp), F(w), F(b), N, C, OC);
        tessera::gelu_forward(F(out), F(pre), (int64_t)N * OC);
    }
    void matmul_backward(void* dinp, float* dw, float* db, const void* dout, const void* inp,
                         const void* w, int N, int C, int OC, bool dw_overwrite) override {
        if (dinp) std::memset(dinp, 0, sizeof(float) * N * C);
        if (dw && dw_overwrite) std::memset(dw, 0, sizeof(float) * OC * C);
        tessera::matmul_backward(F(dinp), dw, db, F(dout), F(inp), F(w), N, C, OC);
    }
    void matmul_gelu_backward(void* dinp, float* dw, float* db, const void* dout, const void* inp,
                              const void* w, const void* pre, int N, int C, int OC,
                              bool dw_overwrite) override {
        matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC, dw_overwrite);
        gelu_backward_set(F(dinp), F(pre), F(dinp), (int64_t)N * C);
    }
    void gelu_forward(void* out, const void* inp, int64_t n) override {
        tessera::gelu_forward(F(out), F(inp), n);
    }
    void gelu_backward(void* dinp, const void* inp, const void* dout, int64_t n) override {
        gelu_backward_set(F(dinp), F(inp), F(dout), n);
    }
    void relu_forward(void* out, const void* inp, int64_t n) override {
        tessera::relu_forward(F(out), F(inp), n);
    }
    void relu_backward(void* dinp, const void* inp, const void* dout, int64_t n) override {
        relu_backward_set(F(dinp), F(inp), F(dout), n);
    }
    void attention_forward(void* out, float* stats, const void* qkv, int B, int T, int C, int NH,
                           int KV) override {
        tessera::attention_forward(F(out), stats, F(qkv), B, T, C, NH, KV);
    }
    void attention_backward(void* dqkv, const void* dout, const void* qkv, const void*,
                            const float* stats, int B, int T, int C, int NH, int KV) override {
        std::memset(dqkv, 0, sizeof(float) * B * T * (C + 2 * (C / NH) * KV));
        tessera::attention_backward(F(dqkv), F(dout), F(qkv), stats, B, T, C, NH, KV);
    }
    void rmsnorm_forward(void* out, float* rstd, const void* inp, const void* w, int N, int C,
                         float eps) override {
        tessera::rmsnorm_forward(F(out), rstd, F(inp), F(w), N, C, eps);
    }
    void rmsnorm_backward(void* dinp, float* dw, const void* dout, const void* inp, const void* w,
                          const float* rstd, int N, int C) override {
        tessera::rmsnorm_backward(F(dinp), dw, F(dout), F(inp), F(w), rstd, N, C);
    }
    void head_rmsnorm_forward(void* out, float* rstd, const void* inp, const void* w, int N,
                              int heads, int hd, int64_t stride, float eps) override {
        rmsnorm_heads_forward(F(out), rstd, F(inp), F(w), N, heads, hd, (long)stride, eps);
    }
    void head_rmsnorm_backward(void* dinp, float* dw, const void* dout, const void* inp,
                               const void* w, const float* rstd, int N, int heads, int hd,
                               int64_t stride) override {
        rmsnorm_heads_backward(F(dinp), dw, F(dout), F(inp), F(w), rstd, N, heads, hd,
                               (long)stride);
    }
    void attention_decode(void* out, const void* q, int64_t q_stride, const void* kc,
                          const void* vc, int B, int n, int pos0, int NH, int KV, int hd,
                          int Tmax) override {
        tessera::attention_decode(F(out), F(q), (long)q_stride, F(kc), F(vc), B, n, pos0, NH, KV,
                                  hd, Tmax);
    }
    void copy_rows(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t rows,
                   int64_t row_bytes) override {
        for (int64_t r = 0; r < rows; ++r)
            std::memcpy((char*)dst + r * dst_pitch, (const char*)src + r * src_pitch,
                        (size_t)row_bytes);
    }
    std::vector<float> read_f32(const void* x, int64_t n) override {
        return std::vector<float>(F(x), F(x) + n);
    }
    void rope(void* x, int B, int T, int heads, int hd, int64_t stride,
              const std::vector<float>& inv_freq, bool inverse, int pos0) override {
        rope_apply(F(x), B, T, heads, hd, (long)stride, inv_freq, inverse, pos0);
    }
    void swiglu_forward(void* out, const void* gu, int N, int Fw) override {
        tessera::swiglu_forward(F(out), F(gu), N, Fw);
    }
    void swiglu_backward(void* dgu, const void* dout, const void* gu, int N, int Fw) override {
        tessera::swiglu_backward(F(dgu), F(dout), F(gu), N, Fw);
    }
    void add_bias_residual(void* yv, const void* biasv, const void* resv, int N, int C) override {
        float* y = F(yv);
        const float *bias = F(biasv), *res = F(resv);
#pragma omp parallel for
        for (int n = 0; n < N; ++n) {
            float* row = y + (int64_t)n * C;
            const float* r = res + (int64_t)n * C;
            if (bias)
                for (int c = 0; c < C; ++c) row[c] = (bias[c] + row[c]) + r[c];
            else
                for (int c = 0; c < C; ++c) row[c] = row[c] + r[c];
        }
    }
    void embedding_forward(void* outv, const int* tokens, const void* wtev, const void* wpev,
                           int64_t v0, int64_t v1, int B, int T, int C) override {
        float* out = F(outv);
        const float *wte = F(wtev), *wpe = F(wpev);
        const int N = B * T;
        for (int n = 0; n < N; ++n) {
            float* o = out + (int64_t)n * C;
            const int tok = tokens[n];
            if (tok >= v0 && tok < v1)
                std::memcpy(o, wte + (tok - v0) * C, sizeof(float) * C);
            else
                std::memset(o, 0, sizeof(float) * C);
            if (wpe) {
                const float* pe = wpe + (int64_t)(n % T) * C;
                for (int c = 0; c < C; ++c) o[c] += pe[c];
            }
        }
    }
    void embedding_backward(float* dwte, float* dwpe, const void* doutv, const int* tokens,
                            int64_t v0, int64_t v1, int B, int T, int C) override {
        const float* dout = F(doutv);
        const int N = B * T;
        for (int n = 0; n < N; ++n) {
            const float* d = dout + (int64_t)n * C;
            const int tok = tokens[n];
            if (tok >= v0 && tok < v1) {
                float* w = dwte + (tok - v0) * C;
                for (int c = 0; c < C; ++c) w[c] += d[c];
            }
            if (!dwpe) continue;
            float* pe = dwpe + (int64_t)(n % T) * C;
            for (int c = 0; c < C; ++c) pe[c] += d[c];
        }
    }
    // Global max first (all-reduced), then the exponentials (kept in the logits), their sum and
    // the target's term (all-reduced together); the exponentials become probabilities, then the
    // gradient.
    void cross_entropy(float* losses, float* stats, float*, void* logitsv, const int* targets,
                       int64_t v0, int N, int Vl, int Vp, const TpGroup& tp, float loss_scale,
                       bool grad) override {
        TS_CHECK(Vp == Vl, "CPU logits are not padded");
        float* logits = F(logitsv);
        float* mx = stats;
        float* sum = mx + N;
        float* tl = sum + N;
#pragma omp parallel for
        for (int n = 0; n < N; ++n) {
            const float* row = logits + (int64_t)n * Vl;
            float m = -INFINITY;
            for (int v = 0; v < Vl; ++v) m = row[v] > m ? row[v] : m;
            mx[n] = m;
        }
        tp.all_reduce(mx, N, DType::f32, ReduceOp::max);
#pragma omp parallel for
        for (int n = 0; n < N; ++n) {
            float* row = logits + (int64_t)n * Vl;
            float z = 0.0f;
            for (int v = 0; v < Vl; ++v) {
                row[v] = std::exp(row[v] - mx[n]);
                z += row[v];
            }
            sum[n] = z;
            const int t = targets[n];
            tl[n] = (t >= v0 && t < v0 + Vl) ? row[t - v0] : 0.0f;  // exp(logit_t - max)
        }
        tp.all_reduce(sum, 2 * (int64_t)N, DType::f32);  // sums and target terms together
#pragma omp parallel for
        for (int n = 0; n < N; ++n) {
            float* row = logits + (int64_t)n * Vl;
            const float inv = 1.0f / sum[n];
            const int t = targets[n];
            losses[n] = t >= 0 ? -std::log(tl[n] * inv) : 0.0f;
            if (!grad) continue;
            if (t < 0) {
                for (int v = 0; v < Vl; ++v) row[v] = 0.0f;
                continue;
            }
            for (int v = 0; v < Vl; ++v) row[v] = (row[v] * inv) * loss_scale;
            if (t >= v0 && t < v0 + Vl) row[t - v0] -= loss_scale;
        }
    }
    int64_t count_correct(const void* logits, const int* targets, int N, int V) override {
        return tessera::count_correct(F(logits), targets, N, V);
    }
    void accumulate(float* dst, const float* src, int64_t n) override {
        tessera::accumulate(dst, src, n);
    }
    void cast_weights(void*, const float*, int64_t) override {
        throw Error("CPU layers compute with their fp32 masters: nothing to cast");
    }
    void copy(void* dst, const void* src, int64_t bytes) override {
        std::memcpy(dst, src, bytes);
    }
    void upload_tokens(TokenSlot&, const std::vector<int32_t>&) override {
        throw Error("CPU layers read token ids from the batch");
    }
};

}  // namespace

LayerOps& layer_ops_cpu() {
    static CpuLayerOps ops;
    return ops;
}

}  // namespace tessera
