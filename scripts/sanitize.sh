#!/usr/bin/env bash
# sanitize.sh (issue 21, "CI keeps it"): the tests under the sanitizers, on CPU (CUDA, the studio
# and the benchmarks are not built: the GPU code cannot run here and the studio has its own tests).
#   scripts/sanitize.sh asan   AddressSanitizer + UndefinedBehaviorSanitizer (CMake preset
#                              asan-ubsan, build-asan-ubsan/): CTest labels unit and multirank
#   scripts/sanitize.sh tsan   ThreadSanitizer (preset tsan, build-tsan/): every test in
#                              tests/core, tests/launch, tests/parallel and tests/store (the
#                              thread pool, the launcher, the communicator, the run store and
#                              telemetry)
#   scripts/sanitize.sh        both: what .ci/run runs
# The presets build with clang (Debian 12: clang 14, its sanitizer runtimes, libomp), -g1 (line
# tables: enough for the reports' stack traces) and lld; the engine at -O1, the test files at -O0
# (TESSERA_TEST_CXX_FLAGS, -O0 in every build: tests/CMakeLists.txt).
# Measured from empty build folders, ccache off, on the quiet 2-core machine (2026-12-04):
#   asan: build 298 s (225 steps; with GCC 525 s, and 835 s before -g1 and lld); the unit and
#         multirank labels 571 s, 496 tests, all pass, before the DevicePool's nodes came from a
#         pool of their own (0d39e3d): the planner's six searches then took 290 s of test time,
#         207 s after (106 s of wall clock side by side). The multirank label runs its tests one
#         at a time (RUN_SERIAL: ranks need the cores): 262 s for 152 tests (two halves side by
#         side took 251 s: the ranks already use both cores)
#   tsan: build 182 s (164 steps; with GCC ~225 s), tests 19 s: 126 tests in tests/core,
#         tests/launch, tests/parallel and tests/store, all pass (tests/parallel's ranks are
#         forked while the test process is single-threaded: its TCP store serves from a process
#         of its own, comm_test.cpp's StoreProcess)
# Only the test folders those labels and tests live in are configured (TESSERA_TEST_DIRS), which
# keeps Qt page tests and GPU tests out of the build. Any report fails the test that caused it
# (halt_on_error / -fno-sanitize-recover), so the exit status is ctest's.
#   TESSERA_SANITIZE_LABELS  (asan) CTest label regex, default 'unit|multirank'
#   TESSERA_JOBS             build and ctest parallelism, default nproc
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
jobs="${TESSERA_JOBS:-$(nproc)}"
what="${1:-all}"

# a rank's stack trace names the line; a leak or a race in a child process fails its test
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/scripts/sanitize/lsan.supp:print_suppressions=0}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/scripts/sanitize/tsan.supp}"

# A build folder configured with another compiler (before the presets named clang) starts afresh:
# CMake cannot switch a configured folder's compiler.
fresh_if_not_clang() {
  if [[ -f "$1/CMakeCache.txt" ]] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' "$1/CMakeCache.txt"; then
    rm -rf "$1"
  fi
}
fresh_if_not_clang build-asan-ubsan
fresh_if_not_clang build-tsan

run_asan() {
  local t0=$SECONDS
  cmake --preset asan-ubsan \
    "-DTESSERA_TEST_DIRS=cli;config;core;data;equivalence;failure;io;launch;model;parallel;pipeline;plan;run_control;store" \
    >/dev/null
  cmake --build build-asan-ubsan -j "$jobs"
  local t1=$SECONDS
  (cd build-asan-ubsan && ctest --output-on-failure -j "$jobs" --timeout 1800 \
     -L "${TESSERA_SANITIZE_LABELS:-unit|multirank}")
  echo "sanitize asan: build $((t1 - t0)) s, tests $((SECONDS - t1)) s"
}

run_tsan() {
  local t0=$SECONDS
  cmake --preset tsan "-DTESSERA_TEST_DIRS=core;launch;parallel;store" >/dev/null
  cmake --build build-tsan -j "$jobs"
  local t1=$SECONDS
  # OpenMP's and OpenBLAS's own threads are not instrumented (libgomp, libopenblas): one thread
  # each, so what TSan sees is Tessera's threads (launcher, communicator, store writer)
  (cd build-tsan && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
     ctest --output-on-failure -j "$jobs" --timeout 1800)
  echo "sanitize tsan: build $((t1 - t0)) s, tests $((SECONDS - t1)) s"
}

case "$what" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan; run_tsan ;;
  *) echo "usage: scripts/sanitize.sh [asan|tsan|all]" >&2; exit 2 ;;
esac
