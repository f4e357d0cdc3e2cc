// Device traits, the meta device's ops (which launch nothing) and the choice of backend.
#include "engine/parallel/layer_ops.h"

#include <map>
#include <memory>
#include <mutex>

#include "engine/core/error.h"

namespace tessera {

LayerTraits layer_traits(Device d, DType act) {
    LayerTraits t;
    t.device = d;
    t.act = act;
    if (d == Device::cuda) {
        t.attention_scores = false;  // flash attention: the log-sum-exp only
        t.vocab_align = 128;
        t.tokens_on_device = true;
        t.async_copies = true;
    } else {
        TS_CHECK(d == Device::cpu && act == DType::f32, "layer_traits: the CPU computes in fp32");
    }
    return t;
}

TokenSlot::~TokenSlot() {
    if (staging && free_staging) free_staging(staging);
}

namespace {

// The meta device: every op is a no-op; tensors are allocated on Device::meta by the layers.
class MetaLayerOps final : public LayerOps {
public:
    explicit MetaLayerOps(const LayerTraits& t) : LayerOps(t) {}
    Device device() const override { return Device::meta; }
    void layernorm_forward(void*, float*, float*, const void*, const void*, const void*, int, int) override {}
    void layernorm_backward(void*, float*, float*, const void*, const void*, const void*, const float*,
                            const float*, int, int) override {}
    void matmul_forward(void*, const void*, const void*, const void*, int, int, int) override {}
    void matmul_gelu_forward(void*, void*, const void*, const void*, const void*, int, int, int) override {}
    void matmul_backward(void*, float*, float*, const void*, const void*, const void*, int, int, int) override {}
    void gelu_forward(void*, const void*, int64_t) override {}
    void gelu_backward(void*, const void*, const void*, int64_t) override {}
    void relu_forward(void*, const void*, int64_t) override {}
    void relu_backward(void*, const void*, const void*, int64_t) override {}
    int64_t count_correct(const void*, const int*, int, int) override { return 0; }
    void attention_forward(void*, float*, const void*, int, int, int, int) override {}
    void attention_backward(void*, const void*, const void*, const void*, const float*, int, int, int,
                            int) override {}
    void add_bias_residual(void*, const void*, const void*, int, int) override {}
    void embedding_forward(void*, const int*, const void*, const void*, int64_t, int64_t, int, int,
                           int) override {}
    void embedding_backward(float*, float*, const void*, const int*, int64_t, int64_t, int, int, int) override {}
    void cross_entropy_stats(float*, float*, void*, const int*, int64_t, int, int, int,
                             const TpGroup&) override {}
    void cross_entropy_loss(float*, void*, const float*, const int*, int64_t, int, int, int, float,
                            bool) override {}
    void accumulate(float*, const float*, int64_t) override {}
    void cast_weights(void*, const float*, int64_t) override {}
    void copy(void*, const void*, int64_t) override {}
    void upload_tokens(TokenSlot&, const std::vector<int32_t>&) override {}
};

}  // namespace

LayerOps& layer_ops_meta(const LayerTraits& target) {
    static std::mutex mu;
    static std::map<std::pair<int, int>, std::unique_ptr<MetaLayerOps>> ops;
    std::lock_guard<std::mutex> lock(mu);
    auto& p = ops[{(int)target.device, (int)target.act}];
    if (!p) p = std::make_unique<MetaLayerOps>(layer_traits(target.device, target.act));
    return *p;
}

LayerOps& layer_ops_for(Device d, DType act) {
    if (d == Device::cuda) {
#ifdef TESSERA_HAVE_CUDA
        return layer_ops_cuda(act);
#else
        throw InputError("runtime.device: cuda needs a CUDA build of tessera");
#endif
    }
    TS_CHECK(d == Device::cpu, "layer_ops_for: no ops for the meta device without a target");
    return layer_ops_cpu();
}

}  // namespace tessera
