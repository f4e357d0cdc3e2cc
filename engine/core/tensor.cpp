#include "engine/core/tensor.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <unordered_set>

#include "engine/core/device_pool.h"
#include "engine/core/error.h"

namespace tessera {

int dtype_size(DType t) {
    switch (t) {
        case DType::f32:
            return 4;
        case DType::bf16:
            return 2;
        case DType::u16:
            return 2;
        case DType::i32:
            return 4;
        case DType::u8:
            return 1;
        case DType::f16:
            return 2;
        case DType::f64:
            return 8;
        case DType::i8:
            return 1;
        case DType::i16:
            return 2;
        case DType::i64:
            return 8;
        case DType::u32:
            return 4;
        case DType::u64:
            return 8;
        case DType::boolean:
            return 1;
    }
    return 0;
}

const char* dtype_name(DType t) {
    switch (t) {
        case DType::f32:
            return "F32";
        case DType::bf16:
            return "BF16";
        case DType::u16:
            return "U16";
        case DType::i32:
            return "I32";
        case DType::u8:
            return "U8";
        case DType::f16:
            return "F16";
        case DType::f64:
            return "F64";
        case DType::i8:
            return "I8";
        case DType::i16:
            return "I16";
        case DType::i64:
            return "I64";
        case DType::u32:
            return "U32";
        case DType::u64:
            return "U64";
        case DType::boolean:
            return "BOOL";
    }
    return "?";
}

int64_t shape_numel(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

std::string shape_str(const Shape& s) {
    std::ostringstream os;
    os << "(";
    for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
    os << ")";
    return os.str();
}

static DeviceAllocator g_cuda_alloc;

// ---- the CUDA pool: core's DevicePool over the backend's segments, for the process's one GPU.
// Created at registration and never destroyed (its segments outlive the CUDA runtime's teardown
// at exit otherwise).
namespace {
DevicePool* g_cuda_pool = nullptr;
uintptr_t cuda_reserve(void*, size_t bytes) {
    return reinterpret_cast<uintptr_t>(g_cuda_alloc.reserve(bytes));
}
void cuda_release(void*, uintptr_t base, size_t bytes) {
    g_cuda_alloc.release(reinterpret_cast<void*>(base), bytes);
}
// The pool's slack is the `cached` category: a cached block reused is counted out before the
// tensor's bytes are counted in, so the device total never overshoots.
void count_cached(int64_t delta) {
    if (delta) memory_tracker().add(MemCategory::cached, delta);
}
}  // namespace

int64_t device_cuda_release_cached() {
    if (!g_cuda_pool) return 0;
    const int64_t released = g_cuda_pool->release_cached();
    count_cached(-released);
    return released;
}

// ---- the meta device
namespace {
thread_local MetaMemory* t_meta = nullptr;
// A meta tensor's placeholder address: non-null (defined() holds), aligned, never dereferenced.
void* const kMetaData = reinterpret_cast<void*>(uintptr_t(1) << 44);
struct MetaEvent {
    int64_t issued_after = 0;
    bool synced = false;
};
thread_local std::unordered_set<void*> t_meta_events;
MetaEvent* meta_event(void* ev) {
    return t_meta_events.count(ev) ? static_cast<MetaEvent*>(ev) : nullptr;
}
}  // namespace

MetaMemory* meta_memory_install(MetaMemory* m) {
    MetaMemory* old = t_meta;
    t_meta = m;
    return old;
}

void memory_count_outside_pool(MemCategory c, int64_t bytes) {
    if (t_meta)
        bytes >= 0 ? t_meta->alloc(c, bytes) : t_meta->free(c, -bytes);
    else if (bytes >= 0)
        memory_tracker().add(c, bytes);
    else
        memory_tracker().sub(c, -bytes);
}

void device_register_cuda_allocator(const DeviceAllocator& a) {
    TS_CHECK(!g_cuda_pool || g_cuda_pool->reserved_bytes() == 0,
             "the CUDA allocator was registered again while its pool holds memory");
    g_cuda_alloc = a;
    if (!g_cuda_pool) g_cuda_pool = new DevicePool({cuda_reserve, cuda_release, nullptr});
}
bool device_cuda_available() {
    return g_cuda_alloc.reserve != nullptr;
}

void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
    if (bytes == 0 || dst_dev == Device::meta || src_dev == Device::meta) return;
    if (dst_dev == Device::cpu && src_dev == Device::cpu) {
        std::memcpy(dst, src, bytes);
        return;
    }
    TS_CHECK(device_cuda_available(), "CUDA tensor copy without a CUDA backend");
    g_cuda_alloc.copy(dst, src, bytes, dst_dev == Device::cuda, src_dev == Device::cuda);
}

void* device_copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
    if (dst_dev == Device::meta || src_dev == Device::meta) {
        TS_CHECK(dst_dev == Device::meta && src_dev == Device::meta,
                 "a copy between the meta device and another");
        if (!t_meta || !t_meta->async_copies) return nullptr;
        auto* ev = new MetaEvent{t_meta->computes, false};
        t_meta_events.insert(ev);
        return ev;
    }
    bool dcuda = dst_dev == Device::cuda, scuda = src_dev == Device::cuda;
    if (!(dcuda || scuda) || !g_cuda_alloc.copy_async) {
        device_copy(dst, dst_dev, src, src_dev, bytes);
        return nullptr;
    }
    return g_cuda_alloc.copy_async(dst, src, bytes, dcuda, scuda);
}

