// Deterministic batches for GPT training, in two orders (data.order). random: sample i of step s
// starts at a position that depends ONLY on (seed, s, i) — i is the global sample index within
// the step. epoch: the shard is cut into fixed windows read once per epoch in a shuffled order
// (engine/data/epoch_order.h), again a function of (seed, s, i) only. Either way any split of a
// step's samples over ranks, micro-batches or calls yields the same windows. See docs/data.md.
#pragma once
#include <cstdint>

#include "engine/data/shard.h"

namespace tessera {

// The window start for one sample, uniform in [0, n_tokens - seq_len - 1].
int64_t token_sampler_start(uint64_t seed, int64_t step, int64_t sample, int64_t n_tokens,
                            int seq_len);

// inputs, targets are (n_samples, seq_len) int32; row r is global sample first_sample + r;
// targets[r][t] = inputs[r][t+1] within the window. InputError if tokens.size < seq_len + 1.
void sample_token_batch(TokenView tokens, uint64_t seed, int64_t step, int64_t first_sample,
                        int n_samples, int seq_len, int32_t* inputs, int32_t* targets);

// epoch order: the number of fixed windows in a shard, (n_tokens - 1) / seq_len; window w is
// tokens [w * seq_len, w * seq_len + seq_len + 1). 0 when the shard is shorter than seq_len + 1.
int64_t token_window_count(int64_t n_tokens, int seq_len);

// epoch order: as sample_token_batch, row r reading window
// epoch_order_item(seed, step, first_sample + r, global_batch, token_window_count(...)).
// global_batch is the step's sample count over all ranks and micro-batches. InputError if
// tokens.size < seq_len + 1 (the same message as sample_token_batch).
void epoch_token_batch(TokenView tokens, uint64_t seed, int64_t step, int64_t first_sample,
                       int n_samples, int64_t global_batch, int seq_len, int32_t* inputs,
                       int32_t* targets);

}  // namespace tessera
