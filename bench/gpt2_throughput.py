#!/usr/bin/env python3
"""GPT-2 training throughput on H200s: Tessera next to its PyTorch peer, in one run.

usage: bench/gpt2_throughput.py --tessera BUILD/bin/tessera --anchor torch_gpt2_bench.py
                                --gpus 1|2 [--out DIR] [--steps 30] [--warmup 10]
                                [--model gpt2|gpt2-medium|gpt2-large|gpt2-xl] [--B 16]

Every configuration trains the model (GPT-2 124M by default: 12 layers, d_model 768, 12 heads,
vocab 50257, tied head), micro-batch B (16), sequence 1024, bf16, on random tokens. The headline tokens/s is wall clock: the tokens of the
timed steps over the time from the end of the last warm-up step to the end of the last step (each
step ends with the run's synchronisation; the times are the metric records' wall clocks), the
anchor's too; the median of the per-step figures stands beside it, labelled. MFU counts 6·N + 12·L·d·T FLOPs per token (the PaLM formula, as the anchor does) against
the GPU's peak in Tessera's device table (engine/plan, via `tessera plan --json`); peak memory is the largest mem/total_bytes any rank reported (the engine's
own accounting) and, beside it, the estimator's prediction for the same config (`tessera plan
--device D --json`, D this GPU's name in the device table, H100 or H200: the largest per-rank
device peak) and the device's own peak (NVML per
process, sampled every 50 ms: bench/device_memory.py). With --gpus 2 the 1-GPU Tessera reference
runs in the same command, and each configuration is run --rounds times, interleaved."""
import argparse, json, os, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput_runs import anchor_run, bubble_theory, model_of, random_shard, tessera_run

p = argparse.ArgumentParser()
p.add_argument("--tessera", required=True)
p.add_argument("--anchor", required=True)
p.add_argument("--gpus", type=int, default=1)
p.add_argument("--out", default=".")
p.add_argument("--steps", type=int, default=30)
p.add_argument("--warmup", type=int, default=10)
p.add_argument("--only", default="")
p.add_argument("--rounds", type=int, default=1)
p.add_argument("--model", default="gpt2", choices=["gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"])
p.add_argument("--B", type=int, default=16)
a = p.parse_args()
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
work = tempfile.mkdtemp(prefix="tessera_bench_")
shard = os.path.join(work, "random.bin")
random_shard(shard, 50257)
shape = model_of(a.tessera, work, a.model, shard)  # the engine's preset: the peer is built to it
L, D, H, T = shape["layers"], shape["d_model"], shape["heads"], shape["seq_len"]
V = 50304  # the vocabulary padded to a multiple of 128, as the anchor counts it
N_PARAMS = V * D + T * D + L * (12 * D * D + 13 * D) + 2 * D  # tied head; 124,475,904 for gpt2
FLOPS_PER_TOKEN = 6 * N_PARAMS + 12 * L * D * T
peak_flops = None  # per GPU, from the device table (`tessera plan --json`: device.peak_flops)

def tessera(tag, sets, micro=None, accum=1):
    micro = micro or a.B
    global peak_flops
    yaml = f"""name: {tag}
model: {{preset: {a.model}}}
data: {{train: {shard}}}
train: {{steps: {a.steps + a.warmup}, micro_batch: {micro}, grad_accum: {accum}, lr: 6.0e-4,
        min_lr: 6.0e-5, warmup_steps: 10, eval_every: 0, grad_clip: 1.0}}
runtime: {{device: cuda, precision: bf16}}
log: {{db: runs.db, every: 1}}
"""
    tokens = micro * accum * T * (2 if any(x == "parallel.dp=2" for x in sets) else 1)
    r = tessera_run(a.tessera, work, tag, yaml, sets, tokens, a.warmup)
    peak_flops = r.get("peak_flops") or peak_flops
    return r

def anchor(tag, mode, compile_, nproc):
    base = [sys.executable, a.anchor, "--mode", mode, "--compile", str(compile_), "--steps", str(a.steps),
            "--B", str(a.B), "--layers", str(L), "--dmodel", str(D), "--heads", str(H),
            "--warmup", str(a.warmup)]
    return anchor_run(tag, base if nproc == 1 else ["torchrun", f"--nproc_per_node={nproc}"] + base[1:])

