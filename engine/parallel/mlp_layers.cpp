// The MLP classifier's layers for the parallel runtime: one linear layer per weight matrix,
// fc.<i>: out = x · Wᵀ + b, then ReLU, except on the last, whose output is the classes' scores
// and whose forward makes the cross-entropy loss and its gradient (as the GPT head does). The
// first reads the batch's features. Not tensor-split and not pipelined (the config refuses
// both): data-parallel and ZeRO plans run it through the same parameter store and rank loop as
// GPT. With one rank on the CPU the math is MlpModel's.
#include <string>

#include "engine/core/error.h"
#include "engine/parallel/tp_layers.h"

namespace tessera {

namespace {

class LinearLayer final : public Layer {
    enum Saved {
        X,
        PRE
    };  // the input (none for the first layer: the batch holds it), pre-activation

  public:
    LinearLayer(const ShardSpec& s, int i) : Layer(*s.ops), spec_(s) {
        const std::vector<int>& sizes = s.model.sizes;
        TS_CHECK(i >= 0 && i + 1 < (int)sizes.size(), "layer index ", i, " outside 0..",
                 sizes.size() - 2);
        TS_CHECK(s.tp.size == 1, "an MLP is not tensor-split");
        in_ = sizes[i];
        out_ = sizes[i + 1];
        first_ = i == 0;
        last_ = i + 2 == (int)sizes.size();
        name_ = "fc." + std::to_string(i);
        const ParamTable& global = s.model.param_table();
        add_param(global, name_ + ".weight", {out_, in_}, {{0, out_}}, 0, in_);
        add_param(global, name_ + ".bias", {out_}, {{0, out_}}, 0, 1);
    }

    Tensor forward(int micro, Tensor x, const Batch& b) override {
        const int B = b.batch_size;
        Tensor pre = act({B, out_});
        ops_.matmul_forward(pre.data(), input(x, b), w(0), w(1), B, in_, out_);
        Tensor result;
        if (!last_) {
            result = act({B, out_});
            ops_.relu_forward(result.data(), pre.data(), (int64_t)B * out_);
        } else {
            const int* tgt = tokens(micro, b, true);
            Tensor stats = f32({3, B}, MemCategory::workspace);
            result = f32({B}, MemCategory::workspace);
            ops_.cross_entropy(result.f32(), stats.f32(), nullptr, pre.data(), tgt, 0, B, out_,
                               out_, spec_.tp, spec_.loss_scale, micro >= 0);
            if (micro < 0) eval_correct += ops_.count_correct(pre.data(), tgt, B, out_);
        }
        if (micro >= 0) {
            std::vector<Tensor> s(2);
            s[X] = std::move(x);
            s[PRE] = std::move(pre);
            saved_[micro] = std::move(s);
        }
        return result;
    }

    // dout: d(ReLU output) (B, out), turned into d(pre-activation) in place; the head's
    // pre-activation already holds its gradient.
    Tensor backward(int micro, Tensor dout, const Batch& b) override {
        const int B = b.batch_size;
        std::vector<Tensor>& s = saved_at(micro);
        void* dpre = s[PRE].data();
        if (!last_) {
            ops_.relu_backward(dout.data(), s[PRE].data(), dout.data(), (int64_t)B * out_);
            dpre = dout.data();
        }
        Tensor dx = first_ ? Tensor() : act({B, in_});
        ops_.matmul_backward(first_ ? nullptr : dx.data(), grad_ptr[0], grad_ptr[1], dpre,
                             input(s[X], b), w(0), B, in_, out_, first_write(0));
        release(micro);
        return dx;
    }

  private:
    // The layer's input: the previous layer's output, or the batch's features (on the host).
    const void* input(const Tensor& x, const Batch& b) const {
        if (!first_) return x.data();
        if (device != Device::cpu && device != Device::meta)
            throw Error("the MLP reads its features from the host: it runs on CPU ranks");
        TS_CHECK(
            (int64_t)b.features.size() == (int64_t)b.batch_size * in_ || device == Device::meta,
            "MLP batch has ", b.features.size(), " features, expected ",
            (int64_t)b.batch_size * in_);
        return b.features.data();
    }

    ShardSpec spec_;
    int in_ = 0, out_ = 0;
    bool first_ = false, last_ = false;
};

}  // namespace

std::unique_ptr<Layer> mlp_layer_create(const ShardSpec& spec, int index) {
    return std::make_unique<LinearLayer>(spec, index);
}

}  // namespace tessera