void* device_copy_async(Tensor& dst, const Tensor& src) {
    TS_CHECK(dst.nbytes() == src.nbytes(), "async copy between tensors of different sizes");
    return device_copy_async(dst.data(), dst.device(), src.data(), src.device(),
                             size_t(src.nbytes()));
}
// While a MetaMemory is installed, this thread's events are meta events (one already freed
// counts as done).
bool device_event_done(void* ev) {
    if (t_meta) {
        MetaEvent* m = meta_event(ev);
        return !m || m->synced || m->issued_after < t_meta->computes;
    }
    return !ev || g_cuda_alloc.event_done(ev);
}
void device_event_wait(void* ev) {
    if (ev && !t_meta) g_cuda_alloc.event_wait(ev);
}
void device_event_sync(void* ev) {
    if (t_meta) {
        if (MetaEvent* m = meta_event(ev)) m->synced = true;
    } else if (ev) {
        g_cuda_alloc.event_sync(ev);
    }
}
void device_event_free(void* ev) {
    if (t_meta) {
        if (MetaEvent* m = meta_event(ev)) {
            t_meta_events.erase(ev);
            delete m;
        }
    } else if (ev) {
        g_cuda_alloc.event_free(ev);
    }
}

namespace {
// CPU tensors come from glibc's heap. By default glibc hands a freed block past 128 KB (later:
// past the largest one freed so far) back to the kernel, and trims the heap's free top, so the
// next step's allocation of the same activation page-faults it in anew: full recompute, which
// frees a block's activations after its forward and allocates them again in its backward, ran
// gpt-tiny at 155 ms a step on the 2-core host against 128 ms with blocks kept
// (docs/benchmarks.md). Blocks up to 32 MB (glibc's largest threshold) stay in the heap, and the
// heap keeps up to 1 GB of free top, as a caching allocator would. The meta device's replays
// (the estimator) take the same policy: their op traces and allocation records are vectors that
// grow past 128 KB in every rank's replay, and `tessera plan --fits` on gpt2-large over 16 GPUs
// took 143,000 page faults and 4.1 s without it, 4,200 and 2.8 s with it (2-core host).
bool host_heap_keep() {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    return true;
}
}  // namespace

