#include <dlfcn.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/cuda_handles.cuh"
#include "engine/kernels/cuda/device.cuh"

namespace tessera {

namespace {

// The streams, the recycled events and the cached pinned blocks below live as long as the process
// and are deliberately never destroyed: globals destroyed at exit would run after the CUDA
// runtime's own teardown (it registers at the first CUDA call, after these were constructed).
int g_device = -1;
cudaStream_t g_stream = nullptr;
cudaStream_t g_copy_stream = nullptr;  // activation offload: D2H / H2D beside the compute stream

// Pinned host memory for offloaded activations, cached by size (cudaHostAlloc costs
// milliseconds; offload asks for the same sizes every step). Blocks return to the cache.
std::mutex g_pinned_mu;
std::multimap<size_t, void*> g_pinned_free;

void* pinned_alloc(size_t bytes) {
    {
        std::lock_guard<std::mutex> g(g_pinned_mu);
        auto it = g_pinned_free.find(bytes);
        if (it != g_pinned_free.end()) {
            void* p = it->second;
            g_pinned_free.erase(it);
            return p;
        }
    }
    void* p = nullptr;
    cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (e != cudaSuccess)
        throw Error(str_cat("out of pinned host memory: allocating ", bytes, " bytes failed (",
                            cudaGetErrorString(e), ")"));
    return p;
}

void pinned_free(void* p, size_t bytes) {
    std::lock_guard<std::mutex> g(g_pinned_mu);
    g_pinned_free.emplace(bytes, p);
}

// Events for async copies, recycled.
std::mutex g_event_mu;
std::vector<cudaEvent_t> g_event_pool;

cudaEvent_t event_get() {
    {
        std::lock_guard<std::mutex> g(g_event_mu);
        if (!g_event_pool.empty()) {
            cudaEvent_t e = g_event_pool.back();
            g_event_pool.pop_back();
            return e;
        }
    }
    return cuda_event_create(cudaEventDisableTiming).release();  // into the pool, for good
}

// The copy starts once the compute stream has reached this point (the source is written, the
// destination's stream-ordered allocation is valid), then runs on the copy stream.
void* copy_async(void* dst, const void* src, size_t bytes, bool dst_cuda, bool src_cuda) {
    cudaEvent_t ready = event_get(), done = event_get();
    CUDA_CHECK(cudaEventRecord(ready, g_stream));
    CUDA_CHECK(cudaStreamWaitEvent(g_copy_stream, ready, 0));
    cudaMemcpyKind kind = dst_cuda && src_cuda ? cudaMemcpyDeviceToDevice
                          : dst_cuda           ? cudaMemcpyHostToDevice
                          : src_cuda           ? cudaMemcpyDeviceToHost
                                               : cudaMemcpyHostToHost;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, g_copy_stream));
    CUDA_CHECK(cudaEventRecord(done, g_copy_stream));
    {
        std::lock_guard<std::mutex> g(g_event_mu);
        g_event_pool.push_back(ready);  // recorded work is tracked by the stream, reuse is safe
    }
    return done;
}

bool event_done(void* ev) {
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaErrorNotReady) return false;
    CUDA_CHECK(e);
    return true;
}
void event_wait(void* ev) {
    CUDA_CHECK(cudaStreamWaitEvent(g_stream, (cudaEvent_t)ev, 0));
}
void event_sync(void* ev) {
    CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)ev));
}
void event_release(void* ev) {
    std::lock_guard<std::mutex> g(g_event_mu);
    g_event_pool.push_back((cudaEvent_t)ev);
}

// The pool's segments (engine/core/device_pool.h places tensors in them): cudaMalloc'd, so the
// device holds exactly the segments. cudaMalloc waits for nothing queued; cudaFree synchronises
// the device, so a segment is never returned while a kernel still uses it.
void* reserve_cuda(size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();  // clear the error: the pool releases what it caches and retries
        return nullptr;
    }
    return p;
}

void release_cuda(void* p, size_t) {
    CUDA_CHECK(cudaFree(p));
}

void mem_info_cuda(size_t* free_b, size_t* total_b) {
    if (cudaMemGetInfo(free_b, total_b) != cudaSuccess) *free_b = *total_b = 0;
}

void zero_cuda(void* p, size_t bytes) {
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, g_stream));
}

void copy_cuda(void* dst, const void* src, size_t bytes, bool dst_cuda, bool src_cuda) {
    cudaMemcpyKind kind = dst_cuda ? (src_cuda ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                   : cudaMemcpyDeviceToHost;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, g_stream));
    if (!dst_cuda || !src_cuda)
        CUDA_CHECK(cudaStreamSynchronize(g_stream));  // host memory involved
}

// ---- NVML through dlopen (no build-time dependency on the driver's headers)
struct Nvml {
    bool loaded = false;
    int (*init)() = nullptr;
    int (*handle)(unsigned, void**) = nullptr;
    int (*util)(void*, unsigned*) = nullptr;           // nvmlUtilization_t {gpu, memory}
    int (*mem)(void*, unsigned long long*) = nullptr;  // nvmlMemory_t {total, free, used}
    int (*by_pci)(const char*, void**) = nullptr;      // nvmlDeviceGetHandleByPciBusId_v2
    // optional readings (null when the driver lacks them): milliwatts; NVML_TEMPERATURE_GPU (0)
    // in degrees C; NVML_CLOCK_SM (1) in MHz
    int (*power)(void*, unsigned*) = nullptr;
    int (*temp)(void*, int, unsigned*) = nullptr;
    int (*clock)(void*, int, unsigned*) = nullptr;
};

