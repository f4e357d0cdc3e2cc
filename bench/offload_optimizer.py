#!/usr/bin/env python3
"""parallel.offload_optimizer on one GPU against the same run without it, in one command: the same
model, micro-batch, accumulation and data (Brown in GPT-2 BPE, `data: {dataset: brown}`), without
then with offload, each under the device's own memory sampler (NVML per process).

usage: bench/offload_optimizer.py --tessera BUILD/bin/tessera
                                  [--runs gpt2-xl:8:1,gpt2-xl:8:4] [--steps 30] [--warmup 10]
                                  [--out DIR]
  a run is MODEL:MICRO_BATCH:GRAD_ACCUM at seq_len 1024, bf16

tok/s: wall clock over the steps after the warm-up (bench/throughput_runs.py). Device GiB: NVML,
the process's peak; predicted: `tessera plan` for this GPU (bench/throughput_runs.plan_device_args:
its driver's name; device bytes and step time). The
issue's bars: the device peak falls by the optimizer state and the master weights, throughput at
least 50% of the run without offload, the prediction within 5% (memory) and 15% (step time)."""
import argparse, json, os, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput_runs import tessera_run

p = argparse.ArgumentParser()
p.add_argument("--tessera", required=True)
p.add_argument("--runs", default="gpt2-xl:8:1,gpt2-xl:8:4")
p.add_argument("--steps", type=int, default=30)
p.add_argument("--warmup", type=int, default=10)
p.add_argument("--out", default=".")
a = p.parse_args()
work = tempfile.mkdtemp(prefix="tessera_offload_bench_")

rows = []
for spec in a.runs.split(","):
    model, B, A = spec.split(":")
    B, A, T = int(B), int(A), 1024
    res = {}
    for off in ("false", "true"):
        tag = f"{model}-b{B}-a{A}-offload-{off}"
        yaml = f"""name: {tag}
model: {{preset: {model}, seq_len: {T}}}
data: {{dataset: brown}}
train: {{steps: {a.steps}, micro_batch: {B}, grad_accum: {A}, lr: 3.0e-4, min_lr: 3.0e-5,
        warmup_steps: 10, eval_every: 0, grad_clip: 1.0}}
runtime: {{device: cuda, precision: bf16}}
parallel: {{offload_optimizer: {off}}}
log: {{db: runs.db, every: 1}}
"""
        r = tessera_run(a.tessera, work, tag, yaml, [], B * A * T, a.warmup)
        r.update(model=model, B=B, grad_accum=A, offload=off == "true")
        print(json.dumps(r), flush=True)
        rows.append(r)
        res[off] = r
    n, o = res["false"], res["true"]
    if "error" in n or "error" in o:
        continue
    def pct(meas, pred):
        return f"{(pred - meas) / meas * 100:+.1f}%" if pred else "n/a"
    print(f"== {model} B{B} x{A}: tok/s {n['tok_s']:,.0f} -> {o['tok_s']:,.0f} "
          f"({o['tok_s'] / n['tok_s']:.2f}x); device GiB {n['device_gib']:.1f} -> {o['device_gib']:.1f} "
          f"(predicted {n['pred_gib']:.1f} {pct(n['device_gib'], n['pred_gib'])} -> {o['pred_gib']:.1f} "
          f"{pct(o['device_gib'], o['pred_gib'])}); step s {n['step_s']:.3f} -> {o['step_s']:.3f} "
          f"(predicted {n['pred_step_s'] or 0:.3f} {pct(n['step_s'], n['pred_step_s'])} -> "
          f"{o['pred_step_s'] or 0:.3f} {pct(o['step_s'], o['pred_step_s'])}); "
          f"last loss {n['loss']:.4f} / {o['loss']:.4f}", flush=True)
os.makedirs(a.out, exist_ok=True)
with open(os.path.join(a.out, "offload_optimizer.json"), "w") as fh:
    json.dump(rows, fh, indent=1)
