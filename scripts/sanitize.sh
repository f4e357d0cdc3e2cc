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
#                              does not): ASan+UBSan over the unit tests of core, telemetry, store
#                              and config (tests/core, tests/store, tests/config), TSan over
#                              tests/store and the thread pool's test (parallel_for). Builds only
#                              those four libraries and their tests.
# Measured on the shared 2-core machine (CPU seconds carry over; its wall clock ran 3-5x longer):
#   ci, ASan+UBSan: build 159 s of CPU for core, telemetry, store and their tests, ~95 s more
#                   for config and its tests (~2.3 min on 2 cores); tests 64 s wall for core and
#                   store (48 tests), 7 s for config (29 tests). Config is in because ASan found a
#                   real bug there (a dangling yaml-cpp key proxy, fixed with this script)
#   ci, TSan:       build  79 s of CPU (~0.7 min on 2 cores), tests 41 s wall (31 tests)
#   io (tests/io) under ASan+UBSan would add 136 s of CPU (its three files pull in
#   nlohmann::json; its 30 tests passed clean), so CI leaves it to the full run.
#   full, timed end to end from empty build folders on the quiet 2-core machine (2026-12-03,
#   `time scripts/sanitize.sh all`: 25.6 min wall, 42.6 min of user CPU):
#     asan: build 835 s (222 steps), the unit and multirank labels 467 s: 489 tests, all pass
#     tsan: build ~225 s (153 steps), tests/launch, tests/parallel and tests/store 12 s: 92 tests,
#           all pass (tests/parallel's ranks are forked while the test process is single-threaded:
#           its TCP store serves from a process of its own, comm_test.cpp's StoreProcess)
#   The presets then compile with -g1 (line tables only: enough for the reports' stack traces)
#   and link with lld: the same asan build from an empty folder took 525 s instead of 835 s
#   (2026-12-04, quiet 2-core machine); the unit and multirank labels then ran in 653 s (489
#   tests, all pass; the slowest: PlanRanked.FastestFirstGlobalBatchKeptEachWithAReason 114 s,
#   CliPlan.FitsAnswersEndToEnd 58 s, PlanSmallBatch.TopSuggestionIsNotMicroBatchOneWhenALarger
#   IsFaster 55 s: the planner's searches).
#   Next to CI's other stages (~17 min on CI, ~22 min here) the full set is still ~20 minutes
#   more: over CI's 30, so CI runs `ci` and the full set is this script's.
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

# ci: the libraries below the model stack, whose tests build without the engine's kernels,
# model, parallel runtime or CLI (so the build is ~20 files, not ~160)
ci_asan_targets=(core_sha256_test core_unique_fd_test core_atomic_file_test core_parallel_for_test
                 telemetry_test run_store_test store_process_test sqlite_handles_test config_test
                 cluster_rules_test)
ci_tsan_targets=(core_parallel_for_test telemetry_test run_store_test store_process_test
                 sqlite_handles_test)
run_ci() {
  local t0=$SECONDS
  cmake --preset asan-ubsan "-DTESSERA_TEST_DIRS=core;store;config" >/dev/null
  cmake --build build-asan-ubsan -j "$jobs" --target "${ci_asan_targets[@]}"
  local t1=$SECONDS
  (cd build-asan-ubsan && ctest --output-on-failure -j "$jobs" --timeout 900 -L unit)
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
