// Epoch order (data.order: epoch): a training set of n items (token windows, images) is read once
// per epoch in a shuffled order, a different one each epoch. Global sample g of the run (g = step
// x global_batch + the sample's index within the step) is position g % n of epoch g / n, and the
// item there is a seeded permutation of the positions. Everything is a pure function of (seed,
// step, sample), so any split of a step over ranks or micro-batches, and a resume at any step,
// reads the same items. See docs/data.md "Reading order".
#pragma once
#include <cstdint>

namespace tessera {

// The item at `position` (0 .. n_items-1) of epoch `epoch`: a bijection of [0, n_items) chosen by
// (seed, epoch). O(1) time and memory: a keyed Feistel network on the next power of four, with
// cycle walking back into range.
int64_t epoch_order_permute(uint64_t seed, int64_t epoch, int64_t position, int64_t n_items);

// The item read by sample `sample` (0 .. global_batch-1) of step `step`.
int64_t epoch_order_item(uint64_t seed, int64_t step, int64_t sample, int64_t global_batch,
                         int64_t n_items);

// Epochs completed (fractional) after `steps_done` steps of `global_batch` samples each.
double epoch_order_epochs(int64_t steps_done, int64_t global_batch, int64_t n_items);

}  // namespace tessera
