// DevicePool (engine/core/device_pool.h): the placement rule the runtime's GPU tensors and the
// estimator's meta tensors share; and its slack in MemoryTracker (engine/core/memory.h). Segment
// sizes by request, best fit, splitting, merging, release of wholly free segments, the device
// refusing, and the slack (`cached`) it reports.
#include "engine/core/device_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "engine/core/memory.h"

using tessera::DevicePool;

namespace {

constexpr size_t MiB = size_t(1) << 20;

// A device of `limit` bytes handing out address ranges that hold nothing.
struct FakeDevice {
    size_t limit = SIZE_MAX, held = 0;
    uintptr_t next = uintptr_t(1) << 40;
    std::map<uintptr_t, size_t> segments;
    int reserves = 0, releases = 0;
    DevicePool::Backing backing() {
        DevicePool::Backing b;
        b.ctx = this;
        b.reserve = [](void* c, size_t bytes) -> uintptr_t {
            auto* d = static_cast<FakeDevice*>(c);
            if (d->held + bytes > d->limit) return 0;
            d->held += bytes;
            ++d->reserves;
            const uintptr_t at = d->next;
            d->next += bytes + 4096;  // segments are not adjacent: blocks must not merge across
            d->segments[at] = bytes;
            return at;
        };
        b.release = [](void* c, uintptr_t base, size_t bytes) {
            auto* d = static_cast<FakeDevice*>(c);
            EXPECT_EQ(d->segments.at(base), bytes);
            d->segments.erase(base);
            d->held -= bytes;
            ++d->releases;
        };
        return b;
    }
};

struct Pool {
    FakeDevice dev;
    DevicePool pool{dev.backing()};
    int64_t cached = 0;  // the sum of the reported deltas
    uintptr_t alloc(size_t bytes) {
        int64_t d = 0;
        uintptr_t p = pool.alloc(bytes, &d);
        cached += d;
        return p;
    }
    void free(uintptr_t p) {
        int64_t d = 0;
        pool.free(p, &d);
        cached += d;
    }
};

}  // namespace

TEST(DevicePool, ARequestReservesTheSegmentItsSizeCallsFor) {
    Pool p;
    p.alloc(100);  // small: a 2 MiB segment
    EXPECT_EQ(p.pool.reserved_bytes(), int64_t(2 * MiB));
    p.alloc(5 * MiB);  // mid-sized: a 20 MiB segment
    EXPECT_EQ(p.pool.reserved_bytes(), int64_t(22 * MiB));
    p.alloc(30 * MiB + 1);  // large: its size rounded up to 2 MiB
    EXPECT_EQ(p.pool.reserved_bytes(), int64_t(22 * MiB + 32 * MiB));
    EXPECT_EQ(p.dev.reserves, 3);
    EXPECT_EQ(p.pool.requested_bytes(), int64_t(100 + 5 * MiB + 30 * MiB + 1));
    EXPECT_EQ(p.pool.cached_bytes(), p.cached);
    EXPECT_EQ(p.pool.cached_bytes(), p.pool.reserved_bytes() - p.pool.requested_bytes());
}

TEST(DevicePool, AFreedBlockIsReusedWithoutAnotherSegment) {
    Pool p;
    const uintptr_t a = p.alloc(64 * MiB);
    p.free(a);
    EXPECT_EQ(p.cached, int64_t(64 * MiB));  // the whole segment is slack now
    const uintptr_t b = p.alloc(64 * MiB);
    EXPECT_EQ(b, a);
    EXPECT_EQ(p.dev.reserves, 1);
    EXPECT_EQ(p.cached, 0);
}

TEST(DevicePool, ARequestTakesTheSmallestFreeBlockThatFits) {
    Pool p;
    // three large segments, freed: 40, 24 and 32 MiB
    const uintptr_t a = p.alloc(40 * MiB), b = p.alloc(24 * MiB), c = p.alloc(32 * MiB);
    p.free(a), p.free(b), p.free(c);
    EXPECT_EQ(p.alloc(23 * MiB), b);  // 24 fits best; its 1 MiB rest is not split off
    EXPECT_EQ(p.alloc(30 * MiB), c);  // 32 fits best now
    EXPECT_EQ(p.dev.reserves, 3);
}

