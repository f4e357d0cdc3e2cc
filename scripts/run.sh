#!/usr/bin/env bash
# run.sh: README's main job. Installs what is missing, builds, then
#  - with a display: opens the studio on projects/quickstart (Model and Plan pages);
#  - headless (no DISPLAY/WAYLAND_DISPLAY, or --headless): trains projects/quickstart from the CLI
#    (a tiny GPT on the Brown corpus, on this CPU), shows the stored run and a sample of text, and
#    renders the studio's pages for the project to build/screenshots/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
headless=0
[[ "${1:-}" == "--headless" ]] && { headless=1; shift; }
[[ -z "${DISPLAY:-}" && -z "${WAYLAND_DISPLAY:-}" ]] && headless=1
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
bin="${TESSERA_BUILD_DIR:-$root/build}/bin"
project="$root/projects/quickstart"
if ((!headless)) && [[ -x "$bin/tessera-studio" ]]; then
  exec "$bin/tessera-studio" --launch "$project"  # opens quickstart and starts a live run
fi
"$bin/tessera" train "$project/project.yaml" "$@"
"$bin/tessera" runs list --db "$project/runs.db"
echo
echo "A sample from the trained model:"
"$bin/tessera" sample --checkpoint "$project/checkpoints" --prompt "The " --tokens 300 --seed 1
if [[ -x "$bin/tessera-studio" ]]; then
  QT_QPA_PLATFORM=offscreen "$bin/tessera-studio" --screenshot "$root/build/screenshots" "$project" >/dev/null &&
    echo "studio pages rendered to $root/build/screenshots/"
fi