Nvml& nvml() {
    static Nvml n = [] {
        Nvml x;
        void* lib =
            dlopen("libnvidia-ml.so.1", RTLD_LAZY);  // kept for the process: never dlclose'd
        if (!lib) return x;
        x.init = (int (*)())dlsym(lib, "nvmlInit_v2");
        x.handle = (int (*)(unsigned, void**))dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
        x.util = (int (*)(void*, unsigned*))dlsym(lib, "nvmlDeviceGetUtilizationRates");
        x.mem = (int (*)(void*, unsigned long long*))dlsym(lib, "nvmlDeviceGetMemoryInfo");
        x.by_pci = (int (*)(const char*, void**))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
        x.power = (int (*)(void*, unsigned*))dlsym(lib, "nvmlDeviceGetPowerUsage");
        x.temp = (int (*)(void*, int, unsigned*))dlsym(lib, "nvmlDeviceGetTemperature");
        x.clock = (int (*)(void*, int, unsigned*))dlsym(lib, "nvmlDeviceGetClockInfo");
        x.loaded = x.init && x.handle && x.util && x.mem && x.init() == 0;
        return x;
    }();
    return n;
}

}  // namespace

int cuda_device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky error of a missing driver
        return 0;
    }
    return n;
}

void cuda_device_init(int device) {
    if (g_device == device) return;
    int n = cuda_device_count();
    if (n == 0) throw Error("runtime.device is cuda but no CUDA GPU is visible to this process");
    if (device >= n)
        throw Error(str_cat("rank needs GPU ", device, " but this host has ", n, " GPU(s)"));
    CUDA_CHECK(cudaSetDevice(device));
    g_stream = cuda_stream_create(cudaStreamNonBlocking).release();  // process lifetime
    g_copy_stream = cuda_stream_create(cudaStreamNonBlocking).release();
    // the kernels' own stream-ordered scratch (attention backward's row sums, cudaMallocAsync)
    // stays cached in the driver's pool instead of being unmapped at every synchronisation
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t keep = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    g_device = device;
    DeviceAllocator a;
    a.reserve = reserve_cuda;
    a.release = release_cuda;
    a.mem_info = mem_info_cuda;
    a.zero = zero_cuda;
    a.copy = copy_cuda;
    a.host_alloc = pinned_alloc;
    a.host_free = pinned_free;
    a.copy_async = copy_async;
    a.event_done = event_done;
    a.event_wait = event_wait;
    a.event_sync = event_sync;
    a.event_free = event_release;
    device_register_cuda_allocator(a);
}

cudaStream_t cuda_stream() {
    return g_stream;
}

void cuda_synchronize() {
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
}

std::string cuda_device_name() {
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, g_device < 0 ? 0 : g_device));
    return p.name;
}

int64_t cuda_device_memory_bytes() {
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, g_device < 0 ? 0 : g_device));
    return (int64_t)p.totalGlobalMem;
}

void* cuda_event_record_now() {
    CudaEvent e = cuda_event_create(cudaEventDefault);  // timed
    CUDA_CHECK(cudaEventRecord(e.get(), g_stream));
    return e.release();  // owned by the caller: cuda_event_free
}

float cuda_event_ms(void* from, void* to) {
    CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)to));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, (cudaEvent_t)from, (cudaEvent_t)to));
    return ms;
}

void cuda_event_free(void* e) {
    CudaEventDeleter()((cudaEvent_t)e);
}

GpuReading cuda_nvml_read(int device) {
    GpuReading r;
    Nvml& n = nvml();
    if (!n.loaded) return r;
    void* h = nullptr;
    char bus[32] = {};
    const bool by_bus = n.by_pci && cudaDeviceGetPCIBusId(bus, sizeof bus, device) == cudaSuccess &&
                        n.by_pci(bus, &h) == 0;
    if (!by_bus) {
        cudaGetLastError();  // a failed bus-id query leaves no sticky error behind
        if (n.handle((unsigned)device, &h) != 0) return r;
    }
    unsigned util[2] = {0, 0};
    unsigned long long mem[3] = {0, 0, 0};
    if (n.util(h, util) != 0 || n.mem(h, mem) != 0) return r;
    r.ok = true;
    r.util_percent = util[0];
    r.total_bytes = (int64_t)mem[0];
    r.used_bytes = (int64_t)mem[2];
    unsigned v = 0;
    if (n.power && n.power(h, &v) == 0) r.power_watts = v / 1000.0;
    if (n.temp && n.temp(h, 0 /* NVML_TEMPERATURE_GPU */, &v) == 0) r.temperature_c = v;
    if (n.clock && n.clock(h, 1 /* NVML_CLOCK_SM */, &v) == 0) r.sm_clock_mhz = v;
    return r;
}

}  // namespace tessera
