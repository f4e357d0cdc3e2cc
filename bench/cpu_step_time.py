#!/usr/bin/env python3
# usage: bench/cpu_step_time.py TESSERA [--steps N] [--warmup W] [--repeat R] [--plans a,b,...] [--no-calibrate]
#                                [--set key=value ...]
# The estimator's CPU step time against `tessera train`, plan by plan, on this host. First
# `tessera plan --calibrate --threads N` times this CPU's kernels at every thread count the plans'
# ranks get (the host's cores over the ranks, less one where that leaves a rank four or more) and
# stores them in the user's cache
# (docs/parallelism.md, "Step time"); then each plan trains the shipped CPU projects' models
# (projects/quickstart: gpt-tiny; projects/llama-tiny-cpu) for N steps in a scratch folder, and
# its wall-clock tokens/s is the tokens of the steps after the first W over the time between their
# metric records (rank 0, each written at the end of its step); `tessera plan --json` on the same
# config predicts it. No run entered the prediction: the calibration times single kernels only.
# With --repeat R (default 3) every plan trains once per round, R rounds, and its fastest wall
# clock counts; from R = 2 the calibration runs again after the rounds (`--calibrate
# --keep-faster`: each op the faster of the sweep before the runs and the one after), and the
# predictions use that. On a host shared
# with other work a slow spell of tens of seconds then costs one round of a plan or one sweep, not
# the row: the slower runs measure the neighbours. Beside it, labelled, the fastest window of 8
# consecutive timed steps (the least disturbed stretch); each run's load average as it ends.
# Prints one table (and the sweep's time); writes step_time_cpu.json beside the scratch folders.
import json, os, shutil, sqlite3, subprocess, sys, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
tess = os.path.abspath(sys.argv[1])
arg = lambda k, d: sys.argv[sys.argv.index(k) + 1] if k in sys.argv else d
steps, warm, repeat = int(arg("--steps", 30)), int(arg("--warmup", 5)), int(arg("--repeat", 3))
quick, llama = "projects/quickstart/project.yaml", "projects/llama-tiny-cpu/project.yaml"
# (project, --set overrides): every rank on this host; 2 cores give 1 rank 2 threads, 2+ ranks 1
plans = {
    "gpt-tiny 1 rank": (quick, []),
    "gpt-tiny dp2": (quick, ["parallel.dp=2"]),
    "gpt-tiny dp2 zero3 full": (quick, ["parallel.dp=2", "parallel.zero=3", "parallel.recompute=full"]),
    "gpt-tiny dp2 zero3": (quick, ["parallel.dp=2", "parallel.zero=3"]),
    "gpt-tiny full recompute": (quick, ["parallel.recompute=full"]),
    "gpt-tiny dp2 full recompute": (quick, ["parallel.dp=2", "parallel.recompute=full"]),
    "gpt-tiny tp2": (quick, ["parallel.tp=2"]),
    "gpt-tiny pp2 mb4x4": (quick, ["parallel.pp=2", "train.micro_batch=4", "train.grad_accum=4"]),
    "llama-tiny 1 rank": (llama, ["parallel.dp=1", "parallel.zero=0"]),
    "llama-tiny dp2 zero1": (llama, []),
    "llama-tiny dp2x2 ranks4": (llama, ["parallel.dp=2", "parallel.tp=2"]),
}
if "--plans" in sys.argv:
    keep = arg("--plans", "").split(",")
    plans = {k: v for k, v in plans.items() if k in keep}
common = [f"train.steps={steps}", "train.eval_every=0", "log.every=1", "checkpoint.every=0"]
common += [v for k, v in zip(sys.argv, sys.argv[1:]) if k == "--set"]  # every plan, e.g. train.threads=8


def sets_args(sets):
    return sum((["--set", s] for s in sets), [])


def plan_json(cfg, sets):
    r = subprocess.run([tess, "plan", cfg, "--json"] + sets_args(sets), capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"tessera plan {cfg}: {(r.stdout + r.stderr)[-400:]}")
    return json.loads(r.stdout)


work = tempfile.mkdtemp(prefix="cpu_step_time_")
for tag, (proj, sets) in plans.items():
    d = os.path.join(work, tag.replace(" ", "_"))
    os.makedirs(d)
    shutil.copy(os.path.join(REPO, proj), os.path.join(d, "project.yaml"))

# ---- calibrate every thread count the plans' ranks run (tessera plan's threads_per_rank: the
# rule tessera train sets them by, default_threads_per_rank), and each plan's tokens per step
first = {t: plan_json(os.path.join(work, t.replace(" ", "_"), "project.yaml"), s + common)
         for t, (_, s) in plans.items()}
threads = sorted({p["threads_per_rank"] for p in first.values()})


