// The CUDA device of this rank: one compute stream, the stream-ordered caching allocator (CUDA's
// own memory pool via cudaMallocAsync, release threshold raised so freed blocks are kept and
// reused), registered as core's CUDA allocator so Tensor(Device::cuda) accounts every byte by
// category like the CPU backend, and NVML readings (utilisation, memory used) for telemetry.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace tessera {

// Selects `device`, creates the compute stream and registers the allocator. Idempotent.
void cuda_device_init(int device);
int cuda_device_count();  // 0 when no driver / no GPU (never throws)
cudaStream_t cuda_stream();
void cuda_synchronize();
std::string cuda_device_name();
int64_t cuda_device_memory_bytes();  // total global memory (the runtime's figure)

struct GpuReading {
    bool ok = false;  // utilisation and memory read (the rest: -1 where the driver did not answer)
    double util_percent = 0;
    int64_t used_bytes = 0, total_bytes = 0;
    double power_watts = -1, temperature_c = -1, sm_clock_mhz = -1;
};
// Timing on the compute stream (timeline spans): an event recorded now; milliseconds between two
// events (synchronises on the later one); release.
void* cuda_event_record_now();
float cuda_event_ms(void* from, void* to);
void cuda_event_free(void* e);

// NVML (libnvidia-ml, loaded at run time): ok = false when unavailable. `device` is the CUDA
// runtime's index; NVML's handle is found by the device's PCI bus id (the two number GPUs
// differently under CUDA_VISIBLE_DEVICES), by index only when that lookup is missing.
GpuReading cuda_nvml_read(int device);

}  // namespace tessera