TEST(DevicePool, BlocksSplitAndFreedNeighboursMergeIntoTheirSegment) {
    Pool p;
    // small requests share one 2 MiB segment, placed from its start
    const uintptr_t a = p.alloc(1000), b = p.alloc(512), c = p.alloc(4096);
    EXPECT_EQ(b, a + 1024);  // 1000 rounds up to 1024
    EXPECT_EQ(c, b + 512);
    EXPECT_EQ(p.dev.reserves, 1);
    p.free(b);
    EXPECT_EQ(p.alloc(300), b);  // the 512-byte hole is the best fit
    p.free(b), p.free(a), p.free(c);
    // one free block again: the whole segment goes back
    EXPECT_EQ(p.pool.release_cached(), int64_t(2 * MiB));
    EXPECT_EQ(p.dev.releases, 1);
    EXPECT_EQ(p.pool.reserved_bytes(), 0);
    // a large block's rest is split off only when over 1 MiB
    const uintptr_t d = p.alloc(12 * MiB);  // a 12 MiB segment (>= 10 MiB: rounded to 2 MiB)
    p.free(d);
    const uintptr_t e = p.alloc(10 * MiB + 512);  // rest 2 MiB - 512: split
    const uintptr_t f = p.alloc(1536 * 1024);     // 1.5 MiB: large pool, fits the rest
    EXPECT_EQ(e, d);
    EXPECT_EQ(f, d + 10 * MiB + 512);
    EXPECT_EQ(p.dev.reserves, 2);
}

TEST(DevicePool, WhenTheDeviceRefusesCachedSegmentsGoBackAndTheReserveIsRetried) {
    Pool p;
    p.dev.limit = 100 * MiB;
    const uintptr_t a = p.alloc(60 * MiB);
    const uintptr_t small = p.alloc(4096);  // keeps its 2 MiB segment in use
    p.free(a);
    // 70 MiB does not fit the 60 MiB block nor the device beside it: the cached segment goes
    const uintptr_t b = p.alloc(70 * MiB);
    ASSERT_NE(b, 0u);
    EXPECT_EQ(p.dev.releases, 1);
    EXPECT_EQ(p.pool.reserved_bytes(), int64_t(72 * MiB));
    EXPECT_EQ(p.pool.cached_bytes(), p.cached);
    // nothing left to release: refused, the pool unchanged
    EXPECT_EQ(p.alloc(40 * MiB), 0u);
    EXPECT_EQ(p.pool.reserved_bytes(), int64_t(72 * MiB));
    EXPECT_EQ(p.pool.requested_bytes(), int64_t(70 * MiB + 4096));
    EXPECT_EQ(p.pool.cached_bytes(), p.cached);
    p.free(small);
    p.free(b);
}

// Random traffic: live blocks never overlap and lie inside the device's segments, the slack the
// deltas add up to is the pool's, and the same requests in the same order place the same way
// (what lets the estimator predict the runtime's segments).
TEST(DevicePool, RandomTrafficKeepsBlocksApartAndPlacesDeterministically) {
    auto run = [](Pool& p, uint32_t seed) {
        std::mt19937 rng(seed);
        std::map<uintptr_t, size_t> live;  // address -> requested bytes
        std::vector<uintptr_t> order;
        std::vector<uintptr_t> placed;
        for (int i = 0; i < 4000; ++i) {
            const bool do_free = !live.empty() && rng() % 5 < 2;
            if (do_free) {
                auto it = live.begin();
                std::advance(it, rng() % live.size());
                p.free(it->first);
                live.erase(it);
            } else {
                const int kind = (int)(rng() % 3);
                const size_t bytes = kind == 0   ? rng() % (512 * 1024)
                                     : kind == 1 ? MiB + rng() % (8 * MiB)
                                                 : 10 * MiB + rng() % (60 * MiB);
                const uintptr_t a = p.alloc(bytes);
                EXPECT_NE(a, 0u);
                EXPECT_EQ(a % DevicePool::kRound, 0u);
                // inside one segment
                auto seg = p.dev.segments.upper_bound(a);
                EXPECT_NE(seg, p.dev.segments.begin());
                --seg;
                EXPECT_LE(a + bytes, seg->first + seg->second);
                // apart from its neighbours
                auto next = live.lower_bound(a);
                if (next != live.end()) EXPECT_LE(a + bytes, next->first);
                if (next != live.begin()) {
                    auto prev = std::prev(next);
                    EXPECT_LE(prev->first + prev->second, a);
                }
                live[a] = bytes;
                placed.push_back(a - (uintptr_t(1) << 40));
            }
            EXPECT_EQ(p.pool.cached_bytes(), p.cached);
        }
        return placed;
    };
    Pool p1, p2;
    const auto a = run(p1, 7), b = run(p2, 7);
    EXPECT_EQ(a, b);
    EXPECT_EQ(p1.pool.reserved_bytes(), p2.pool.reserved_bytes());
    EXPECT_GE(p1.pool.reserved_peak_bytes(), p1.pool.reserved_bytes());
}