def calibrate(extra):
    for n in threads:
        t0 = time.time()
        r = subprocess.run([tess, "plan", "--calibrate", "--threads", str(n)] + extra, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"calibration failed: {(r.stdout + r.stderr)[-800:]}")
        print(f"calibrated {n} thread(s) in {time.time() - t0:.1f} s{' (' + extra[0] + ')' if extra else ''}: "
              f"{r.stderr.strip().splitlines()[-1]}", flush=True)


def train(tag, sets):
    """One run of the plan: (tokens/s over the timed steps, the fastest 8-step window) or the error."""
    d = os.path.join(work, tag.replace(" ", "_"))
    cfg = os.path.join(d, "project.yaml")
    all_sets = sets + common + [f"log.db={os.path.join(d, 'runs.db')}"]
    if os.path.exists(os.path.join(d, "runs.db")):
        os.remove(os.path.join(d, "runs.db"))
    r = subprocess.run([tess, "train", cfg] + sets_args(all_sets), capture_output=True, text=True, cwd=d)
    if r.returncode:
        return None, None, (r.stdout + r.stderr)[-800:]
    tokens = first[tag]["tokens_per_step"]
    db = sqlite3.connect(os.path.join(d, "runs.db"))
    run = db.execute("select max(id) from runs").fetchone()[0]
    ends = dict(db.execute("select step, wall_time from metrics where run_id=? and name='train/loss' and rank=0",
                           (run,)).fetchall())
    db.close()
    last = max(ends)
    timed = [ends[k] for k in sorted(ends) if k >= warm]
    win = min(8, len(timed) - 1)
    return (tokens * (last - warm) / (ends[last] - ends[warm]),
            tokens * win / min(b - a for a, b in zip(timed, timed[win:])), None)


if "--no-calibrate" not in sys.argv:
    calibrate([])
# the runs in rounds (every plan once, then again): a slow spell on a shared host costs one round
# of a plan, not all its repeats
runs = {tag: [] for tag in plans}
windows = {tag: [] for tag in plans}
failed = {}
for k in range(repeat):
    for tag, (_, sets) in plans.items():
        if tag in failed:
            continue
        tok, window, err = train(tag, sets)
        if err:
            failed[tag] = err
            print(tag, "FAILED", err, flush=True)
            continue
        runs[tag].append(tok)
        windows[tag].append(window)
        print(f"  round {k + 1}: {tag} {tok:,.0f} tok/s (load {os.getloadavg()[0]:.1f})", flush=True)
# ... and the calibration again after them, each op the faster of the two sweeps
if "--no-calibrate" not in sys.argv and repeat > 1:
    calibrate(["--keep-faster"])

res = {tag: {"error": err} for tag, err in failed.items()}
print(f"\n{'plan':<26} {'world':>5} {'measured tok/s':>14} {'predicted':>10} {'error':>7}   "
      f"{'best 8 steps':>10} {'error':>7}   "
      f"predicted rank 0 (ms): gemm attention other optimizer comm", flush=True)
for tag, (proj, sets) in plans.items():
    if tag in failed:
        continue
    d = os.path.join(work, tag.replace(" ", "_"))
    p = plan_json(os.path.join(d, "project.yaml"), sets + common + [f"log.db={os.path.join(d, 'runs.db')}"])
    measured, window = max(runs[tag]), max(windows[tag])
    pred = p["tokens_per_s"]
    r0 = p["ranks"][0]
    parts = r0["compute_parts_s"]
    res[tag] = {"sets": sets, "world": p["world"], "measured_tok_per_s": measured, "predicted_tok_per_s": pred,
                "error": pred / measured - 1, "step_model": p["step_model"], "step_model_note": p["step_model_note"],
                "predicted_step_s": p["step_s"], "measured_step_s": p["tokens_per_step"] / measured,
                "predicted_parts_s": parts, "comm_s": r0["comm_s"],
                "runs_tok_per_s": runs[tag], "best_window_tok_per_s": window, "best_window_error": pred / window - 1}
    print(f"{tag:<26} {p['world']:>5} {measured:>14,.0f} {pred:>10,.0f} {100 * (pred / measured - 1):>+6.1f}%   "
          f"{window:>10,.0f} {100 * (pred / window - 1):>+6.1f}%   "
          f"{parts['gemm'] * 1e3:.1f} {parts['attention'] * 1e3:.1f} {parts['other_ops'] * 1e3:.1f} "
          f"{parts['optimizer'] * 1e3:.1f} {r0['comm_s'] * 1e3:.1f}   ({p['step_model']})", flush=True)
errs = [abs(v["error"]) for v in res.values() if isinstance(v.get("error"), float)]
if errs:
    print(f"worst |error| {100 * max(errs):.1f}% over {len(errs)} plans (target 15%); fastest 8-step windows: "
          f"{100 * max(abs(v['best_window_error']) for v in res.values() if 'best_window_error' in v):.1f}%")
json.dump(res, open(os.path.join(work, "step_time_cpu.json"), "w"), indent=1)
print(f"results: {os.path.join(work, 'step_time_cpu.json')}")
