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
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [[ -d "$root/.gpudeps" ]]; then
  source <(bash "$root/.gpudeps/unpack-deps.sh" "$root/.gpudeps" "$root/.gpudeps/root")
  if [[ -f "$root/.gpudeps/data.tar.xz" && ! -d "$root/.gpudeps/data" ]]; then
    tar -xJf "$root/.gpudeps/data.tar.xz" -C "$root/.gpudeps"
  fi
  [[ -d "$root/.gpudeps/data" ]] && export TESSERA_DATA_DIR="$root/.gpudeps/data"
fi
bdir="${TESSERA_BUILD_DIR:-$root/build-gpu}"
bin="$bdir/bin"
[[ -n "$prebuilt" ]] && bin="$prebuilt"
export TESSERA_BIN_DIR="$bin" TESSERA_TESTS_DIR="$root/tests"
if ((build)); then
  cmake -S "$root" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_CUDA=ON -DTESSERA_STUDIO=OFF \
        -DTESSERA_TEST_DIRS="cuda_ops;cuda_attention;gpu" >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
  cmake --build "$bdir" -j "$(nproc)" --target tessera cuda_ops_test cuda_attention_test gpu_train_test \
        >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head -30; exit 1; }
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
