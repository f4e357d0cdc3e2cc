#!/usr/bin/env bash
# On the GPU machine: where a training step's kernel time goes. Trains PRESET (seq as the preset
# has it, bf16, random tokens) at micro-batch B for STEPS steps under Nsight Systems (CUDA trace
# only), exports the trace to SQLite and prints bench/gpu_busy.py's busy share and per-kernel table
# over the second half of the steps (past the warm-up and the GEMM choice's timing calls).
#   bench/kernel_profile.sh TESSERA PRESET B [STEPS]      e.g. build-gpu/bin/tessera gpt2-xl 8 24
# The trace and its export stay in $OUT (or a temporary folder). nsys is looked for on PATH, under
# /opt/nvidia/nsight-systems and inside Nsight Compute (where the H200 machine has it); its SQLite
# export needs libdw.so.1, which scripts/gpu-pack.sh carries (source scripts/gpu-env.sh first).
set -euo pipefail
tess=$(realpath "${1:?usage: kernel_profile.sh TESSERA PRESET B [STEPS]}")
preset=${2:?usage: kernel_profile.sh TESSERA PRESET B [STEPS]}
micro=${3:?usage: kernel_profile.sh TESSERA PRESET B [STEPS]}
steps=${4:-24}
here="$(cd "$(dirname "$0")" && pwd)"
nsys=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys \
         /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1 || true)
[[ -n "$nsys" ]] || { echo "kernel_profile: no nsys found" >&2; exit 1; }
work="${OUT:-$(mktemp -d)}/profile_${preset}_b${micro}"
mkdir -p "$work"
python3 - "$here" "$work" "$preset" "$micro" "$steps" <<'PY'
import os, sys
here, work, preset, micro, steps = sys.argv[1:]
sys.path.insert(0, here)
from throughput_runs import random_shard
random_shard(os.path.join(work, "random.bin"), 50257)
with open(os.path.join(work, "project.yaml"), "w") as f:
    f.write(f"""name: profile
model: {{preset: {preset}}}
data: {{train: {work}/random.bin}}
train: {{steps: {steps}, micro_batch: {micro}, lr: 6.0e-4, warmup_steps: 10, eval_every: 0,
        grad_clip: 1.0}}
runtime: {{device: cuda, precision: bf16}}
log: {{db: runs.db, every: 1}}
""")
PY
cd "$work"
"$nsys" profile --trace=cuda -f true -o trace "$tess" train project.yaml >train.log 2>&1 ||
  { tail -20 train.log; exit 1; }
"$nsys" export --type sqlite -f true -o trace.sqlite trace.nsys-rep >export.log 2>&1 ||
  { tail -20 export.log; exit 1; }
python3 "$here/gpu_busy.py" trace.sqlite --kernels
