#include "engine/train/sampler.h"

#include <algorithm>
#include <cmath>

#include "engine/model/params.h"

namespace tessera {

std::vector<int> sample_tokens(GptModel& model, const std::vector<int>& prompt,
                               const SampleOptions& o) {
    const int V = model.dims().vocab, T = model.dims().seq_len;
    std::vector<int32_t> ctx(prompt.begin(), prompt.end());
    if (ctx.empty()) ctx.push_back(o.stop_token >= 0 ? o.stop_token : 0);
    std::vector<int> generated;
    std::vector<std::pair<float, int>> cand(V);
    for (int i = 0; i < o.max_new_tokens; ++i) {
        int n = std::min<int>((int)ctx.size(), T);
        const float* logits = model.forward_logits(ctx.data() + ctx.size() - n, 1, n);
        const float* last = logits + (int64_t)(n - 1) * V;
        int next = 0;
        if (o.temperature <= 0) {
            next = (int)(std::max_element(last, last + V) - last);
        } else {
            for (int v = 0; v < V; ++v) cand[v] = {last[v] / (float)o.temperature, v};
            int k = (o.top_k > 0 && o.top_k < V) ? o.top_k : V;
            std::partial_sort(cand.begin(), cand.begin() + k, cand.end(),
                              [](auto& a, auto& b) { return a.first > b.first; });
            double maxv = cand[0].first, sum = 0;
            std::vector<double> p(k);
            for (int j = 0; j < k; ++j) sum += p[j] = std::exp(cand[j].first - maxv);
            // a uniform number from (seed, position): reproducible for a given seed
            double u = (splitmix64(o.seed * 0x9E3779B97F4A7C15ull + i) >> 11) *
                       (1.0 / 9007199254740992.0) * sum;
            int j = 0;
            for (double acc = p[0]; acc < u && j + 1 < k; acc += p[++j]) {
            }
            next = cand[j].second;
        }
        if (next == o.stop_token) break;
        generated.push_back(next);
        ctx.push_back(next);
    }
    return generated;
}

}  // namespace tessera
