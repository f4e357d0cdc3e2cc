#!/usr/bin/env bash
# sanitize.sh (issue 21, "CI keeps it"): the tests under the sanitizers, on CPU (CUDA, the studio
# and the benchmarks are not built: the GPU code cannot run here and the studio has its own tests).
#   scripts/sanitize.sh asan   AddressSanitizer + UndefinedBehaviorSanitizer (CMake preset
#                              asan-ubsan, build-asan-ubsan/): CTest labels unit and multirank
#   scripts/sanitize.sh tsan   ThreadSanitizer (preset tsan, build-tsan/): every test in
#                              tests/core, tests/launch, tests/parallel and tests/store (the
#                              thread pool, the launcher, the communicator, the run store and
#                              telemetry)
#   scripts/sanitize.sh        both
#   scripts/sanitize.sh ci     the subset .ci/run runs (it fits CI's 30 minutes; the full set
#                              does not): ASan+UBSan over the unit label but for the planner's six
#                              searches (339 of 345 tests), TSan over tests/core and tests/store
# The presets build with clang (Debian 12: clang 14, its sanitizer runtimes, libomp), -g1 (line
# tables: enough for the reports' stack traces) and lld; the engine at -O1, the test files at -O0
# (TESSERA_TEST_CXX_FLAGS: a test file compiles in about half the time at -O0).
# Measured from empty build folders, ccache off, on the quiet 2-core machine (2026-12-04):
#   asan: build 298 s (225 steps; with GCC 525 s, and 835 s before -g1 and lld); the unit and
#         multirank labels 571 s, 496 tests, all pass. The slowest are the planner's searches:
#         PlanRanked.FastestFirstGlobalBatchKeptEachWithAReason 108 s, PlanSmallBatch.TopSuggestion
#         IsNotMicroBatchOneWhenALargerIsFaster 71 s, CliPlan.FitsAnswersEndToEnd 44 s,
#         PlanSuggest.FitsSortedKeepsGlobalBatchAndExplains 33 s; the multirank label runs its
#         tests one at a time (RUN_SERIAL: ranks need the cores): 257 s
#   tsan: build 182 s (164 steps; with GCC ~225 s), tests 19 s: 126 tests in tests/core,
#         tests/launch, tests/parallel and tests/store, all pass (tests/parallel's ranks are
#         forked while the test process is single-threaded: its TCP store serves from a process
#         of its own, comm_test.cpp's StoreProcess)
#   all:  ~17.8 min. ci: asan build ~290 s (no multirank-only folders), 339 tests 160-170 s;
#         tsan build 38 s, 78 tests 8 s: ~8.3 min. Next to CI's other stages (~20 min here) the
#         full set would take CI to ~38 min: CI runs `ci`, and `all` is for before a release.
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

# ci: ASan+UBSan over the unit label but for the planner's six searches (together ~5 min of the
# ~10 the label takes under ASan; they run under ASan in `asan`), TSan over tests/core and
# tests/store. The ASan build leaves out the test folders that hold only multirank tests.
ci_asan_dirs="cli;config;core;data;io;launch;model;parallel;pipeline;plan;store"
ci_asan_skip='PlanRanked\.FastestFirst|PlanSmallBatch\.TopSuggestion|CliPlan\.FitsAnswers|PlanSuggest\.(FitsSorted|SideBySide|TightMemory)'
ci_tsan_targets=(core_sha256_test core_unique_fd_test core_atomic_file_test core_device_pool_test
                 core_parallel_for_test telemetry_test run_store_test store_process_test
                 sqlite_handles_test system_metrics_test run_alerts_test)
run_ci() {
  local t0=$SECONDS
  cmake --preset asan-ubsan "-DTESSERA_TEST_DIRS=$ci_asan_dirs" >/dev/null
  cmake --build build-asan-ubsan -j "$jobs"
  local t1=$SECONDS
  (cd build-asan-ubsan && ctest --output-on-failure -j "$jobs" --timeout 900 -L unit \
     -E "$ci_asan_skip")
  local t2=$SECONDS
  cmake --preset tsan "-DTESSERA_TEST_DIRS=core;store" >/dev/null
  cmake --build build-tsan -j "$jobs" --target "${ci_tsan_targets[@]}"
  local t3=$SECONDS
  (cd build-tsan && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
     ctest --output-on-failure -j "$jobs" --timeout 900 -L unit)
  echo "sanitize ci: asan+ubsan build $((t1 - t0)) s, tests $((t2 - t1)) s;" \
       "tsan build $((t3 - t2)) s, tests $((SECONDS - t3)) s"
}

case "$what" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan; run_tsan ;;
  ci) run_ci ;;
  *) echo "usage: scripts/sanitize.sh [asan|tsan|all|ci]" >&2; exit 2 ;;
esac
