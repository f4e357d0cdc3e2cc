#!/usr/bin/env bash
# On the GPU machine (carry .gpudeps from scripts/gpu-pack.sh), what docs/benchmarks.md's "Each GEMM
# shape runs the fastest of cuBLASLt's candidates" reports: build, the GEMM tests, Qwen2.5-0.5B and
# Llama-3.2-1B with TESSERA_GEMM_TUNING=off and on (one run each, no peer), all of cuda_ops_test,
# then both models against the peer. The host's choices go to $OUT/devices.
set -uo pipefail
source scripts/gpu-env.sh >/dev/null
export TESSERA_DEVICES_DIR="$OUT"/devices
mkdir -p "$OUT"/devices "$OUT"/tp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
T() { echo "t=$(( $(date +%s)-t0 ))"; }
gpu_build "$PWD"/build-gpu "cli;gpu;cuda_ops" "$OUT" tessera cuda_ops_test || exit 1
T
timeout 60 build-gpu/bin/cuda_ops_test --gtest_filter="*Matmul*:*Gemm*:*Linear*" >"$OUT"/cuda_ops.log 2>&1; echo "cuda_ops rc=$?"
grep -E "FAILED|PASSED|Failure" "$OUT"/cuda_ops.log | head -20
ls "$OUT"/devices; head -3 "$OUT"/devices/* 2>/dev/null; rm -f "$OUT"/devices/*
T
LB=(python3 bench/llama_throughput.py --tessera build-gpu/bin/tessera --anchor .gpudeps/anchors/torch_llama_bench.py --out "$OUT"/tp)
TESSERA_GEMM_TUNING=off timeout 45 "${LB[@]}" --models qwen2.5-0.5b:8 --no-anchor 2>&1 | tee -a "$OUT"/runs.log | tail -3; T
timeout 45 "${LB[@]}" --models qwen2.5-0.5b:8 --no-anchor 2>&1 | tee -a "$OUT"/runs.log | tail -3; T
TESSERA_GEMM_TUNING=off timeout 45 "${LB[@]}" --models llama-3.2-1b:8 --no-anchor 2>&1 | tee -a "$OUT"/runs.log | tail -3; T
timeout 45 "${LB[@]}" --models llama-3.2-1b:8 --no-anchor 2>&1 | tee -a "$OUT"/runs.log | tail -3; T
wc -l "$OUT"/devices/*
timeout 100 build-gpu/bin/cuda_ops_test >"$OUT"/cuda_ops_all.log 2>&1; echo "cuda_ops all rc=$?"; grep -E "FAILED|PASSED" "$OUT"/cuda_ops_all.log | head; T
# the peer in the same command (choices already cached above)
timeout 300 "${LB[@]}" --models qwen2.5-0.5b:8,llama-3.2-1b:8 2>&1 | tee "$OUT"/peer.log | tail -8; T
