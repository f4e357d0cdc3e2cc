#!/usr/bin/env bash
# tidy.sh: clang-tidy over engine/ with the repo's .clang-tidy (issue 21). Every enabled check is
# an error there, so the exit status is non-zero on any finding.
#   scripts/tidy.sh                  every engine/ C++ file (.cu files are not checked: clang-tidy
#                                    would need the CUDA toolchain's clang mode)
#   scripts/tidy.sh --changed [BASE] only engine/ .cpp files changed since BASE (default: the
#                                    merge-base with main, as scripts/check_format.sh)
# Compile commands: $TESSERA_BUILD_DIR/compile_commands.json (default build/, which
# scripts/build.sh writes; CMAKE_EXPORT_COMPILE_COMMANDS is on); where there is none, a CPU-only
# configure into build-tidy/ makes one (configure only, seconds; nothing is compiled).
# Cost (measured on the shared 2-core machine, clang-tidy 14): 7-12 s of CPU per file
# (run_store.cpp 7.0 s, launcher.cpp 7.1 s, trainer.cpp 12.4 s), about 95 files: ~14 min of CPU,
# ~7 min on 2 free cores. Exit 0 (saying so) where clang-tidy is not installed (Debian: clang-tidy).
# State: every engine/ C++ file the CPU build compiles (99) passes (2026-12-02, 255 s on 2 cores),
# so `--changed` in CI only meets findings a change brings.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
jobs="${TESSERA_JOBS:-$(nproc)}"
if ! command -v clang-tidy >/dev/null || ! command -v run-clang-tidy >/dev/null; then
  echo "tidy: clang-tidy / run-clang-tidy is not installed (Debian: clang-tidy): skipped"
  exit 0
fi
build="${TESSERA_BUILD_DIR:-$root/build}"
if [[ ! -f "$build/compile_commands.json" ]]; then
  build="$root/build-tidy"
  cmake -S "$root" -B "$build" -G Ninja -DTESSERA_CUDA=OFF -DTESSERA_STUDIO=OFF -DTESSERA_BENCH=OFF \
    >/dev/null
fi

if [[ "${1:-}" == --changed ]]; then
  base="${2:-${TESSERA_FORMAT_BASE:-}}"
  if [[ -z "$base" ]]; then
    base="$(git merge-base HEAD main 2>/dev/null || git merge-base HEAD origin/main 2>/dev/null || true)"
    if [[ -z "$base" || "$base" == "$(git rev-parse HEAD)" ]]; then base="$(git rev-parse HEAD~1)"; fi
  fi
  mapfile -t files < <({ git diff --name-only --diff-filter=AM "$base" -- 'engine/*.cpp'
                         git ls-files --others --exclude-standard -- 'engine/*.cpp'; } | sort -u)
  what="the engine/ files changed since $(git rev-parse --short "$base")"
else
  mapfile -t files < <(git ls-files -- 'engine/*.cpp')
  what="every engine/ C++ file"
fi
# only files the build compiles (a CUDA-only .cpp is absent from a CPU build's commands)
mapfile -t files < <(python3 - "$build/compile_commands.json" "${files[@]}" <<'PY'
import json, os, sys
known = {os.path.realpath(e["file"]) for e in json.load(open(sys.argv[1]))}
for f in sys.argv[2:]:
    if os.path.realpath(f) in known:
        print(os.path.realpath(f))
PY
)
if ((${#files[@]} == 0)); then
  echo "tidy: no files to check ($what)"
  exit 0
fi
echo "tidy: ${#files[@]} file(s) ($what), $jobs job(s), compile commands from $build"
t0=$SECONDS
status=0
run-clang-tidy -quiet -j "$jobs" -p "$build" "${files[@]}" || status=$?
echo "tidy: $((SECONDS - t0)) s; $([[ $status == 0 ]] && echo clean || echo "FINDINGS (status $status)")"
exit "$status"
