// Deterministic batches for GPT training. Sample i of step s starts at a position that depends
// ONLY on (seed, s, i) — i is the global sample index within the step — so any split of a step's
// samples over ranks, micro-batches or calls yields the same windows. See docs/data.md.
#pragma once
#include <cstdint>
#include <vector>

namespace tessera {

// The window start for one sample, uniform in [0, n_tokens - seq_len - 1].
int64_t token_sampler_start(uint64_t seed, int64_t step, int64_t sample, int64_t n_tokens, int seq_len);

// inputs, targets are (n_samples, seq_len) int32; row r is global sample first_sample + r;
// targets[r][t] = inputs[r][t+1] within the window. InputError if tokens.size() < seq_len + 1.
void sample_token_batch(const std::vector<uint32_t>& tokens, uint64_t seed, int64_t step,
                        int64_t first_sample, int n_samples, int seq_len, int32_t* inputs,
                        int32_t* targets);

}  // namespace tessera
