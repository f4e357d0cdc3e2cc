#!/usr/bin/env bash
# gpu-check.sh: on a GPU machine (the H200 box), build Tessera with CUDA, run the whole `gpu`
# CTest label and the GPT-2 throughput benchmark, and print one table. Results go to $OUT (or
# ./gpu-results). Needs .gpudeps next to the tree: scripts/gpu-pack.sh fills it here (the Debian
# libraries of ../shared/gpu-machine/README.md, ICU, the data cache and the peers' scripts).
#   scripts/gpu-check.sh [--gpus=1|2] [--no-build] [--tests-only|--bench-only] [--prebuilt=DIR]
#                        [--sweep] [--sizes] [--llama]
# --prebuilt=DIR runs binaries built elsewhere (tessera and the gpu test executables in DIR)
# instead of building here. What a session on the device usually wants as well, in the same
# command (the card's figures are only comparable within one):
#   --sweep  first, bench/op_sweep's per-op costs of this card into $out/<card>_ops.json (an H200's
#            replaces resources/devices/h200_ops.json; ~35 s)
#   --sizes  the GPT-2 benchmark at all four sizes (124M and medium at micro-batch 16, large and xl
#            at 8), each against its torch.compile peer, instead of 124M alone
#   --llama  bench/llama_throughput.py's goals (SmolLM-135M, Qwen2.5-0.5B, Llama-3.2-1B) against
#            transformers + torch.compile
# The benchmarks' own files go under $out/bench (the device returns a few files at most: their
# tables are printed).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-$root/gpu-results}"; mkdir -p "$out"
gpus=1; build=1; tests=1; bench=1; prebuilt=""; filter="${GTEST_FILTER:-*}"
sweep=0; sizes=0; llama=0
for a in "$@"; do case "$a" in
  --gpus=*) gpus="${a#*=}";; --no-build) build=0;; --tests-only) bench=0;; --bench-only) tests=0;;
  --prebuilt=*) prebuilt="${a#*=}"; build=0;;
  --sweep) sweep=1;; --sizes) sizes=1;; --llama) llama=1;;
  *) echo "gpu-check.sh: unknown argument '$a'" >&2; exit 2;;
esac; done
source "$root/scripts/gpu-env.sh"
bdir="${TESSERA_BUILD_DIR:-$root/build-gpu}"
bin="$bdir/bin"
[[ -n "$prebuilt" ]] && bin="$prebuilt"
export TESSERA_BIN_DIR="$bin" TESSERA_TESTS_DIR="$root/tests"
if ((build)); then
  targets=(tessera cuda_ops_test cuda_attention_test gpu_train_test)
  ((sweep)) && targets+=(op_sweep)
  gpu_build "$bdir" "cuda_ops;cuda_attention;gpu" "$out" "${targets[@]}" || exit 1
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpus.txt"
status=0
if ((sweep)); then
  card="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 |
          grep -oE '[A-Z][0-9]{2,}' | head -1 | tr '[:upper:]' '[:lower:]' || true)"  # "NVIDIA H200" -> h200
  "$bin/op_sweep" "$out/${card:-gpu}_ops.json" >"$out/op_sweep.log" 2>&1 || status=1
  tail -1 "$out/op_sweep.log"
fi
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
  if ((sizes)); then
    for m in gpt2:16 gpt2-medium:16 gpt2-large:8 gpt2-xl:8; do
      mkdir -p "$out/bench/${m%%:*}"
      python3 "$root/bench/gpt2_throughput.py" --tessera "$bin/tessera" \
        --anchor "$root/.gpudeps/anchors/torch_gpt2_bench.py" --model "${m%%:*}" --B "${m##*:}" \
        --only "tessera 1 GPU,torch.compile 1 GPU" --out "$out/bench/${m%%:*}" 2>&1 |
        grep -E "^(tessera|torch)|FAILED" || status=1
    done
  else
    python3 "$root/bench/gpt2_throughput.py" --tessera "$bin/tessera" \
      --anchor "$root/.gpudeps/anchors/torch_gpt2_bench.py" --gpus "$gpus" --out "$out" 2>&1 | tee "$out/bench-${gpus}gpu.log" || status=1
  fi
  if ((llama)); then
    mkdir -p "$out/bench/llama"
    python3 "$root/bench/llama_throughput.py" --tessera "$bin/tessera" \
      --anchor "$root/.gpudeps/anchors/torch_llama_bench.py" \
      --models smollm-135m:16,qwen2.5-0.5b:8,llama-3.2-1b:8 --out "$out/bench/llama" 2>&1 |
      tail -8 || status=1
  fi
fi
exit $status
