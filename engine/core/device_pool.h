// How a GPU's bytes are placed: a caching allocator over segments reserved from the device. It is
// the one placement rule of both the runtime (engine/core/tensor.cpp, over segments the CUDA
// backend reserves with cudaMalloc) and the estimator (the meta device, over address ranges that
// hold nothing), so what the device holds — the segments, the pool's slack included — is
// predicted by running the same rule over the same allocations. The slack (reserved, not
// requested) is the memory category `cached`.
//
// The rule (after PyTorch's CUDA caching allocator): requests round up to 512 bytes; up to 1 MiB
// they come from 2 MiB segments, below 10 MiB from 20 MiB ones, larger ones from a segment of
// their size rounded up to 2 MiB. A request takes the smallest free block that fits (ties: the
// lowest address), split when the rest is worth keeping (small: >= 512 bytes; large: > 1 MiB);
// a freed block merges with free neighbours in its segment. When nothing fits a segment is
// reserved; when the device refuses, every wholly free segment is released and the reserve tried
// once more. Thread-safe. Memory is free for reuse as soon as free() returns: on a GPU every
// allocation and free is ordered on the one compute stream, as cudaFreeAsync's were.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory_resource>
#include <mutex>
#include <set>

namespace tessera {

class DevicePool {
  public:
    // reserve: a segment of `bytes` (its address, 0 when the device refuses); release: gives
    // one back. Plain function pointers plus a context, so the backing needs no captures.
    struct Backing {
        uintptr_t (*reserve)(void* ctx, size_t bytes) = nullptr;
        void (*release)(void* ctx, uintptr_t base, size_t bytes) = nullptr;
        void* ctx = nullptr;
    };
    explicit DevicePool(Backing b);
    ~DevicePool();  // releases every segment
    DevicePool(const DevicePool&) = delete;
    DevicePool& operator=(const DevicePool&) = delete;

    // Places a request of `bytes` (0 allowed); returns its address, 0 when the device has no
    // room. *cached_delta receives the change of cached_bytes() (negative: a cached block reused).
    uintptr_t alloc(size_t bytes, int64_t* cached_delta);
    // Frees what alloc returned; *cached_delta as above.
    void free(uintptr_t p, int64_t* cached_delta);
    // Releases every wholly free segment; returns the bytes released.
    int64_t release_cached();

    int64_t reserved_bytes() const;   // in segments
    int64_t requested_bytes() const;  // the live requests, unrounded
    int64_t cached_bytes() const { return reserved_bytes() - requested_bytes(); }
    int64_t reserved_peak_bytes() const;

    static constexpr size_t kRound = 512;
    static constexpr size_t kSmallRequest = size_t(1) << 20;  // <= this: the small pool
    static constexpr size_t kSmallSegment = size_t(2) << 20;
    static constexpr size_t kMidRequest = size_t(10) << 20;  // < this: a 20 MiB segment
    static constexpr size_t kMidSegment = size_t(20) << 20;
    static constexpr size_t kLargeRound = size_t(2) << 20;
    static size_t round_request(size_t bytes);  // the block size a request takes, unsplit
    static size_t segment_for(size_t rounded);  // the segment a request reserves when none fits

  private:
    struct Block {
        uintptr_t addr = 0;
        size_t size = 0;
        size_t requested = 0;  // while in use
        bool free = true;
        bool small = false;
        Block* prev = nullptr;  // neighbours in the segment
        Block* next = nullptr;
    };
    struct BySizeThenAddr {
        bool operator()(const Block* a, const Block* b) const {
            return a->size != b->size ? a->size < b->size : a->addr < b->addr;
        }
    };
    using FreeSet = std::pmr::set<Block*, BySizeThenAddr>;

    FreeSet& pool_of(bool small) { return small ? small_free_ : large_free_; }
    Block* find_free(size_t size, bool small);
    Block* reserve_segment(size_t size, bool small);
    int64_t release_cached_locked();

    Backing backing_;
    mutable std::mutex mu_;
    // The containers' nodes come from a pool of their own: a split, a merge or a request costs no
    // malloc once the pool has grown (the estimator places millions of meta tensors per search).
    std::pmr::unsynchronized_pool_resource nodes_;
    FreeSet small_free_{&nodes_}, large_free_{&nodes_};
    std::pmr::map<uintptr_t, Block> blocks_{&nodes_};     // every block, by address
    std::pmr::map<uintptr_t, size_t> segments_{&nodes_};  // base -> bytes
    int64_t reserved_ = 0, requested_ = 0, reserved_peak_ = 0;
};

}  // namespace tessera
