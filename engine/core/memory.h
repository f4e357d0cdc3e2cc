// Per-process memory accounting by category, with peaks. Every buffer the engine allocates for
// training is charged to one category; the studio charts these and the estimator predicts them.
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>

namespace tessera {

// context, libraries: what a GPU process holds outside the allocator (the CUDA context; cuBLASLt,
// kernel modules, scratch), measured on the device once per library version and carried as data
// (engine/plan: DeviceSpec), so that the device total is what the driver reports.
// cached: a GPU's pool slack, bytes its DevicePool holds in segments but no tensor uses
// (engine/core/device_pool.h; the estimator runs the same pool). Its peak is its value when the
// device total peaked, not its own largest value (reached when a step's activations go back to
// the pool): the slack inside the device's peak, so that a peak's categories add up to it.
// host: offloaded activations and optimizer states (pinned host memory on GPUs; on CPU ranks the
// same bytes, accounted apart so the offload mechanics are visible).
enum class MemCategory : int {
    params,
    grads,
    optimizer,
    activations,
    workspace,
    comm,
    context,
    libraries,
    cached,
    host,
    count
};
inline constexpr int kMemCategoryCount = static_cast<int>(MemCategory::count);

std::string_view mem_category_name(MemCategory c);  // "params", "grads", ...

class MemoryTracker {
  public:
    void add(MemCategory c, int64_t bytes);
    void sub(MemCategory c, int64_t bytes);
    int64_t current_bytes(MemCategory c) const { return current_[idx(c)].load(); }
    int64_t peak_bytes(MemCategory c) const { return peak_[idx(c)].load(); }
    int64_t total_current_bytes() const { return total_.load(); }
    int64_t total_peak_bytes() const { return total_peak_.load(); }
    // Peak of everything but the host category: what the device (GPU, or the CPU rank's own
    // memory before offload) held at once.
    int64_t device_peak_bytes() const { return device_peak_.load(); }
    // Each category's bytes at the moment of that peak: they add up to it (host: 0). A category
    // can peak on its own elsewhere in the step (a one-GPU plan's gradients, after the
    // activations they replace are gone), so the categories' own peaks need not.
    int64_t at_device_peak_bytes(MemCategory c) const { return at_device_peak_[idx(c)].load(); }
    void reset_peaks();  // peaks := current values

  private:
    static int idx(MemCategory c) { return static_cast<int>(c); }
    void snapshot_at_device_peak();  // at_device_peak_ := the current values, host aside
    std::mutex device_peak_mu_;      // a new device peak and the slack within it, together
    std::array<std::atomic<int64_t>, kMemCategoryCount> current_{};
    std::array<std::atomic<int64_t>, kMemCategoryCount> peak_{};
    std::array<std::atomic<int64_t>, kMemCategoryCount> at_device_peak_{};
    std::atomic<int64_t> total_{0}, total_peak_{0}, device_peak_{0};
};

// The tracker of this process (one rank per process).
MemoryTracker& memory_tracker();

}  // namespace tessera