// The pool's slack as MemoryTracker reports it: `cached` peaks with the device, not on its own (it
// is largest when a step's activations have gone back to the pool), so a device peak's categories
// add up to it.
TEST(MemoryTracker, CachedPeaksWithTheDeviceSoAPeaksCategoriesAddUp) {
    using tessera::MemCategory;
    tessera::MemoryTracker mt;
    mt.add(MemCategory::params, 100);
    mt.add(MemCategory::cached, 40);       // a segment of 140, 100 of it in use
    mt.add(MemCategory::cached, -30);      // activations take 30 of the slack ...
    mt.add(MemCategory::activations, 30);  // ... and then a segment of 50 more
    mt.add(MemCategory::cached, 20);
    mt.add(MemCategory::activations, 30);
    EXPECT_EQ(mt.device_peak_bytes(), 190);
    mt.sub(MemCategory::activations, 60);  // the step ends: its activations are slack now
    mt.add(MemCategory::cached, 60);
    EXPECT_EQ(mt.current_bytes(MemCategory::cached), 90);
    EXPECT_EQ(mt.device_peak_bytes(), 190);
    EXPECT_EQ(mt.peak_bytes(MemCategory::cached), 30);  // at the peak, not its own largest 90
    EXPECT_EQ(mt.peak_bytes(MemCategory::params) + mt.peak_bytes(MemCategory::activations) +
                  mt.peak_bytes(MemCategory::cached),
              mt.device_peak_bytes());
}

// Each category at the moment of the device's peak, where the categories' own peaks come at
// different moments (a one-GPU plan's gradients take the place of the activations): those add
// up to the device's peak, the own peaks do not; host memory is never part of it.
TEST(MemoryTracker, CategoriesAtTheDevicesPeakAddUpToIt) {
    using tessera::MemCategory;
    tessera::MemoryTracker mt;
    mt.add(MemCategory::params, 100);
    mt.add(MemCategory::host, 500);
    mt.add(MemCategory::activations, 80);  // the forward's end: the device's peak, 180
    mt.sub(MemCategory::activations, 50);  // the backward frees activations ...
    mt.add(MemCategory::grads, 40);        // ... and the gradients take their place
    mt.sub(MemCategory::activations, 30);
    mt.add(MemCategory::grads, 20);
    EXPECT_EQ(mt.device_peak_bytes(), 180);
    EXPECT_EQ(mt.peak_bytes(MemCategory::grads), 60);
    EXPECT_EQ(mt.at_device_peak_bytes(MemCategory::params), 100);
    EXPECT_EQ(mt.at_device_peak_bytes(MemCategory::activations), 80);
    EXPECT_EQ(mt.at_device_peak_bytes(MemCategory::grads), 0);
    EXPECT_EQ(mt.at_device_peak_bytes(MemCategory::host), 0);
    mt.add(MemCategory::workspace, 150);  // a new peak: 100 + 60 + 150
    EXPECT_EQ(mt.device_peak_bytes(), 310);
    int64_t sum = 0;
    for (int c = 0; c < tessera::kMemCategoryCount; ++c)
        sum += mt.at_device_peak_bytes(MemCategory(c));
    EXPECT_EQ(sum, 310);
    EXPECT_EQ(mt.at_device_peak_bytes(MemCategory::grads), 60);
}
