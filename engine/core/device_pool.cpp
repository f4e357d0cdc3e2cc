#include "engine/core/device_pool.h"

#include "engine/core/error.h"

namespace tessera {

DevicePool::DevicePool(Backing b) : backing_(b) {
    TS_CHECK(backing_.reserve && backing_.release, "DevicePool needs a reserve and a release");
}

DevicePool::~DevicePool() {
    for (const auto& [base, bytes] : segments_) backing_.release(backing_.ctx, base, bytes);
}

size_t DevicePool::round_request(size_t bytes) {
    return bytes < kRound ? kRound : (bytes + kRound - 1) / kRound * kRound;
}

size_t DevicePool::segment_for(size_t rounded) {
    if (rounded <= kSmallRequest) return kSmallSegment;
    if (rounded < kMidRequest) return kMidSegment;
    return (rounded + kLargeRound - 1) / kLargeRound * kLargeRound;
}

DevicePool::Block* DevicePool::find_free(size_t size, bool small) {
    FreeSet& pool = pool_of(small);
    Block key;
    key.size = size;
    key.addr = 0;
    auto it = pool.lower_bound(&key);
    if (it == pool.end()) return nullptr;
    Block* b = *it;
    pool.erase(it);
    return b;
}

DevicePool::Block* DevicePool::reserve_segment(size_t size, bool small) {
    const size_t seg = segment_for(size);
    uintptr_t base = backing_.reserve(backing_.ctx, seg);
    if (!base) {
        release_cached_locked();
        base = backing_.reserve(backing_.ctx, seg);
        if (!base) return nullptr;
    }
    segments_[base] = seg;
    reserved_ += (int64_t)seg;
    reserved_peak_ = std::max(reserved_peak_, reserved_);
    Block* b = &blocks_.try_emplace(base).first->second;
    b->addr = base;
    b->size = seg;
    b->small = small;
    return b;
}

uintptr_t DevicePool::alloc(size_t bytes, int64_t* cached_delta) {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t cached0 = reserved_ - requested_;
    const size_t size = round_request(bytes);
    const bool small = size <= kSmallRequest;
    Block* b = find_free(size, small);
    if (!b) b = reserve_segment(size, small);
    if (!b) {
        *cached_delta = (reserved_ - requested_) - cached0;  // cached segments may have gone
        return 0;
    }
    const size_t rest = b->size - size;
    if (small ? rest >= kRound : rest > kSmallRequest) {
        Block* tail = &blocks_.try_emplace(b->addr + size).first->second;
        tail->addr = b->addr + size;
        tail->size = rest;
        tail->small = small;
        tail->prev = b;
        tail->next = b->next;
        if (b->next) b->next->prev = tail;
        b->next = tail;
        b->size = size;
        pool_of(small).insert(tail);
    }
    b->free = false;
    b->requested = bytes;
    requested_ += (int64_t)bytes;
    *cached_delta = (reserved_ - requested_) - cached0;
    return b->addr;
}

void DevicePool::free(uintptr_t p, int64_t* cached_delta) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(p);
    TS_CHECK(it != blocks_.end() && !it->second.free,
             "DevicePool::free of an address it did not allocate");
    Block* b = &it->second;
    requested_ -= (int64_t)b->requested;
    *cached_delta = (int64_t)b->requested;
    b->requested = 0;
    b->free = true;
    FreeSet& pool = pool_of(b->small);
    // merge with the free neighbours of its segment
    for (Block* n : {b->next, b->prev}) {
        if (!n || !n->free) continue;
        pool.erase(n);
        Block* lo = n == b->next ? b : n;
        Block* hi = n == b->next ? n : b;
        lo->size += hi->size;
        lo->next = hi->next;
        if (hi->next) hi->next->prev = lo;
        const uintptr_t gone = hi->addr;
        blocks_.erase(gone);  // hi is gone
        b = lo;
    }
    pool.insert(b);
}

int64_t DevicePool::release_cached_locked() {
    int64_t released = 0;
    for (auto it = segments_.begin(); it != segments_.end();) {
        auto blk = blocks_.find(it->first);
        Block* b = &blk->second;
        if (b->free && b->size == it->second) {  // the whole segment is one free block
            pool_of(b->small).erase(b);
            backing_.release(backing_.ctx, it->first, it->second);
            reserved_ -= (int64_t)it->second;
            released += (int64_t)it->second;
            blocks_.erase(blk);
            it = segments_.erase(it);
        } else {
            ++it;
        }
    }
    return released;
}

int64_t DevicePool::release_cached() {
    std::lock_guard<std::mutex> lock(mu_);
    return release_cached_locked();
}

int64_t DevicePool::reserved_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reserved_;
}
int64_t DevicePool::requested_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requested_;
}
int64_t DevicePool::reserved_peak_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reserved_peak_;
}

}  // namespace tessera
