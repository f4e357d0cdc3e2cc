#!/usr/bin/env bash
# Formatting (issue 21): C++ and CUDA files must be as clang-format writes them with the repo's
# .clang-format. The tree was reformatted once (8b1e57a, scripts/format_tree.sh); .ci/run checks
# every tracked file (--all).
#
# Usage: scripts/check_format.sh --all      every tracked C++/CUDA file (.ci/run; also:
#                                           TESSERA_FORMAT_ALL=1): ~30 s on 2 cores, in parallel
#        scripts/check_format.sh [BASE]     only the files added since BASE
#   BASE: default $TESSERA_FORMAT_BASE, else the merge-base with main (or origin/main), else (on
#   main itself) HEAD~1.
# The output depends on clang-format's version: CI and scripts/format_tree.sh use Debian 12's
# clang-format (14); another version may want other changes.
# Exit 1 listing each unformatted file and the diff clang-format wants; exit 0 (saying so) where
# clang-format is not installed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if ! command -v clang-format >/dev/null; then
  echo "check_format: clang-format is not installed (Debian: clang-format): skipped"
  exit 0
fi
all="${TESSERA_FORMAT_ALL:-0}"
if [[ "${1:-}" == --all ]]; then all=1; shift; fi
if [[ "$all" == 1 ]]; then
  mapfile -t files < <(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh')
  what="every tracked C++/CUDA file"
else
  base="${1:-${TESSERA_FORMAT_BASE:-}}"
  if [[ -z "$base" ]]; then
    base="$(git merge-base HEAD main 2>/dev/null || git merge-base HEAD origin/main 2>/dev/null || true)"
    # on main itself (or with no main): the last commit's files
    if [[ -z "$base" || "$base" == "$(git rev-parse HEAD)" ]]; then base="$(git rev-parse HEAD~1)"; fi
  fi
  # added since BASE, committed or not, plus untracked files git does not ignore
  mapfile -t files < <({ git diff --name-only --diff-filter=A "$base" -- '*.cpp' '*.h' '*.cu' '*.cuh'
                         git ls-files --others --exclude-standard -- '*.cpp' '*.h' '*.cu' '*.cuh'; } | sort -u)
  what="the C++/CUDA files added since $(git rev-parse --short "$base")"
fi
present=()
for f in "${files[@]}"; do [[ -f "$f" ]] && present+=("$f"); done
# every core checks a share (clang-format --dry-run --Werror names each file it would change),
# then each such file's diff
mapfile -t unformatted < <(
  if ((${#present[@]})); then
    printf '%s\0' "${present[@]}" |
      xargs -0 -n 16 -P "$(nproc)" clang-format --dry-run --Werror --style=file 2>&1 |
      sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u
  fi)
bad=0
for f in "${unformatted[@]}"; do
  clang-format --style=file "$f" | diff -u --label "$f" --label "$f (clang-format)" "$f" - || true
  bad=$((bad + 1))
done
if ((bad > 0)); then
  echo "check_format: $bad of ${#files[@]} file(s) not formatted ($what); fix with: clang-format -i FILE" >&2
  exit 1
fi
echo "check_format: ${#files[@]} file(s) formatted ($what)"
