#!/usr/bin/env bash
# run.sh: README's main job. Installs what is missing, builds, and trains projects/quickstart
# (a tiny GPT on the Brown corpus, on this CPU), then shows the stored run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
bin="${TESSERA_BUILD_DIR:-$root/build}/bin"
project="$root/projects/quickstart"
"$bin/tessera" train "$project/project.yaml" "$@"
"$bin/tessera" runs list --db "$project/runs.db"
echo
echo "A sample from the trained model:"
"$bin/tessera" sample --checkpoint "$project/checkpoints" --prompt "The " --tokens 300 --seed 1
