#!/usr/bin/env bash
# build.sh: configure and build Tessera into build/ (Release, Ninja, ccache when present).
# Extra arguments go to the CMake configure step (e.g. -DTESSERA_CUDA=OFF).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TESSERA_BUILD_DIR:-$root/build}"
jobs="${TESSERA_JOBS:-$(nproc)}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" "$@" >/dev/null
cmake --build "$build" -j "$jobs"
echo "build: binaries in $build/bin"
