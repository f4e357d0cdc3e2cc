#!/usr/bin/env python3
# usage: bench/gpu_memory_dump.py TESSERA OUTDIR [--gpus 1|2]  (on the GPU machine)
# Writes OUTDIR/memdump.json: for GPT-2 bf16 plans on the H200s, each rank's per-category peak
# memory (the engine's accounting, mem/* metrics) and the device's own figure: the largest NVML
# per-process used memory of the run, sampled every 50 ms (bench/device_memory.py), per GPU.
# tests/plan/data/h200_gpt2_memory.json is its output (see the file's "produced_by").
import json, os, sqlite3, subprocess, sys, tempfile
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from device_memory import DeviceMemorySampler
from throughput_runs import random_shard
tess = sys.argv[1]; out = sys.argv[2]
gpus = int(sys.argv[sys.argv.index("--gpus") + 1]) if "--gpus" in sys.argv else 2
work = tempfile.mkdtemp()
shard = os.path.join(work, "random.bin")
random_shard(shard, 50257, 5_000_000)
plans = {"plain": [], "selective": ["parallel.recompute=selective"], "full": ["parallel.recompute=full"],
         "offload": ["parallel.offload_activations=true"], "accum4_mb4": ["train.micro_batch=4", "train.grad_accum=4"],
         "offload_optimizer": ["parallel.offload_optimizer=true"],
         "offload_optimizer_accum4": ["parallel.offload_optimizer=true", "train.micro_batch=4", "train.grad_accum=4"],
         "dp2": ["parallel.dp=2"], "zero1_dp2": ["parallel.dp=2", "parallel.zero=1"], "zero2_dp2": ["parallel.dp=2", "parallel.zero=2"],
         "zero3_dp2": ["parallel.dp=2", "parallel.zero=3"], "tp2": ["parallel.tp=2"],
         "pp2": ["parallel.pp=2", "train.micro_batch=2", "train.grad_accum=8"],
         "gpt2-large": ["model.preset=gpt2-large", "train.micro_batch=8"],
         "gpt2-xl": ["model.preset=gpt2-xl", "train.micro_batch=8"]}
two = {"dp2", "zero1_dp2", "zero2_dp2", "zero3_dp2", "tp2", "pp2"}
res = {}
for tag, sets in plans.items():
    if (tag in two) != (gpus == 2): continue
    d = os.path.join(work, tag); os.makedirs(d)
    cfg = os.path.join(d, "project.yaml")
    open(cfg, "w").write(f"""name: {tag}
model: {{preset: gpt2}}
data: {{train: {shard}}}
train: {{steps: 3, micro_batch: 16, grad_accum: 1, lr: 6.0e-4, min_lr: 6.0e-5, warmup_steps: 1, eval_every: 0}}
runtime: {{device: cuda, precision: bf16}}
log: {{db: runs.db, every: 1}}
""")
    with DeviceMemorySampler() as dev:
        r = subprocess.run([tess, "train", cfg] + sum((["--set", s] for s in sets), []), capture_output=True, text=True)
    if r.returncode: res[tag] = {"error": (r.stdout + r.stderr)[-500:]}; continue
    db = sqlite3.connect(os.path.join(d, "runs.db"))
    rows = db.execute("select rank, name, max(value) from metrics where name like 'mem/%' group by rank, name").fetchall()
    per = {}
    for rank, name, v in rows: per.setdefault(rank, {})[name[4:]] = int(v)
    res[tag] = {"sets": sets, "measured": per, "device_peak_bytes": dev.peak_bytes_by_gpu,
                "device_samples": dev.samples}
    print(tag, json.dumps(res[tag]), flush=True)
json.dump(res, open(os.path.join(out, "memdump.json"), "w"), indent=1)
