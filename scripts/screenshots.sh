#!/usr/bin/env bash
# Renders every studio page for every example project to build/screenshots/<project>-<page>.png
# (light theme, and <project>-<page>-dark via a second pass into build/screenshots/dark).
# Usage: scripts/screenshots.sh [BUILD_DIR]   (default: build; the binary is BUILD_DIR/bin)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
studio="$build/bin/tessera-studio"
out="$root/build/screenshots"
[[ -x "$studio" ]] || { echo "screenshots.sh: $studio not built (cmake --build $build --target tessera-studio)" >&2; exit 2; }
mkdir -p "$out" "$out/dark"

run() {
  if [[ -z "${DISPLAY:-}" && -z "${WAYLAND_DISPLAY:-}" && -z "${QT_QPA_PLATFORM:-}" ]]; then
    if command -v xvfb-run >/dev/null; then xvfb-run -a -s "-screen 0 1600x1000x24" "$@"; return; fi
    QT_QPA_PLATFORM=offscreen "$@"; return
  fi
  "$@"
}

status=0
for project in "$root"/projects/*/; do
  [[ -f "$project/project.yaml" ]] || continue
  run "$studio" --screenshot "$out" "$project" >/dev/null || status=$?
  run "$studio" --screenshot "$out/dark" --dark "$project" >/dev/null || status=$?
done
ls -1 "$out"/*.png "$out"/dark/*.png
exit $status
