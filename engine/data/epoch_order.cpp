// A permutation without a table: a balanced Feistel network over 2b bits (4^b >= n) is a
// bijection of [0, 4^b); walking it from a position in [0, n) until the value falls back into
// [0, n) restricts it to a bijection of [0, n) (the walk stays on the position's own cycle). At
// most 4^b < 4n, so the walk takes under 4 rounds of the network on average.
#include "engine/data/epoch_order.h"

#include "engine/core/error.h"

namespace tessera {

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

constexpr int kRounds = 6;
constexpr uint64_t kEpochSalt = 0x45504F43484F5244ull;  // "EPOCHORD": apart from the random stream

}  // namespace

int64_t epoch_order_permute(uint64_t seed, int64_t epoch, int64_t position, int64_t n_items) {
    TS_CHECK(n_items > 0 && position >= 0 && position < n_items && epoch >= 0,
             "epoch_order_permute: position outside [0, n_items)");
    if (n_items == 1) return 0;
    int half = 1;  // bits per half: 4^half >= n_items
    while (half < 31 && (int64_t{1} << (2 * half)) < n_items) ++half;
    const uint64_t mask = (uint64_t{1} << half) - 1;
    uint64_t keys[kRounds];
    const uint64_t key = mix64(mix64(seed ^ kEpochSalt) ^ (uint64_t)epoch);
    for (int r = 0; r < kRounds; ++r) keys[r] = mix64(key + (uint64_t)r);
    uint64_t x = (uint64_t)position;
    do {
        uint64_t left = x >> half, right = x & mask;
        for (int r = 0; r < kRounds; ++r) {
            uint64_t next = left ^ (mix64(right ^ keys[r]) & mask);
            left = right;
            right = next;
        }
        x = (left << half) | right;
    } while (x >= (uint64_t)n_items);
    return (int64_t)x;
}

int64_t epoch_order_item(uint64_t seed, int64_t step, int64_t sample, int64_t global_batch,
                         int64_t n_items) {
    TS_CHECK(step >= 0 && sample >= 0 && sample < global_batch && n_items > 0,
             "epoch_order_item: sample outside [0, global_batch) or an empty set");
    const int64_t g = step * global_batch + sample;  // the run's global sample index
    return epoch_order_permute(seed, g / n_items, g % n_items, n_items);
}

double epoch_order_epochs(int64_t steps_done, int64_t global_batch, int64_t n_items) {
    if (n_items <= 0) return 0.0;
    return (double)(steps_done * global_batch) / (double)n_items;
}

}  // namespace tessera
