#!/usr/bin/env bash
# package.sh: build the CPU-only tree (TESSERA_CUDA=OFF, no tests/benchmarks) and make the Debian
# package and a .tar.gz with CPack, then run lintian on the .deb when it is installed.
#   scripts/package.sh [BUILD_DIR]      (default: build-package; packages land in BUILD_DIR)
# The engine links CUDA libraries when built with CUDA; the package is the CPU build so it
# installs on any amd64 Debian 12 machine (dependencies computed by dpkg-shlibdeps).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build-package}"
jobs="${TESSERA_JOBS:-$(nproc)}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_CUDA=OFF \
      -DTESSERA_TESTS=OFF -DTESSERA_BENCH=OFF >/dev/null
cmake --build "$build" -j "$jobs" | tail -n 1
rm -f "$build"/tessera_*.deb "$build"/tessera-*.tar.gz
(cd "$build" && cpack -G "DEB;TGZ" >/dev/null)
deb="$(ls "$build"/tessera_*.deb)"
if command -v lintian >/dev/null 2>&1; then
  # E: lines fail the script; W:/I: are shown
  if lintian "$deb" 2>/dev/null | tee /dev/stderr | grep -q '^E:'; then
    echo "package.sh: lintian reported errors for $deb" >&2
    exit 1
  fi
else
  echo "package.sh: lintian not installed (apt-get install lintian): not checked" >&2
fi
echo "package.sh: $deb"
ls "$build"/tessera-*.tar.gz
