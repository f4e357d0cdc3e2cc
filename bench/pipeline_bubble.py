#!/usr/bin/env python3
# usage: bench/pipeline_bubble.py TESSERA [--steps N] [--pp 2,4] [--micro 8] [--schedules 1f1b,zb-h1]
#                                          [--d-model 128]
# The measured pipeline bubble of CPU ranks, schedule by schedule, against its theory and the
# estimator's. Each plan trains the bubble test's model (tests/pipeline/bubble_test.cpp: gpt-tiny,
# 8 layers of width 128, micro-batches of 4 × 64 tokens, one thread per rank) for N steps; the
# measured bubble is what `tessera runs show` prints: per step, the pipeline's idle share from
# every rank's spans (1 − compute / (stages × window), engine/telemetry/pipeline_spans.h), the
# mean over the steps after the first. Beside it, each stage's mean forward and backward per
# micro-batch, in ms (zb-h1: B + W, the input and the weight gradient): a stage slower than the
# others paces the pipeline, and W cheaper than B leaves idle time, which the unit-time theory
# does not have; for zb-h1 also the theory at the stages' mean F, B and W. Theory with unit op times
# f = b = w = 1 (a whole backward 2): 1F1B (p−1)/(m+p−1), ZB-H1 (p−1)/(3m+p−1); the estimator's
# figure is `tessera plan --json`'s bubble_fraction. Needs a core per rank: on fewer cores, busy
# ranks slow each other and idle ones free cores, and the measured figures mean little (the
# script says so). Prints one table.
import json, os, re, sqlite3, subprocess, sys, tempfile

from throughput_runs import bubble_theory

tess = os.path.abspath(sys.argv[1])
arg = lambda k, d: sys.argv[sys.argv.index(k) + 1] if k in sys.argv else d
steps, m = int(arg("--steps", 8)), int(arg("--micro", 8))
pps = [int(x) for x in arg("--pp", "2,4").split(",")]
schedules = arg("--schedules", "1f1b,zb-h1").split(",")
d_model = int(arg("--d-model", 128))
PROJECT = f"""name: bubble
model: {{preset: gpt-tiny, n_layer: 8, n_head: 4, d_model: {d_model}, seq_len: 64}}
data: {{dataset: brown}}
train: {{steps: {steps}, micro_batch: 4, grad_accum: {m}, eval_every: 0, threads: 1}}
log: {{db: runs.db, every: 1}}
"""


work = tempfile.mkdtemp(prefix="pipeline_bubble_")
cores = os.cpu_count()
print(f"{cores} cores; load average {os.getloadavg()[0]:.1f}; m = {m} micro-batches, {steps} steps, "
      f"d_model {d_model}")
if cores < max(pps):
    print(f"WARNING: fewer cores ({cores}) than ranks ({max(pps)}): the measured bubbles mean little")
print(f"{'plan':<16} {'measured':>9} {'theory':>8} {'estimator':>10} {'step s':>8}  per stage: forward / backward ms "
      f"(zb-h1: input gradient B + weight gradient W)")
for p in pps:
    for kind in schedules:
        d = os.path.join(work, f"{kind}_pp{p}")
        os.makedirs(d)
        cfg = os.path.join(d, "project.yaml")
        with open(cfg, "w") as f:
            f.write(PROJECT)
        sets = sum((["--set", s] for s in [f"parallel.pp={p}", f"parallel.schedule={kind}"]), [])
        r = subprocess.run([tess, "train", cfg] + sets, capture_output=True, text=True, cwd=d)
        if r.returncode:
            print(f"{kind} pp{p}: tessera train failed: {(r.stdout + r.stderr)[-400:]}")
            continue
        est = json.loads(subprocess.run([tess, "plan", cfg, "--json"] + sets, capture_output=True,
                                        text=True, check=True).stdout)
        db = sqlite3.connect(os.path.join(d, "runs.db"))
        run = db.execute("SELECT max(id) FROM runs").fetchone()[0]
        shown = subprocess.run([tess, "runs", "show", "--db", os.path.join(d, "runs.db"), "--run", str(run)],
                               capture_output=True, text=True, check=True).stdout
        found = re.search(r"bubble\s+([0-9.]+) measured", shown)
        got = float(found.group(1)) if found else float("nan")
        times = sorted(t for (t,) in db.execute("SELECT wall_time FROM metrics WHERE run_id = ? AND "
                                                "name = 'train/loss' AND step > 1", (run,)))
        step_s = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else float("nan")
        stages, fbw = [], []
        n = m * (steps - 1)
        for stage, fwd, b, w in db.execute(
                "SELECT stage, sum(CASE WHEN kind = 'forward' THEN end_s - start_s ELSE 0 END), "
                "sum(CASE WHEN kind IN ('backward', 'backward_input') THEN end_s - start_s ELSE 0 END), "
                "sum(CASE WHEN kind = 'backward_weight' THEN end_s - start_s ELSE 0 END) "
                "FROM spans WHERE run_id = ? AND step > 0 GROUP BY stage ORDER BY stage", (run,)):
            f_ms, b_ms, w_ms = fwd / n * 1e3, b / n * 1e3, w / n * 1e3
            fbw.append((f_ms, b_ms, w_ms))
            stages.append(f"{f_ms:.1f}/{b_ms:.1f}" + (f"+{w_ms:.1f}" if w_ms > 0 else ""))
        # ZB-H1's theory at the stages' mean measured F, B and W (Qi et al.: the idle time per stage
        # is (p - 1)(F + B - W)), beside the unit-time figure
        at_times = ""
        if kind == "zb-h1" and fbw:
            F, B, W = (sum(x[i] for x in fbw) / len(fbw) for i in range(3))
            idle = (p - 1) * (F + B - W)
            at_times = f"  (theory at these mean times: {idle / (m * (F + B + W) + idle):.3f})"
        print(f"{kind + ' pp' + str(p):<16} {got:9.3f} {bubble_theory(kind, p, m):8.3f} "
              f"{est['bubble_fraction']:10.3f} {step_s:8.3f}  {'  '.join(stages)}{at_times}")
