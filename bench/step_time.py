#!/usr/bin/env python3
# usage: bench/step_time.py TESSERA OUTDIR [--steps N] [--plans a,b,...]   (on the GPU machine)
# The estimator's step time against the device, plan by plan: each plan trains GPT-2 in bf16 on
# one GPU through `tessera train` (random tokens, N steps), its wall-clock tokens/s measured as
# tokens of the steps after the first 10 over the time between their metric records (each
# written after the step's final synchronisation); then `tessera plan --json --device D` on the
# same config predicts it (D: this GPU as nvidia-smi names it; throughput_runs.plan_device_args).
# None of these runs entered the prediction: the estimator prices the op trace of each rank's step
# with the per-op costs bench/op_sweep measured (resources/devices/<d>_ops.json). Prints one
# table and writes OUTDIR/step_time.json.
import json, os, sqlite3, subprocess, sys, tempfile
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput_runs import plan_device_args, random_shard

tess = sys.argv[1]; out = sys.argv[2]
steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 30
warm = 10
plans = {
    "gpt2 mb16": [],
    "gpt2 mb16 selective": ["parallel.recompute=selective"],
    "gpt2 mb16 full": ["parallel.recompute=full"],
    "gpt2 mb16 offload": ["parallel.offload_activations=true"],
    "gpt2 mb4 x4": ["train.micro_batch=4", "train.grad_accum=4"],
    "gpt2 mb1 x16": ["train.micro_batch=1", "train.grad_accum=16"],
    "gpt2 mb8 seq512": ["train.micro_batch=8", "model.seq_len=512"],
    "gpt2-medium mb16": ["model.preset=gpt2-medium"],
    "gpt2-large mb8": ["model.preset=gpt2-large", "train.micro_batch=8"],
    "gpt2-xl mb8": ["model.preset=gpt2-xl", "train.micro_batch=8"],
    "gpt2-xl mb8 full": ["model.preset=gpt2-xl", "train.micro_batch=8", "parallel.recompute=full"],
}
if "--plans" in sys.argv:
    keep = sys.argv[sys.argv.index("--plans") + 1].split(",")
    plans = {k: v for k, v in plans.items() if k in keep}
work = tempfile.mkdtemp()
shard = os.path.join(work, "random.bin")
random_shard(shard, 50257, 5_000_000)
res = {}
print(f"{'plan':<22} {'measured tok/s':>14} {'predicted':>10} {'error':>7}   predicted parts (ms): gemm attention other optimizer", flush=True)
for tag, sets in plans.items():
    d = os.path.join(work, tag.replace(" ", "_")); os.makedirs(d)
    cfg = os.path.join(d, "project.yaml")
    open(cfg, "w").write(f"""name: {tag.replace(' ', '_')}
model: {{preset: gpt2}}
data: {{train: {shard}}}
train: {{steps: {steps}, micro_batch: 16, grad_accum: 1, lr: 6.0e-4, min_lr: 6.0e-5, warmup_steps: 1, eval_every: 0}}
runtime: {{device: cuda, precision: bf16}}
log: {{db: runs.db, every: 1}}
""")
    args = sum((["--set", s] for s in sets), [])
    r = subprocess.run([tess, "train", cfg] + args, capture_output=True, text=True)
    if r.returncode: res[tag] = {"error": (r.stdout + r.stderr)[-800:]}; print(tag, "FAILED", res[tag]["error"]); continue
    db = sqlite3.connect(os.path.join(d, "runs.db"))
    rows = db.execute("select step, wall_time from metrics where name='train/loss' and rank=0 order by step").fetchall()
    tok = db.execute("select value from metrics where name='perf/tok_per_s' and rank=0 order by step").fetchall()
    step_ms = [v for (v,) in db.execute("select value from metrics where name='perf/step_ms' and rank=0 order by step")]
    p = json.loads(subprocess.run([tess, "plan", cfg, "--json", *plan_device_args()] + args,
                                  capture_output=True, text=True, check=True).stdout)
    tokens_per_step = p["tokens_per_step"]
    (s0, t0), (s1, t1) = rows[warm - 1], rows[-1]
    measured = tokens_per_step * (s1 - s0) / (t1 - t0)
    pred = p["tokens_per_s"]
    parts = p["ranks"][0]["compute_parts_s"]
    res[tag] = {"sets": sets, "measured_tok_per_s": measured, "predicted_tok_per_s": pred,
                "error": pred / measured - 1, "step_model": p["step_model"], "predicted_step_s": p["step_s"],
                "measured_step_ms_median": float(np.median(step_ms[warm:])), "predicted_parts_s": parts}
    print(f"{tag:<22} {measured:>14,.0f} {pred:>10,.0f} {100 * (pred / measured - 1):>+6.1f}%   "
          f"{parts['gemm'] * 1e3:.1f} {parts['attention'] * 1e3:.1f} {parts['other_ops'] * 1e3:.1f} "
          f"{parts['optimizer'] * 1e3:.1f}   ({p['step_model']})", flush=True)
errs = [abs(v["error"]) for v in res.values() if "error" in v and isinstance(v["error"], float)]
if errs: print(f"worst |error| {100 * max(errs):.1f}% over {len(errs)} plans")
json.dump(res, open(os.path.join(out, "step_time.json"), "w"), indent=1)
