#!/usr/bin/env python3
"""How busy the GPU is over the second half of an Nsight Systems trace (kernels, copies and
memsets; their union over the window), the gaps between them, and the host's CUDA API time.

usage: bench/gpu_busy.py TRACE.sqlite [--kernels [--per NAME]]
(from `nsys profile --trace=cuda -o T tessera train ...` then `nsys export --type sqlite -o
T.sqlite T.nsys-rep`; bench/kernel_profile.sh does both). --kernels adds each kernel's time a
step, largest first, over the second half of the steps: a step is the time between two launches
of the kernel whose name holds NAME (default ce_one_pass, the loss's pass: one launch per
micro-batch, so with gradient accumulation "a step" is a micro-batch), and the window runs from
the middle one of those launches to the last; the busy share and the gaps are then over that
window too (the trace's second half may hold the run's start-up).
"""
import collections, sqlite3, sys

db = sqlite3.connect(sys.argv[1])
spans = {}  # each activity table's (start, end) rows; a table the trace lacks: none
for t in ("KERNEL", "MEMCPY", "MEMSET"):
    try:
        spans[t] = db.execute(f"select start, end from CUPTI_ACTIVITY_KIND_{t}").fetchall()
    except Exception:
        spans[t] = []
iv = sorted(x for rows in spans.values() for x in rows)
t0, t1 = iv[0][0], max(e for s, e in iv)
w0, w1 = t0 + (t1 - t0) * 0.5, t1

kernels = "--kernels" in sys.argv
if kernels:  # the window: the second half of the steps, between launches of the per-step kernel
    per = sys.argv[sys.argv.index("--per") + 1] if "--per" in sys.argv else "ce_one_pass"
    krows = db.execute("select k.start, k.end, s.value from CUPTI_ACTIVITY_KIND_KERNEL k "
                       "join StringIds s on k.shortName = s.id").fetchall()
    marks = sorted(start for start, end, name in krows if per in name)
    if len(marks) < 3:
        sys.exit(f"--kernels: {len(marks)} launches of *{per}* in the trace; at least 3 wanted")
    k = len(marks) // 2
    w0, w1, steps = marks[k], marks[-1], len(marks) - 1 - k

busy = 0; cur_s = cur_e = None; gaps = []
for s, e in iv:
    if e < w0 or s >= w1: continue
    s, e = max(s, w0), min(e, w1)
    if cur_e is None: cur_s, cur_e = s, e; continue
    if s > cur_e:
        busy += cur_e - cur_s; gaps.append(s - cur_e); cur_s, cur_e = s, e
    else: cur_e = max(cur_e, e)
busy += cur_e - cur_s
win = w1 - w0
gaps.sort(reverse=True)
nk = sum(1 for s, e in iv if w0 <= s < w1)
print(f"{sys.argv[1]}: window {win/1e6:.1f} ms, busy {busy/1e6:.1f} ms ({100*busy/win:.1f}%), "
      f"{nk} kernels/copies, gaps {len(gaps)}: sum {sum(gaps)/1e6:.2f} ms, >50us {sum(g for g in gaps if g>50000)/1e6:.2f} ms, "
      f"largest {[round(g/1e3) for g in gaps[:8]]} us")
# per-API host time
try:
    rows = db.execute("select s.value, count(*), sum(r.end-r.start) from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s on r.nameId=s.id where r.start>=? and r.start<? group by s.value order by 3 desc limit 8", (w0, w1 if kernels else 2**62)).fetchall()
    for n, c, t in rows: print(f"   {n}: {c} calls, {t/1e6:.2f} ms")
except Exception as e: print(e)

if kernels:
    total, count = collections.Counter(), collections.Counter()
    for start, end, name in krows:
        if w0 <= start < w1:
            total[name] += end - start
            count[name] += 1
    kernel_sum = sum(total.values())
    print(f"the {steps} steps between launches {k + 1} and {len(marks)} of *{per}*: "
          f"{win / 1e6 / steps:.3f} ms a step, kernels {kernel_sum / 1e6 / steps:.3f} ms")
    for t, what in (("MEMSET", "memsets"), ("MEMCPY", "copies")):
        rows = [(s, e) for s, e in spans[t] if w0 <= s < w1]
        print(f"  {what}: {sum(e - s for s, e in rows) / 1e6 / steps:.3f} ms a step, {len(rows) / steps:.1f} a step")
    print(f"{'ms':>9} {'share':>6} {'launches':>9}  kernel")
    for name, t in total.most_common():
        print(f"{t / 1e6 / steps:9.3f} {100 * t / kernel_sum:5.1f}% {count[name] / steps:9.1f}  {name[:120]}")
