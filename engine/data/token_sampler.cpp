// Counter-based window sampling: start = uniform(hash(seed, step, sample)) in random order, or
// the window the epoch permutation puts at the sample's global index in epoch order. No state, no
// RNG stream, so the result cannot depend on how the samples of a step are divided up.
#include "engine/data/token_sampler.h"

#include "engine/core/error.h"
#include "engine/data/epoch_order.h"

namespace tessera {

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

int64_t token_sampler_start(uint64_t seed, int64_t step, int64_t sample, int64_t n_tokens,
                            int seq_len) {
    uint64_t h = splitmix64(seed);
    h = splitmix64(h ^ (uint64_t)step);
    h = splitmix64(h ^ (uint64_t)sample);
    uint64_t range = (uint64_t)(n_tokens - seq_len);         // starts 0 .. n_tokens - seq_len - 1
    return (int64_t)(((unsigned __int128)h * range) >> 64);  // multiply-shift: no modulo bias
}

namespace {

// The checks both orders share: the same InputError for the same bad input.
void check_batch_args(int64_t n_tokens, int64_t first_sample, int n_samples, int seq_len) {
    if (seq_len < 1)
        throw InputError(str_cat("token sampler: seq_len must be >= 1, found ", seq_len));
    if (n_samples < 0 || first_sample < 0)
        throw InputError(
            str_cat("token sampler: expected n_samples >= 0 and first_sample >= 0, found ",
                    n_samples, " and ", first_sample));
    if (n_tokens < (int64_t)seq_len + 1)
        throw InputError(str_cat("token shard too short: ", n_tokens,
                                 " tokens, expected at least seq_len + 1 = ", seq_len + 1));
}

// Row r of (inputs, targets), each (seq_len): the window of seq_len + 1 tokens at `start`.
template <typename T>
void copy_window(const T* src, int seq_len, int32_t* in, int32_t* tg) {
    for (int t = 0; t < seq_len; t++) {
        in[t] = (int32_t)src[t];
        tg[t] = (int32_t)src[t + 1];
    }
}
void copy_window(TokenView tokens, int64_t start, int seq_len, int64_t r, int32_t* inputs,
                 int32_t* targets) {
    int32_t* in = inputs + r * seq_len;
    int32_t* tg = targets + r * seq_len;
    if (tokens.width == 2)
        copy_window(static_cast<const uint16_t*>(tokens.data) + start, seq_len, in, tg);
    else
        copy_window(static_cast<const uint32_t*>(tokens.data) + start, seq_len, in, tg);
}

}  // namespace

void sample_token_batch(TokenView tokens, uint64_t seed, int64_t step, int64_t first_sample,
                        int n_samples, int seq_len, int32_t* inputs, int32_t* targets) {
    const int64_t n = tokens.size;
    check_batch_args(n, first_sample, n_samples, seq_len);
    for (int r = 0; r < n_samples; r++)
        copy_window(tokens, token_sampler_start(seed, step, first_sample + r, n, seq_len), seq_len,
                    r, inputs, targets);
}

int64_t token_window_count(int64_t n_tokens, int seq_len) {
    if (seq_len < 1 || n_tokens < (int64_t)seq_len + 1) return 0;
    return (n_tokens - 1) / seq_len;
}

void epoch_token_batch(TokenView tokens, uint64_t seed, int64_t step, int64_t first_sample,
                       int n_samples, int64_t global_batch, int seq_len, int32_t* inputs,
                       int32_t* targets) {
    check_batch_args(tokens.size, first_sample, n_samples, seq_len);
    const int64_t windows = token_window_count(tokens.size, seq_len);
    for (int r = 0; r < n_samples; r++) {
        int64_t w = epoch_order_item(seed, step, first_sample + r, global_batch, windows);
        copy_window(tokens, w * seq_len, seq_len, r, inputs, targets);
    }
}

}  // namespace tessera
