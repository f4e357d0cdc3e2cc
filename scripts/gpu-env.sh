# gpu-env.sh: sourced by the scripts that run on the GPU machine (scripts/gpu-check.sh,
# bench/gemm_choice_check.sh). Sets the NCCL environment the machine needs, puts .gpudeps's
# libraries (scripts/gpu-pack.sh fills it here) on the paths and its data cache in
# TESSERA_DATA_DIR, and defines gpu_build:
#   gpu_build BUILD_DIR "TEST_DIRS" LOG_DIR TARGET...   configure with CUDA, build the targets
# shellcheck shell=bash
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpu_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -d "$gpu_root/.gpudeps" ]]; then
  # shellcheck disable=SC1090  # unpack-deps.sh prints the exports
  source <(bash "$gpu_root/.gpudeps/unpack-deps.sh" "$gpu_root/.gpudeps" "$gpu_root/.gpudeps/root")
  if [[ -f "$gpu_root/.gpudeps/data.tar.xz" && ! -d "$gpu_root/.gpudeps/data" ]]; then
    tar -xJf "$gpu_root/.gpudeps/data.tar.xz" -C "$gpu_root/.gpudeps"
  fi
  [[ -d "$gpu_root/.gpudeps/data" ]] && export TESSERA_DATA_DIR="$gpu_root/.gpudeps/data"
fi

gpu_build() {
  local bdir="$1" dirs="$2" logs="$3"
  shift 3
  cmake -S "$gpu_root" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_CUDA=ON \
        -DTESSERA_STUDIO=OFF -DTESSERA_TEST_DIRS="$dirs" >"$logs/configure.log" 2>&1 ||
    { tail -30 "$logs/configure.log"; return 1; }
  cmake --build "$bdir" -j "$(nproc)" --target "$@" >"$logs/build.log" 2>&1 ||
    { grep -E "error" "$logs/build.log" | head -30; return 1; }
}
