#!/usr/bin/env bash
# test.sh: install what is missing, build, and run every test (README's test command).
#   TESSERA_TEST_LABELS=unit scripts/test.sh   only some CTest labels (regex)
# GPU tests (label gpu) skip cleanly where no GPU is present; scripts/gpu-check.sh runs them on a
# GPU machine.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
cd "${TESSERA_BUILD_DIR:-$root/build}"
args=(--output-on-failure -j "${TESSERA_JOBS:-$(nproc)}" --timeout 900)
[[ -n "${TESSERA_TEST_LABELS:-}" ]] && args+=(-L "$TESSERA_TEST_LABELS")
ctest "${args[@]}"
