#!/usr/bin/env bash
# setup.sh: install what Tessera needs on Debian 12 (idempotent), then fill the data cache.
#   scripts/setup.sh            build + test dependencies and data
#   scripts/setup.sh --no-data  packages only
# Installs missing Debian packages with apt-get (as root, or through sudo); offline, it lists
# exactly which packages are missing and exits non-zero.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

# Debian packages: toolchain (the sanitizer builds: clang with its sanitizer runtimes and OpenMP,
# linked by lld), engine libraries, test reference, data, studio, packaging (lintian, dpkg-dev:
# scripts/package.sh and tests/package).
packages=(
  build-essential cmake ninja-build ccache pkg-config git lld clang libclang-rt-dev libomp-dev
  libyaml-cpp-dev libsqlite3-dev sqlite3 libopenblas-dev zlib1g-dev nlohmann-json3-dev libgloo-dev
  libpcre2-dev libicu-dev
  libgtest-dev libgmock-dev python3 python3-torch python3-numpy
  dataset-fashion-mnist
  qt6-base-dev libqcustomplot-dev libqcustomplot2.1-qt6 xvfb xauth
  openssh-client openssh-server iproute2
  lintian dpkg-dev
)
# node and npm fetch the npm data packages and run the BPE reference; any install of them will do.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${#missing[@]} Debian package(s): ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
      echo "setup: not root and no sudo; install these yourself: apt-get install ${missing[*]}" >&2
      exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! { "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >/tmp/tessera-setup-apt.log 2>&1; then
    echo "setup: apt-get failed (offline?). Missing packages: ${missing[*]}" >&2
    tail -n 5 /tmp/tessera-setup-apt.log >&2
    exit 1
  fi
else
  echo "setup: all Debian packages present"
fi

if [[ "${1:-}" != "--no-data" ]]; then
  bash "$here/fetch-data.sh"
fi
