"""The device's own view of a process tree's GPU memory: NVML's per-process used memory (through
`nvidia-smi --query-compute-apps`, every 50 ms), summed over the processes on each GPU, the
largest sample kept. What a user sizing a run on a card has to fit: the CUDA context, library
state (cuBLASLt, NCCL), the caching allocator's pools and every buffer, not only what Tessera's
own accounting sees.

    with DeviceMemorySampler() as s: subprocess.run(...)
    s.peak_bytes            # largest per-GPU sum of the processes' used memory
    s.peak_bytes_by_gpu     # {gpu uuid: bytes}
"""
import subprocess, threading


class DeviceMemorySampler:
    def __init__(self, period_ms=50):
        self.period_ms = period_ms
        self.peak_bytes_by_gpu = {}
        self.samples = 0

    def __enter__(self):
        self.proc = subprocess.Popen(
            ["nvidia-smi", "--query-compute-apps=timestamp,gpu_uuid,pid,used_memory",
             "--format=csv,noheader,nounits", f"-lms={self.period_ms}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self

    def _read(self):
        # one block of lines per sample, all with the sample's timestamp
        current, stamp = {}, None
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 4 or not parts[3].isdigit():
                continue
            ts, gpu, _pid, mib = parts
            if ts != stamp:
                self._close(current)
                current, stamp = {}, ts
                self.samples += 1
            current[gpu] = current.get(gpu, 0) + int(mib) * 2**20
        self._close(current)

    def _close(self, sums):
        for gpu, b in sums.items():
            self.peak_bytes_by_gpu[gpu] = max(self.peak_bytes_by_gpu.get(gpu, 0), b)

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait()
        self.thread.join(timeout=5)

    @property
    def peak_bytes(self):
        return max(self.peak_bytes_by_gpu.values(), default=0)
