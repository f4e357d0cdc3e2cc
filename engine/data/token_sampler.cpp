// Counter-based window sampling: start = uniform(hash(seed, step, sample)). No state, no RNG
// stream, so the result cannot depend on how the samples of a step are divided up.
#include "engine/data/token_sampler.h"

#include "engine/core/error.h"

namespace tessera {

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

int64_t token_sampler_start(uint64_t seed, int64_t step, int64_t sample, int64_t n_tokens, int seq_len) {
    uint64_t h = splitmix64(seed);
    h = splitmix64(h ^ (uint64_t)step);
    h = splitmix64(h ^ (uint64_t)sample);
    uint64_t range = (uint64_t)(n_tokens - seq_len);  // starts 0 .. n_tokens - seq_len - 1
    return (int64_t)(((unsigned __int128)h * range) >> 64);  // multiply-shift: no modulo bias
}

void sample_token_batch(const std::vector<uint32_t>& tokens, uint64_t seed, int64_t step,
                        int64_t first_sample, int n_samples, int seq_len, int32_t* inputs,
                        int32_t* targets) {
    if (seq_len < 1) throw InputError(str_cat("token sampler: seq_len must be >= 1, found ", seq_len));
    if (n_samples < 0 || first_sample < 0)
        throw InputError(str_cat("token sampler: expected n_samples >= 0 and first_sample >= 0, found ",
                                 n_samples, " and ", first_sample));
    int64_t n = (int64_t)tokens.size();
    if (n < (int64_t)seq_len + 1)
        throw InputError(str_cat("token shard too short: ", n, " tokens, expected at least seq_len + 1 = ",
                                 seq_len + 1));
    for (int r = 0; r < n_samples; r++) {
        int64_t start = token_sampler_start(seed, step, first_sample + r, n, seq_len);
        const uint32_t* src = tokens.data() + start;
        int32_t* in = inputs + (int64_t)r * seq_len;
        int32_t* tg = targets + (int64_t)r * seq_len;
        for (int t = 0; t < seq_len; t++) {
            in[t] = src[t];
            tg[t] = src[t + 1];
        }
    }
}

}  // namespace tessera