Tensor Tensor::empty(Shape shape, MemCategory cat, DType dtype, Device device) {
    Tensor t;
    t.device_ = device;
    for (int64_t d : shape) TS_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape));
    t.shape_ = std::move(shape);
    t.numel_ = shape_numel(t.shape_);
    t.dtype_ = dtype;
    t.cat_ = cat;
    size_t bytes = static_cast<size_t>(t.nbytes());
    if (device != Device::cuda) {
        static const bool heap_kept = host_heap_keep();
        (void)heap_kept;
    }
    if (device == Device::meta) {
        void* at = t_meta ? t_meta->tensor_alloc(cat, static_cast<int64_t>(bytes)) : nullptr;
        t.data_ = at ? at : kMetaData;
        return t;
    }
    if (device == Device::cuda) {
        TS_CHECK(device_cuda_available(),
                 "a CUDA tensor was requested but this process has no "
                 "CUDA backend (runtime.device: cuda needs a CUDA build)");
        int64_t cached = 0;
        t.data_ = reinterpret_cast<void*>(g_cuda_pool->alloc(bytes, &cached));
        count_cached(cached);
        if (!t.data_) {
            size_t free_b = 0, total_b = 0;
            if (g_cuda_alloc.mem_info) g_cuda_alloc.mem_info(&free_b, &total_b);
            throw Error(str_cat("out of GPU memory: allocating ", bytes, " bytes of ",
                                mem_category_name(cat), " failed (this process holds ",
                                g_cuda_pool->reserved_bytes(), " bytes in its pool, ",
                                g_cuda_pool->cached_bytes(), " of them free; the GPU has ", free_b,
                                " of ", total_b, " bytes free)"));
        }
    } else if (cat == MemCategory::host && g_cuda_alloc.host_alloc) {
        // offloaded state: pinned, so copies to and from the GPU run asynchronously at full speed
        t.data_ = g_cuda_alloc.host_alloc(bytes == 0 ? 64 : bytes);
        t.pinned_ = true;
    } else {
        size_t rounded = ((bytes + 63) / 64) * 64;
        t.data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
        if (!t.data_) throw Error(str_cat("out of host memory allocating ", bytes, " bytes"));
    }
    memory_tracker().add(cat, static_cast<int64_t>(bytes));
    return t;
}

Tensor Tensor::zeros(Shape shape, MemCategory cat, DType dtype, Device device) {
    Tensor t = empty(std::move(shape), cat, dtype, device);
    t.zero();
    return t;
}

void Tensor::zero() {
    if (!data_ || device_ == Device::meta) return;
    if (device_ == Device::cuda)
        g_cuda_alloc.zero(data_, static_cast<size_t>(nbytes()));
    else
        std::memset(data_, 0, static_cast<size_t>(nbytes()));
}

Tensor Tensor::clone() const {
    return to(device_, cat_);
}

Tensor Tensor::to(Device device, MemCategory cat) const {
    Tensor t = empty(shape_, cat, dtype_, device);
    if (device == Device::meta || device_ == Device::meta) {
        TS_CHECK(device == device_, "a copy between the meta device and another");
        return t;
    }
    device_copy(t.data_, device, data_, device_, static_cast<size_t>(nbytes()));
    return t;
}

void Tensor::release() {
    if (data_ && device_ == Device::meta) {
        if (t_meta) t_meta->tensor_free(cat_, nbytes(), data_ == kMetaData ? nullptr : data_);
        data_ = nullptr;
    } else if (data_) {
        memory_tracker().sub(cat_, nbytes());
        if (device_ == Device::cuda) {
            int64_t cached = 0;
            g_cuda_pool->free(reinterpret_cast<uintptr_t>(data_), &cached);
            count_cached(cached);
        } else if (pinned_)
            g_cuda_alloc.host_free(data_, static_cast<size_t>(nbytes()));
        else
            std::free(data_);
        data_ = nullptr;
    }
}

Tensor::~Tensor() {
    release();
}

Tensor::Tensor(Tensor&& o) noexcept
    : data_(o.data_),
      shape_(std::move(o.shape_)),
      numel_(o.numel_),
      dtype_(o.dtype_),
      cat_(o.cat_),
      device_(o.device_),
      pinned_(o.pinned_) {
    o.data_ = nullptr;
    o.numel_ = 0;
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
    if (this != &o) {
        release();
        data_ = o.data_;
        shape_ = std::move(o.shape_);
        numel_ = o.numel_;
        dtype_ = o.dtype_;
        cat_ = o.cat_;
        device_ = o.device_;
        pinned_ = o.pinned_;
        o.data_ = nullptr;
        o.numel_ = 0;
    }
    return *this;
}

}  // namespace tessera
