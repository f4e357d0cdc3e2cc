#include "engine/core/memory.h"

namespace tessera {

std::string_view mem_category_name(MemCategory c) {
    switch (c) {
        case MemCategory::params:
            return "params";
        case MemCategory::grads:
            return "grads";
        case MemCategory::optimizer:
            return "optimizer";
        case MemCategory::activations:
            return "activations";
        case MemCategory::workspace:
            return "workspace";
        case MemCategory::comm:
            return "comm";
        case MemCategory::context:
            return "context";
        case MemCategory::libraries:
            return "libraries";
        case MemCategory::cached:
            return "cached";
        case MemCategory::host:
            return "host";
        default:
            return "unknown";
    }
}

static void atomic_max(std::atomic<int64_t>& a, int64_t v) {
    int64_t cur = a.load();
    while (v > cur && !a.compare_exchange_weak(cur, v)) {
    }
}

void MemoryTracker::add(MemCategory c, int64_t bytes) {
    int64_t now = current_[idx(c)].fetch_add(bytes) + bytes;
    if (c != MemCategory::cached) atomic_max(peak_[idx(c)], now);
    int64_t tot = total_.fetch_add(bytes) + bytes;
    atomic_max(total_peak_, tot);
    if (c == MemCategory::host) return;
    const int64_t device = tot - current_[idx(MemCategory::host)].load();
    if (device > device_peak_.load()) {  // rare: a new peak
        std::lock_guard<std::mutex> lock(device_peak_mu_);
        if (device > device_peak_.load()) {
            device_peak_ = device;
            peak_[idx(MemCategory::cached)] = current_[idx(MemCategory::cached)].load();
            snapshot_at_device_peak();
        }
    }
}

void MemoryTracker::sub(MemCategory c, int64_t bytes) {
    current_[idx(c)].fetch_sub(bytes);
    total_.fetch_sub(bytes);
}

void MemoryTracker::snapshot_at_device_peak() {
    for (int i = 0; i < kMemCategoryCount; ++i)
        at_device_peak_[i] = i == idx(MemCategory::host) ? 0 : current_[i].load();
}

void MemoryTracker::reset_peaks() {
    for (int i = 0; i < kMemCategoryCount; ++i) peak_[i] = current_[i].load();
    snapshot_at_device_peak();
    total_peak_ = total_.load();
    device_peak_ = total_.load() - current_[idx(MemCategory::host)].load();
}

MemoryTracker& memory_tracker() {
    static MemoryTracker tracker;
    return tracker;
}

}  // namespace tessera
