"""What the throughput benches share: a random-token shard, one `tessera train` run measured by
wall clock (tokens of the timed steps over the time from the end of the last warm-up step to the
end of the last step, from the metric records' wall clocks; each step ends with the run's
synchronisation), and one PyTorch peer run (its RESULT line). Both under the device's own memory
sampler (NVML per process, bench/device_memory.py). And a pipeline schedule's bubble in theory.
Used by the bench scripts."""
import functools, json, os, re, sqlite3, statistics, subprocess, sys, time

from device_memory import DeviceMemorySampler


def random_shard(path, vocab, n=50_000_000):
    """A token shard (engine/data/shard.h: 256 int32 header; version 1 uint16 tokens, version 2
    uint32 for vocabularies past 65,536) of uniform ids < vocab."""
    import numpy as np  # here: the scripts that only need the rest run where numpy is not
    rng = np.random.default_rng(0)
    wide = vocab > 65536
    hdr = np.zeros(256, dtype=np.int32)
    hdr[0], hdr[1], hdr[2] = 20240520, 2 if wide else 1, n
    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        f.write(rng.integers(0, vocab, n, dtype=np.uint32 if wide else np.uint16).tobytes())


def bubble_theory(schedule, p, m):
    """A pipeline schedule's bubble with unit op times (f = b = w = 1, a whole backward 2) over p
    stages and m micro-batches: 1F1B (p−1)/(m+p−1), ZB-H1 (p−1)/(3m+p−1). ZB-H1's at other op
    times: engine/parallel/schedule.h."""
    return (p - 1) / (3 * m + p - 1) if schedule == "zb-h1" else (p - 1) / (m + p - 1)


def model_of(tessera, work, preset, shard):
    """The preset's sizes as the engine builds it (`tessera plan --json`'s "model": layers,
    d_model, heads, ...), for a peer built to the same shape."""
    cfg = os.path.join(work, f"model_{preset}.yaml")
    with open(cfg, "w") as f:
        f.write(f"name: shape\nmodel: {{preset: {preset}}}\ndata: {{train: {shard}}}\n")
    r = subprocess.run([tessera, "plan", cfg, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tessera plan failed for preset {preset}: {(r.stdout + r.stderr)[-300:]}")
    return json.loads(r.stdout)["model"]


@functools.lru_cache(maxsize=None)
def plan_device_args():
    """`--device` with this machine's first GPU as nvidia-smi names it (asked once), which
    `tessera plan` looks up in its device table (each GPU with its own measured op costs,
    resources/devices); nothing where nvidia-smi does not answer, so that `tessera plan` takes its
    own default. A GPU the table lacks gets no prediction (plan fails)."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        name = r.stdout.splitlines()[0].strip() if r.returncode == 0 and r.stdout.strip() else ""
    except (OSError, subprocess.TimeoutExpired):
        name = ""
    return ["--device", name] if name else []


def plan(tessera, cfg, sets):
    """`tessera plan <plan_device_args()> --json` for the config: (largest per-rank device
    peak in GiB, the device's peak FLOP/s, predicted step seconds), or Nones."""
    cmd = [tessera, "plan", cfg, *plan_device_args(), "--json"] + sum((["--set", s] for s in sets), [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"tessera plan failed for {cfg}: {(r.stdout + r.stderr)[-300:]}", file=sys.stderr)
        return None, None, None
    p = json.loads(r.stdout)
    step = p.get("step_s")
    return max(c["memory"]["device_bytes"] for c in p["ranks"]) / 2**30, p["device"]["peak_flops"], step


def tessera_run(tessera, work, tag, yaml, sets, tokens_per_step, warmup):
    """Writes work/tag/project.yaml, trains, and reads the run's store."""
    d = os.path.join(work, tag)
    os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, "project.yaml")
    with open(cfg, "w") as f:
        f.write(yaml)
    pred, peak_flops, pred_step = plan(tessera, cfg, sets)
    cmd = [tessera, "train", cfg] + sum((["--set", s] for s in sets), [])
    t0 = time.time()
    with DeviceMemorySampler() as dev:
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return {"tag": tag, "error": (r.stdout + r.stderr)[-2000:], "pred_gib": pred}
    db = sqlite3.connect(os.path.join(d, "runs.db"))
    run = db.execute("select max(id) from runs").fetchone()[0]

    def series(name):
        q = "select step, value from metrics where run_id=? and name=? order by step"
        return db.execute(q, (run, name)).fetchall()

    tps = [v for s, v in series("perf/tok_per_s") if s > warmup]
    ends = dict(db.execute("select step, wall_time from metrics where run_id=? and name=? and rank=0",
                           (run, "perf/tok_per_s")).fetchall())
    last = max(ends)
    wall = tokens_per_step * (last - warmup) / (ends[last] - ends[warmup])
    mem = max((v for s, v in series("mem/device_bytes")), default=0) or \
          max((v for s, v in series("mem/total_bytes")), default=0)
    idle = [v for s, v in series("pipeline/rank_idle") if s > warmup]
    loss = series("train/loss")
    return {"tag": tag, "tok_s": wall, "median_tok_s": statistics.median(tps), "peak_gib": mem / 2**30,
            "pred_gib": pred, "pred_step_s": pred_step, "peak_flops": peak_flops,
            "step_s": tokens_per_step / wall,
            "device_gib": dev.peak_bytes / 2**30,
            "rank_idle": statistics.mean(idle) if idle else None, "loss": loss[-1][1] if loss else None,
            "wall_s": time.time() - t0}


def anchor_run(tag, cmd):
    """A PyTorch peer: its RESULT line's tok/s, MFU and allocator peak, and the device's peak."""
    with DeviceMemorySampler() as dev:
        r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"tok/s=([\d,]+).*peak_mem_GiB=([\d.]+)", r.stdout)
    if not m:
        return {"tag": tag, "error": (r.stdout + r.stderr)[-2000:]}
    mfu = re.search(r"MFU\(\d+\)=([\d.]+)%", r.stdout)
    return {"tag": tag, "tok_s": float(m.group(1).replace(",", "")),
            "mfu": float(mfu.group(1)) / 100 if mfu else None, "peak_gib": float(m.group(2)),
            "device_gib": dev.peak_bytes / 2**30}
