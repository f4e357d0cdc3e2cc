// Tensor: an owning, 64-byte aligned host buffer with a shape, a dtype and a memory category.
// Kernels take raw pointers plus sizes (llm.c style); Tensor only owns and accounts memory.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/memory.h"

namespace tessera {

// Existing values keep their numbers; the rest mirror safetensors' dtypes for import.
enum class DType : int { f32, bf16, u16, i32, u8, f16, f64, i8, i16, i64, u32, u64, boolean };
int dtype_size(DType t);
const char* dtype_name(DType t);  // "F32", "BF16", ... (safetensors spelling)

using Shape = std::vector<int64_t>;

// Where a tensor's bytes live. CUDA memory is placed by core's DevicePool
// (engine/core/device_pool.h) in segments the CUDA backend reserves
// (engine/kernels/cuda/device.cu); core itself has no CUDA dependency. The meta device holds no
// bytes: see MetaMemory.
enum class Device : int { cpu, cuda, meta };

// The meta device: a tensor on it has a shape, a dtype and a category but no storage (its data
// pointer is a placeholder that must never be read); its bytes are reported to the MetaMemory
// installed on the creating thread instead of the process's MemoryTracker. The estimator runs
// the runtime's own layers on it to replay a rank's allocations (engine/plan/rank_sim.h).
// Offload copies between meta tensors are synchronous, or with async_copies queued like a copy
// engine's: such a copy is done once a compute has been issued after it (`computes`, advanced
// by the replay per layer), or once waited for.
// A meta tensor's bytes go through tensor_alloc and tensor_free, which place them as the device
// would (a GPU rank's replay runs them through a DevicePool of its own: the tensor's address is
// its place there); alloc and free count bytes the device holds outside its pool.
class MetaMemory {
  public:
    virtual ~MetaMemory() = default;
    virtual void alloc(MemCategory c, int64_t bytes) = 0;
    virtual void free(MemCategory c, int64_t bytes) = 0;
    // Returns the tensor's placeholder address (nullptr: any), which tensor_free receives.
    virtual void* tensor_alloc(MemCategory c, int64_t bytes) {
        alloc(c, bytes);
        return nullptr;
    }
    virtual void tensor_free(MemCategory c, int64_t bytes, void* /*addr*/) { free(c, bytes); }
    bool async_copies = false;
    int64_t computes = 0;
};
// Installs m for the calling thread (nullptr: none); returns the one it replaces.
MetaMemory* meta_memory_install(MetaMemory* m);
// Bytes the device holds outside its allocator (NCCL's symmetric windows), counted where memory
// goes on this thread: the installed MetaMemory's alloc or free (bytes < 0), or, with none, the
// process's MemoryTracker.
void memory_count_outside_pool(MemCategory c, int64_t bytes);

struct DeviceAllocator {
    // a segment of device memory for the pool (nullptr when the device has no room), and its
    // return; the device's free and total bytes, for the out-of-memory message
    void* (*reserve)(size_t bytes) = nullptr;
    void (*release)(void* p, size_t bytes) = nullptr;
    void (*mem_info)(size_t* free_bytes, size_t* total_bytes) = nullptr;
    void (*zero)(void* p, size_t bytes) = nullptr;
    void (*copy)(void* dst, const void* src, size_t bytes, bool dst_cuda, bool src_cuda) = nullptr;
    // Activation offload: pinned host memory (cached), and copies on a separate copy stream that
    // start after the work queued so far on the compute stream. copy_async returns an event.
    void* (*host_alloc)(size_t bytes) = nullptr;
    void (*host_free)(void* p, size_t bytes) = nullptr;
    void* (*copy_async)(void* dst, const void* src, size_t bytes, bool dst_cuda,
                        bool src_cuda) = nullptr;
    bool (*event_done)(void* ev) = nullptr;  // the copy finished
    void (*event_wait)(void* ev) = nullptr;  // the compute stream waits for it (no host wait)
    void (*event_sync)(void* ev) = nullptr;  // the host waits for it
    void (*event_free)(void* ev) = nullptr;
};
void device_register_cuda_allocator(const DeviceAllocator& a);
bool device_cuda_available();  // a CUDA allocator is registered
// The CUDA pool's segments that hold no tensor go back to the device (a run starts from an
// empty pool, as in a process of its own); returns the bytes released.
int64_t device_cuda_release_cached();
// Copies bytes between any two places (host or CUDA), through the registered allocator.
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
// An asynchronous copy between tensors of the same size (activation offload). With CUDA on
// either side: queued on the copy stream after the compute stream's work so far; returns an
// event that both tensors must outlive. Host to host: copied now, returns nullptr.
class Tensor;
void* device_copy_async(Tensor& dst, const Tensor& src);
// The same between raw ranges (host memory pinned for a truly asynchronous copy).
void* device_copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
bool device_event_done(void* ev);  // nullptr counts as done
void device_event_wait(void* ev);  // later compute-stream work waits for the copy
void device_event_sync(void* ev);  // this thread waits for the copy
void device_event_free(void* ev);
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "(2, 3)"

class Tensor {
  public:
    Tensor() = default;
    static Tensor empty(Shape shape, MemCategory cat, DType dtype = DType::f32,
                        Device device = Device::cpu);
    static Tensor zeros(Shape shape, MemCategory cat, DType dtype = DType::f32,
                        Device device = Device::cpu);
    ~Tensor();
    Tensor(Tensor&& o) noexcept;
    Tensor& operator=(Tensor&& o) noexcept;
    Tensor(const Tensor&) = delete;
    Tensor& operator=(const Tensor&) = delete;

    float* f32() { return static_cast<float*>(data_); }
    const float* f32() const { return static_cast<const float*>(data_); }
    void* data() { return data_; }
    const void* data() const { return data_; }
    const Shape& shape() const { return shape_; }
    int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
    int64_t numel() const { return numel_; }
    int64_t nbytes() const { return numel_ * dtype_size(dtype_); }
    DType dtype() const { return dtype_; }
    MemCategory category() const { return cat_; }
    bool defined() const { return data_ != nullptr; }
    Device device() const { return device_; }
    bool on_cuda() const { return device_ == Device::cuda; }
    bool on_meta() const { return device_ == Device::meta; }
    void zero();
    // Same shape, dtype and category, fresh copy of the contents (on `device`).
    Tensor clone() const;
    Tensor to(Device device, MemCategory cat) const;

  private:
    void release();
    void* data_ = nullptr;
    Shape shape_;
    int64_t numel_ = 0;
    DType dtype_ = DType::f32;
    MemCategory cat_ = MemCategory::workspace;
    Device device_ = Device::cpu;
    bool pinned_ = false;  // host memory from the CUDA backend's pinned pool
};

// A vector of (move-only) tensors, moved in: what a layer keeps for later (e.g. zb-h1's W).
template <typename... Ts>
std::vector<Tensor> tensor_list(Ts&&... ts) {
    std::vector<Tensor> v;
    v.reserve(sizeof...(Ts));
    (v.push_back(std::move(ts)), ...);
    return v;
}

}  // namespace tessera
