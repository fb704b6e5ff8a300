#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz with Clang, AddressSanitizer and
# UndefinedBehaviorSanitizer (in build-fuzz), then runs each for SECONDS (default 60) on a
# working copy of its seed corpus (tests/fuzz/corpus/<harness>, left unchanged). Prints one line
# per harness: executions, coverage, corpus size, and crashes/timeouts (inputs kept under
# build-fuzz/artifacts/<harness>/). Exits non-zero if any harness found a crash or a hang.
# Usage: scripts/fuzz.sh [SECONDS] [harness ...]   (harnesses: idx checkpoint checkpoint_sealed plan_cache
#        options_json target_override cellspike gpt2_bpe wordpiece squad neuron_design; default all)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

seconds=${1:-60}
shift || true
harnesses=("$@")
((${#harnesses[@]})) || harnesses=(idx checkpoint checkpoint_sealed plan_cache options_json target_override cellspike
                                gpt2_bpe wordpiece squad neuron_design)

scripts/install-deps.sh --fuzz
build=${IPUML_FUZZ_BUILD_DIR:-build-fuzz}
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DIPUML_SANITIZE=ON -DIPUML_BUILD_FUZZERS=ON -DIPUML_BUILD_TESTS=OFF \
  -DIPUML_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${harnesses[@]/#/fuzz_}"

# An allocation over 2 GiB fails as it would without ASan (malloc returns NULL, new throws
# std::bad_alloc, which no harness catches, so ipuml's own oversized allocations still count as
# crashes) instead of aborting: libhdf5 checks its mallocs and reports an error.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1:max_allocation_size_mb=2048
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
printf '%-16s %10s %8s %8s %8s %s\n' harness executions cov features corpus result
for h in "${harnesses[@]}"; do
  work="$build/corpus/$h" artifacts="$build/artifacts/$h/" log="$build/fuzz_$h.log"
  mkdir -p "$work" "$artifacts"
  cp -n tests/fuzz/corpus/"$h"/* "$work"/ 2>/dev/null || true
  set +e
  "$build/tests/fuzz/fuzz_$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=4096 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts" "$work" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corpus=$(find "$work" -type f | wc -l)
  found=$(find "$artifacts" -type f | wc -l)
  result="ok"
  if ((rc != 0 || found > 0)); then
    result="FAILED: exit $rc, $found crash/timeout inputs in $artifacts (log: $log)"
    status=1
  fi
  printf '%-16s %10s %8s %8s %8s %s\n' "$h" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$result"
done
exit $status
