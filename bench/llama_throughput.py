#!/usr/bin/env python3
"""Llama-family training throughput on one H200: Tessera next to its PyTorch peer
(../shared/anchors/torch_llama_bench.py: transformers' own classes from the same public configs,
bf16 autocast, fused AdamW, gradient clipping, torch.compile, random tokens), in one command.

usage: bench/llama_throughput.py --tessera BUILD/bin/tessera --anchor torch_llama_bench.py
                                 [--models smollm-135m:16,qwen2.5-0.5b:8,llama-3.2-1b:8]
                                 [--T 2048] [--steps 20] [--warmup 10] [--out DIR] [--no-anchor]

Each model at micro-batch B (after the colon) and sequence T, bf16. tok/s is wall clock
(bench/throughput_runs.py), the peer's too. MFU: the peer's FLOPs per token (6 x (non-embedding
parameters + head) + 12 L H hd T) scaled by each side's tokens/s. Memory: device = NVML per process
(the peak over the run, context and library pools included), engine = Tessera's accounting, pred =
the estimator (`tessera plan`), torch = the peer's caching-allocator peak. The issue's bar: Tessera
>= 1.0x the peer on each model at no higher device memory."""
import argparse, json, os, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput_runs import anchor_run, random_shard, tessera_run

p = argparse.ArgumentParser()
p.add_argument("--tessera", required=True)
p.add_argument("--anchor", required=True)
p.add_argument("--models", default="smollm-135m:16,qwen2.5-0.5b:8,llama-3.2-1b:8")
p.add_argument("--T", type=int, default=2048)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--warmup", type=int, default=10)
p.add_argument("--out", default=".")
p.add_argument("--no-anchor", action="store_true")
p.add_argument("--set", action="append", default=[], help="extra --set for every Tessera run")
a = p.parse_args()
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
work = tempfile.mkdtemp(prefix="tessera_llama_bench_")
shard = os.path.join(work, "random.bin")
random_shard(shard, 49152)

rows = []
for spec in a.models.split(","):
    model, B = spec.split(":")
    B = int(B)
    yaml = f"""name: {model}
model: {{preset: {model}, seq_len: {a.T}}}
data: {{train: {shard}}}
train: {{steps: {a.steps + a.warmup}, micro_batch: {B}, grad_accum: 1, lr: 3.0e-4, min_lr: 3.0e-5,
        warmup_steps: 10, eval_every: 0, grad_clip: 1.0}}
runtime: {{device: cuda, precision: bf16}}
log: {{db: runs.db, every: 1}}
"""
    t = tessera_run(a.tessera, work, model, yaml, a.set, B * a.T, a.warmup)
    t.update(name=f"tessera {model} B{B}", model=model)
    print(json.dumps(t), flush=True)
    rows.append(t)
    if not a.no_anchor:
        cmd = [sys.executable, a.anchor, "--model", model, "--B", str(B), "--T", str(a.T),
               "--steps", str(a.steps), "--warmup", str(a.warmup)]
        r = anchor_run(model, cmd)
        r.update(name=f"torch.compile {model} B{B}", model=model)
        print(json.dumps(r), flush=True)
        rows.append(r)

print()
print("tok/s: wall clock. Memory GiB: device = NVML per process; engine = Tessera's accounting;"
      " pred = the estimator; torch = the caching allocator's peak")
print(f"{'configuration':34} {'tok/s':>10} {'MFU':>7} {'vs peer':>8} {'device':>7} {'engine':>7} {'pred':>6} {'torch':>6} {'step ms':>8} {'pred ms':>8}")
peers = {r["model"]: r for r in rows if r["name"].startswith("torch") and "error" not in r}
for r in rows:
    if "error" in r:
        print(f"{r['name']:34} FAILED: {r['error'][-400:]}")
        continue
    peer = peers.get(r["model"])
    ratio = r["tok_s"] / peer["tok_s"] if peer else None
    mfu = peer["mfu"] * ratio if peer and peer.get("mfu") and ratio else (r.get("mfu") or float("nan"))
    f = lambda v, fmt: format(v, fmt) if v is not None else "-"
    is_t = r["name"].startswith("tessera")
    print(f"{r['name']:34} {r['tok_s']:10,.0f} {mfu*100:6.1f}% {f(ratio, '.2f') + 'x' if is_t and ratio else '':>8} "
          f"{r['device_gib']:7.1f} {f(r['peak_gib'], '.1f') if is_t else '-':>7} {f(r.get('pred_gib'), '.1f'):>6} "
          f"{f(r['peak_gib'], '.1f') if not is_t else '-':>6} "
          f"{f(r.get('step_s') and r['step_s'] * 1e3, '.1f'):>8} {f(r.get('pred_step_s') and r['pred_step_s'] * 1e3, '.1f'):>8}")
json.dump(rows, open(os.path.join(a.out, "llama_throughput.json"), "w"), indent=1)
