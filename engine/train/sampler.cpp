#include "engine/train/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/core/error.h"
#include "engine/model/params.h"

namespace tessera {

namespace {

// The next token from the last position's logits (V of them): greedy, or drawn at the
// temperature among the top k with a uniform number from (seed, step i).
int pick_token(const float* last, int V, const SampleOptions& o, int i) {
    if (o.vocab_limit > 0) V = std::min(V, o.vocab_limit);
    if (o.temperature <= 0) return (int)(std::max_element(last, last + V) - last);
    std::vector<std::pair<float, int>> cand(V);
    for (int v = 0; v < V; ++v) cand[v] = {last[v] / (float)o.temperature, v};
    int k = (o.top_k > 0 && o.top_k < V) ? o.top_k : V;
    std::partial_sort(cand.begin(), cand.begin() + k, cand.end(),
                      [](auto& a, auto& b) { return a.first > b.first; });
    double maxv = cand[0].first, sum = 0;
    std::vector<double> p(k);
    for (int j = 0; j < k; ++j) sum += p[j] = std::exp(cand[j].first - maxv);
    double u =
        (splitmix64(o.seed * 0x9E3779B97F4A7C15ull + i) >> 11) * (1.0 / 9007199254740992.0) * sum;
    int j = 0;
    for (double acc = p[0]; acc < u && j + 1 < k; acc += p[++j]) {
    }
    return cand[j].second;
}

}  // namespace

std::vector<int> sample_tokens(GptModel& model, const std::vector<int>& prompt,
                               const SampleOptions& o) {
    const int V = model.dims().vocab, T = model.dims().seq_len;
    std::vector<int32_t> ctx(prompt.begin(), prompt.end());
    if (ctx.empty()) ctx.push_back(o.stop_token >= 0 ? o.stop_token : 0);
    std::vector<int> generated;
    for (int i = 0; i < o.max_new_tokens; ++i) {
        int n = std::min<int>((int)ctx.size(), T);
        const float* logits = model.forward_logits(ctx.data() + ctx.size() - n, 1, n);
        const int next = pick_token(logits + (int64_t)(n - 1) * V, V, o, i);
        if (next == o.stop_token) break;
        generated.push_back(next);
        ctx.push_back(next);
    }
    return generated;
}

// ------------------------------------------------------------------------------------------
// cached decoding through the runtime's layers

LayerDecoder::LayerDecoder(const ModelShape& shape, LayerOps& ops, const std::vector<float>& params)
    : shape_(shape), ops_(ops) {
    TS_CHECK(shape.family == ModelShape::Family::llama, "cached decoding covers the Llama family");
    const ParamTable& table = shape.param_table();
    TS_CHECK((int64_t)params.size() == table.total_numel(), "decoder: ", params.size(),
             " parameters, expected ", table.total_numel());
    Tensor host = Tensor::empty({table.total_numel()}, MemCategory::params);
    std::memcpy(host.data(), params.data(), sizeof(float) * params.size());
    params_ =
        ops.device() == Device::cpu ? std::move(host) : host.to(ops.device(), MemCategory::params);
    layers_ = layers_create_bound(ShardSpec{shape, TpGroup{}, Recompute::none, &ops, 1.0f},
                                  params_.f32(), nullptr);
}

LayerDecoder::~LayerDecoder() = default;

std::vector<float> LayerDecoder::feed(const std::vector<int32_t>& ids, int pos0, bool all_rows) {
    const int n = (int)ids.size(), V = vocab();
    TS_CHECK(n > 0 && pos0 >= 0 && pos0 + n <= max_len(), "decoder: positions ", pos0, "..",
             pos0 + n, " outside the context of ", max_len());
    Batch b;
    b.batch_size = 1, b.seq_len = n, b.inputs = ids;
    Tensor x = layers_.front()->forward(-1, Tensor(), b);
    const Layer::DecodeStep st{1, n, pos0, max_len(), all_rows};
    for (size_t i = 1; i < layers_.size(); ++i) x = layers_[i]->decode(std::move(x), st);
    const int rows = all_rows ? n : 1, Vp = (int)(x.numel() / rows);
    std::vector<float> padded = ops_.read_f32(x.data(), x.numel()), logits((size_t)rows * V);
    for (int r = 0; r < rows; ++r)
        std::copy(padded.begin() + (int64_t)r * Vp, padded.begin() + (int64_t)r * Vp + V,
                  logits.begin() + (int64_t)r * V);
    return logits;
}

std::vector<int> sample_tokens(LayerDecoder& d, const std::vector<int>& prompt,
                               const SampleOptions& o) {
    std::vector<int32_t> ctx(prompt.begin(), prompt.end());
    if (ctx.empty()) ctx.push_back(o.stop_token >= 0 ? o.stop_token : 0);
    if ((int)ctx.size() > d.max_len()) ctx.erase(ctx.begin(), ctx.end() - d.max_len());
    std::vector<int> generated;
    std::vector<float> logits = d.feed(ctx, 0);
    int pos = (int)ctx.size();
    for (int i = 0; i < o.max_new_tokens; ++i) {
        const int next = pick_token(logits.data(), d.vocab(), o, i);
        if (next == o.stop_token) break;
        generated.push_back(next);
        if (pos >= d.max_len()) break;  // the cache is full
        logits = d.feed({next}, pos++);
    }
    return generated;
}

}  // namespace tessera
