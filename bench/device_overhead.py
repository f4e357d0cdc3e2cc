#!/usr/bin/env python3
"""What a GPU process holds that Tessera's allocator does not see, measured on the device.

usage: bench/device_overhead.py TESSERA  (on the GPU machine; prints one JSON object)

context:   a bare CUDA context (the CUDA runtime's cudaFree(0) in a process of its own), NVML's
           per-process used memory (bench/device_memory.py).
libraries: what a real Tessera run on one GPU holds beyond that and beyond its own pool's
           segments (its mem/device_bytes less the context and libraries it adds from the device
           table): cuBLASLt's handle and workspace, the kernel modules loaded by the first
           launches, the scratch buffers of the reductions and of attention's backward. Measured
           on a tiny GPT (4 layers, d_model 128), so it is independent of the plans the estimator
           is tested on (tests/plan/data/h200_gpt2_memory.json).
The estimator adds both to every GPU rank's predicted device peak (engine/plan/estimator.cpp holds
the figures with the versions they were measured on)."""
import ctypes, json, os, sqlite3, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from device_memory import DeviceMemorySampler

tess = sys.argv[1]
with DeviceMemorySampler() as ctx:
    subprocess.run([sys.executable, "-c",
                    "import ctypes, time\n"
                    "import glob; rt = ctypes.CDLL((glob.glob('/usr/local/cuda/lib64/libcudart.so*') or ['libcudart.so'])[0])\n"
                    "assert rt.cudaFree(ctypes.c_void_p(0)) == 0\n"
                    "time.sleep(1.0)\n"], check=True)
work = tempfile.mkdtemp()
cfg = os.path.join(work, "project.yaml")
open(cfg, "w").write("""name: overhead
model: {preset: gpt-tiny, vocab: bytes}
data: {dataset: brown}
train: {steps: 4, micro_batch: 4, grad_accum: 1, lr: 1.0e-3, warmup_steps: 1, eval_every: 0}
runtime: {device: cuda, precision: bf16}
log: {db: runs.db, every: 1}
""")
with DeviceMemorySampler() as run:
    r = subprocess.run([tess, "train", cfg], capture_output=True, text=True)
if r.returncode:
    sys.exit(r.stdout + r.stderr)
db = sqlite3.connect(os.path.join(work, "runs.db"))
def peak(name):
    return db.execute("select max(value) from metrics where name=?", (name,)).fetchone()[0] or 0
# the runtime's device figure includes the device table's context and libraries: taken out
engine = peak("mem/device_bytes") - peak("mem/context_bytes") - peak("mem/libraries_bytes")
versions = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()
import glob
rt = ctypes.CDLL((glob.glob("/usr/local/cuda/lib64/libcudart.so*") or ["libcudart.so"])[0])
v = ctypes.c_int()
rt.cudaRuntimeGetVersion(ctypes.byref(v))
out = {"context_bytes": ctx.peak_bytes, "run_device_peak_bytes": run.peak_bytes,
       "run_engine_peak_bytes": int(engine), "libraries_bytes": run.peak_bytes - ctx.peak_bytes - int(engine),
       "gpu_and_driver": versions, "cuda_runtime": v.value,
       "samples": [ctx.samples, run.samples]}
print(json.dumps(out))