rows = []
def want(tag): return not a.only or any(x in tag for x in a.only.split(","))
if a.gpus == 1:
    plan = [("tessera 1 GPU", lambda: tessera("t1", [])),
            ("torch.compile 1 GPU", lambda: anchor("c1", "single", 1, 1)),
            ("torch eager 1 GPU", lambda: anchor("e1", "single", 0, 1)),
            ("tessera recompute selective", lambda: tessera("sel", ["parallel.recompute=selective"])),
            ("tessera recompute full", lambda: tessera("full", ["parallel.recompute=full"])),
            ("tessera offload activations", lambda: tessera("off", ["parallel.offload_activations=true"]))]
else:
    PP_M = 8  # the pipeline plans' micro-batches a step
    plan = [("tessera 1 GPU (reference)", lambda: tessera("t1", [])),
            ("tessera dp2", lambda: tessera("dp2", ["parallel.dp=2"])),
            ("tessera zero1 dp2", lambda: tessera("z1", ["parallel.dp=2", "parallel.zero=1"])),
            ("torch DDP+compile 2 GPUs", lambda: anchor("ddp", "ddp", 1, 2)),
            ("tessera zero3 dp2", lambda: tessera("z3", ["parallel.dp=2", "parallel.zero=3"])),
            ("torch FSDP2+compile 2 GPUs", lambda: anchor("fsdp", "fsdp", 1, 2)),
            (f"tessera pp2 1f1b m{PP_M}", lambda: tessera("pp2", ["parallel.pp=2", "parallel.schedule=1f1b"], micro=2, accum=PP_M)),
            (f"tessera pp2 zb-h1 m{PP_M}", lambda: tessera("zb2", ["parallel.pp=2", "parallel.schedule=zb-h1"], micro=2, accum=PP_M)),
            ("tessera tp2", lambda: tessera("tp2", ["parallel.tp=2"]))]
for rnd in range(a.rounds):  # interleaved: every configuration once per round
    for name, fn in plan:
        if not want(name): continue
        r = fn(); r["name"] = name if a.rounds == 1 else f"{name} #{rnd + 1}"
        rows.append(r)
        print(json.dumps(r), flush=True)

print()
print("tok/s: wall clock (the headline); median: of the per-step figures. Memory: engine = Tessera's"
      " accounting, pred = the estimator, device = NVML per process (50 ms samples)")
print(f"{'configuration':34} {'tok/s':>10} {'median':>10} {'per GPU':>10} {'MFU':>7} {'engine GiB':>10} {'pred GiB':>9} {'device GiB':>10} {'idle':>7}")
for r in rows:
    if "error" in r:
        print(f"{r['name']:34} FAILED: {r['error'][-300:]}")
        continue
    gpus = 1 if "1 GPU" in r["name"] else a.gpus
    med = f"{r['median_tok_s']:10,.0f}" if r.get("median_tok_s") else f"{'-':>10}"
    mfu = r["tok_s"] * FLOPS_PER_TOKEN / gpus / peak_flops if peak_flops else float("nan")
    bub = f"{r['rank_idle']*100:.1f}%" if r.get("rank_idle") is not None else "-"
    pred = f"{r['pred_gib']:.1f}" if r.get("pred_gib") is not None else "-"  # anchors: none
    print(f"{r['name']:34} {r['tok_s']:10,.0f} {med} {r['tok_s']/gpus:10,.0f} {mfu*100:6.1f}% {r['peak_gib']:10.1f} "
          f"{pred:>9} {r.get('device_gib', 0):10.1f} {bub:>7}")
if any(" pp2 " in r["name"] for r in rows):  # idle: the measured bubble, against the schedules' theory
    print(f"pipeline bubble theory at p 2, m {PP_M} (unit op times): 1F1B "
          f"{100 * bubble_theory('1f1b', 2, PP_M):.1f}%, ZB-H1 {100 * bubble_theory('zb-h1', 2, PP_M):.1f}%")
suffix = "" if a.model == "gpt2" else f"_{a.model}"
json.dump(rows, open(os.path.join(a.out, f"gpt2_throughput_{a.gpus}gpu{suffix}.json"), "w"), indent=1)
