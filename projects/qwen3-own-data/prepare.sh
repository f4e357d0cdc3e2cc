#!/usr/bin/env bash
# Tokenizes texts/*.txt (your own documents; when the folder is missing, the Brown corpus's first
# 120 documents are written there to start from) with the Qwen3 tokenizer into data/: train.bin,
# val.bin, train.idx and manifest.json. Re-running with unchanged texts does nothing.
#   TESSERA=path/to/tessera bash prepare.sh      (default: tessera on PATH, else build/bin/tessera)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tessera="${TESSERA:-$(command -v tessera || echo "$here/../../build/bin/tessera")}"
cd "$here"
[[ -d texts ]] || "$tessera" data export brown --out texts --documents 120
"$tessera" data prepare --tokenizer qwen3 --input texts --out data --val-fraction 0.05
