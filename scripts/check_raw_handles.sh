#!/usr/bin/env bash
# Raw handle-ending calls only inside the owning types (issue 21, STYLE.md: "Every C handle has a
# std::unique_ptr deleter; raw *_destroy/*_finalize calls appear only inside deleters").
#
# Scans engine/, app/, ui/ and bench/ (C++ and CUDA sources; comments after // are ignored) for
# calls that end a C handle's life — cudaStreamDestroy, cudaEventDestroy, cudaFree*, NCCL's
# destroy/abort/free/deregister, cuBLASLt *Destroy, close, fclose, munmap, freeaddrinfo, SQLite's
# close/finalize, gzclose, pcre2_*_free, dlclose, ... — and fails, listing them, when one appears
# outside the files below. A new kind of handle gets its owning type in one of these files (or a
# new entry here, with its reason). Tests are not scanned: they may poke at raw handles.
#
# Usage: scripts/check_raw_handles.sh [repo root]     CTest: raw_handles_check (label unit)
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"

allowed=(
  engine/kernels/cuda/cuda_handles.cuh  # streams, events, device/pinned/stream-ordered buffers, cuBLASLt descriptors
  engine/kernels/cuda/device.cu         # the stream-ordered allocator's own free hook (Tensor storage frees through it)
  engine/parallel/nccl_handles.h        # NCCL communicators (destroy, abort), ncclMemAlloc memory, symmetric windows
  engine/core/unique_fd.h               # file descriptors, sockets, pipes, FILE*, addrinfo lists
  engine/io/file_util.cpp               # MappedFile's munmap deleter
  engine/store/run_store.cpp            # SQLite connection and statement deleters (declared in run_store.h)
  engine/data/hf_tokenizer.cpp          # PCRE2 code and match-data deleters
  engine/data/fashion_mnist.cpp         # gzFile deleter
  engine/parallel/shm_group.cpp         # the CPU groups' shared-memory segment: Mapping (munmap), SegmentName (shm_unlink)
)

calls='cudaStreamDestroy|cudaEventDestroy|cudaFree|cudaFreeHost|cudaFreeAsync|cudaFreeArray|'
calls+='cudaHostUnregister|cudaGraphDestroy|cudaGraphExecDestroy|cudaIpcCloseMemHandle|'
calls+='ncclCommDestroy|ncclCommAbort|ncclCommFinalize|ncclMemFree|ncclCommWindowDeregister|'
calls+='ncclCommDeregister|cublasLtDestroy|cublasDestroy|\w*(MatmulDesc|MatrixLayout|MatmulPreference)Destroy|'
calls+='fclose|pclose|closedir|munmap|freeaddrinfo|sqlite3_close|sqlite3_close_v2|sqlite3_finalize|'
calls+='gzclose|pcre2_\w+_free|dlclose|shm_unlink'
# close( as a function, not a method (QFile::close, std::ofstream::close are fine)
regex="(\\b($calls)|(?<![\\w.>])close)\\s*\\("

is_allowed() {
  local f
  for f in "${allowed[@]}"; do [[ "$1" == "$f" ]] && return 0; done
  return 1
}

bad=0
while IFS= read -r hit; do
  file="${hit%%:*}"
  rest="${hit#*:}"
  code="${rest#*:}"
  code="${code%%//*}"  # drop a trailing comment (a call only mentioned there is no call)
  grep -qP "$regex" <<<"$code" || continue
  is_allowed "$file" && continue
  echo "raw handle call outside its owning type: $hit"
  bad=1
done < <(grep -rnP "$regex" engine app ui bench \
           --include='*.cpp' --include='*.h' --include='*.hpp' --include='*.cu' --include='*.cuh' || true)

if ((bad)); then
  echo "Use the owning types (docs/ARCHITECTURE.md, \"Handles\"), or add the file to the list in $0 with its reason."
  exit 1
fi
echo "raw handle calls: only in the ${#allowed[@]} owning files"
