#!/usr/bin/env bash
# gpu-check.sh: on a GPU machine (the H200 box), build Tessera with CUDA, run the whole `gpu`
# CTest label and the GPT-2 throughput benchmark, and print one table. Results go to $OUT (or
# ./gpu-results). Needs .gpudeps next to the tree: scripts/gpu-pack.sh fills it here (the Debian
# libraries of ../shared/gpu-machine/README.md, ICU, the data cache and the peers' scripts).
#   scripts/gpu-check.sh [--gpus=1|2] [--no-build] [--tests-only|--bench-only] [--prebuilt=DIR]
# --prebuilt=DIR runs binaries built elsewhere (tessera and the gpu test executables in DIR)
# instead of building here.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-$root/gpu-results}"; mkdir -p "$out"
gpus=1; build=1; tests=1; bench=1; prebuilt=""; filter="${GTEST_FILTER:-*}"
for a in "$@"; do case "$a" in
  --gpus=*) gpus="${a#*=}";; --no-build) build=0;; --tests-only) bench=0;; --bench-only) tests=0;;
  --prebuilt=*) prebuilt="${a#*=}"; build=0;;
esac; done
source "$root/scripts/gpu-env.sh"
bdir="${TESSERA_BUILD_DIR:-$root/build-gpu}"
bin="$bdir/bin"
[[ -n "$prebuilt" ]] && bin="$prebuilt"
export TESSERA_BIN_DIR="$bin" TESSERA_TESTS_DIR="$root/tests"
if ((build)); then
  gpu_build "$bdir" "cuda_ops;cuda_attention;gpu" "$out" tessera cuda_ops_test cuda_attention_test \
            gpu_train_test || exit 1
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpus.txt"
status=0
if ((tests)); then
  if [[ -n "$prebuilt" ]]; then
    for t in ${GPU_TESTS:-cuda_ops_test cuda_attention_test gpu_train_test}; do
      rc=0
      "$bin/$t" --gtest_filter="$filter" >"$out/$t.log" 2>&1 || rc=$?
      grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|step .*fp32|transformers|error" "$out/$t.log" | head -80
      ((rc == 0)) || status=1
    done
  else
    (cd "$bdir" && ctest -L gpu --output-on-failure --timeout 900 2>&1 | tee "$out/gpu-tests.log") || status=1
  fi
fi
if ((bench)); then
  python3 "$root/bench/gpt2_throughput.py" --tessera "$bin/tessera" \
    --anchor "$root/.gpudeps/anchors/torch_gpt2_bench.py" --gpus "$gpus" --out "$out" 2>&1 | tee "$out/bench-${gpus}gpu.log" || status=1
fi
exit $status
