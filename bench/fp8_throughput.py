#!/usr/bin/env python3
"""runtime.precision fp8 against Tessera's own bf16 on one GPU, in one command: the same model,
micro-batch and data (the Brown corpus in GPT-2 BPE, `data: {dataset: brown}`, for every model:
the Llama family trains on those ids too, so both precisions see the same tokens), bf16 then fp8.

usage: bench/fp8_throughput.py --tessera BUILD/bin/tessera
                               [--models gpt2-xl:8:1024,llama-3.2-1b:8:2048] [--steps 300]
                               [--warmup 10] [--out DIR]

tok/s: wall clock over the steps after the warm-up (bench/throughput_runs.py). Loss: the mean
train/loss of the last 10 steps (the issue's bar: fp8 within 0.05 of bf16 after 300 steps).
Device memory: NVML per process, the peak over the run. Prediction: `tessera plan` for this GPU
(bench/throughput_runs.plan_device_args: its driver's name, looked up in the device table)
step time (tok/s) for each precision."""
import argparse, json, os, sqlite3, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput_runs import tessera_run

p = argparse.ArgumentParser()
p.add_argument("--tessera", required=True)
p.add_argument("--models", default="gpt2-xl:8:1024,llama-3.2-1b:8:2048")
p.add_argument("--steps", type=int, default=300)
p.add_argument("--warmup", type=int, default=10)
p.add_argument("--out", default=".")
a = p.parse_args()
work = tempfile.mkdtemp(prefix="tessera_fp8_bench_")


def last_losses(tag, n=10):
    db = sqlite3.connect(os.path.join(work, tag, "runs.db"))
    run = db.execute("select max(id) from runs").fetchone()[0]
    rows = db.execute("select value from metrics where run_id=? and name='train/loss' order by step",
                      (run,)).fetchall()
    vals = [v for (v,) in rows][-n:]
    return sum(vals) / len(vals) if vals else None


rows = []
for spec in a.models.split(","):
    model, B, T = spec.split(":")
    B, T = int(B), int(T)
    res = {}
    for prec in ("bf16", "fp8"):
        tag = f"{model}-{prec}"
        yaml = f"""name: {tag}
model: {{preset: {model}, seq_len: {T}}}
data: {{dataset: brown}}
train: {{steps: {a.steps}, micro_batch: {B}, grad_accum: 1, lr: 3.0e-4, min_lr: 3.0e-5,
        warmup_steps: 20, eval_every: 0, grad_clip: 1.0}}
runtime: {{device: cuda, precision: {prec}}}
log: {{db: runs.db, every: 1}}
"""
        r = tessera_run(a.tessera, work, tag, yaml, [], B * T, a.warmup)
        if "error" not in r:
            r["last10_loss"] = last_losses(tag)
            r["pred_tok_s"] = B * T / r["pred_step_s"] if r.get("pred_step_s") else None
        r.update(model=model, precision=prec, B=B, T=T)
        print(json.dumps(r), flush=True)
        rows.append(r)
        res[prec] = r
    b, f = res["bf16"], res["fp8"]
    if "error" not in b and "error" not in f:
        print(f"== {model} B{B} T{T}: bf16 {b['tok_s']:,.0f} tok/s, fp8 {f['tok_s']:,.0f} tok/s "
              f"({f['tok_s'] / b['tok_s']:.2f}x); loss (last 10 of {a.steps}) bf16 {b['last10_loss']:.4f} "
              f"fp8 {f['last10_loss']:.4f} (diff {f['last10_loss'] - b['last10_loss']:+.4f}); device GiB "
              f"{b['device_gib']:.1f} / {f['device_gib']:.1f}; predicted tok/s "
              f"{b['pred_tok_s'] or 0:,.0f} / {f['pred_tok_s'] or 0:,.0f}", flush=True)
os.makedirs(a.out, exist_ok=True)
with open(os.path.join(a.out, "fp8_throughput.json"), "w") as fh:
    json.dump(rows, fh, indent=1)
