#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz in the instrumented tree that scripts/test.sh
# --sanitize also uses (scripts/sanitizer-tree.sh: Clang, AddressSanitizer +
# UndefinedBehaviorSanitizer), then runs each for SECONDS (default 60) on a working copy of its
# seed corpus (tests/fuzz/corpus/<harness>, left unchanged), as many at once as there are cores
# (IPUML_FUZZ_JOBS). Prints one line per harness: executions, coverage, corpus size, and
# crashes/timeouts (inputs kept under <tree>/fuzz/artifacts/<harness>/). Exits non-zero if any
# harness found a crash or a hang. IPUML_FUZZ_SEED fixes libFuzzer's random seed (CI sets it so
# that a run is repeatable on the same machine).
# Usage: scripts/fuzz.sh [SECONDS] [harness ...]
#   harnesses (default all): idx checkpoint checkpoint_sealed plan_cache options_json
#   target_override cellspike gpt2_bpe wordpiece squad neuron_design cerebras_params pef.
#   IPUML_ISOLATE_PARSERS=0 makes checkpoint_sealed and cellspike fuzz libhdf5 itself in the
#   harness's process instead of the readers' child process (libhdf5 1.10.8 then fails within
#   minutes: docs/reliability.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

seconds=${1:-60}
shift || true
harnesses=("$@")
((${#harnesses[@]})) || harnesses=(idx checkpoint checkpoint_sealed plan_cache options_json
                                target_override cellspike gpt2_bpe wordpiece squad neuron_design
                                cerebras_params pef)

build=$(scripts/sanitizer-tree.sh)
cmake --build "$build" -j"$(nproc)" --target "${harnesses[@]/#/fuzz_}"

# An allocation over 2 GiB fails as it would without ASan (malloc returns NULL, new throws
# std::bad_alloc, which no harness catches, so ipuml's own oversized allocations still count as
# crashes) instead of aborting: libhdf5 checks its mallocs and reports an error.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1:max_allocation_size_mb=2048
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
jobs=${IPUML_FUZZ_JOBS:-$(nproc)}
out="$build/fuzz"

run_one() {
  local h=$1 work="$out/corpus/$1" artifacts="$out/artifacts/$1/" log="$out/$1.log"
  mkdir -p "$work" "$artifacts"
  cp -n tests/fuzz/corpus/"$h"/* "$work"/ 2>/dev/null || true
  local rc=0
  "$build/tests/fuzz/fuzz_$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=4096 -max_len=65536 -print_final_stats=1 -seed="${IPUML_FUZZ_SEED:-0}" \
    -artifact_prefix="$artifacts" "$work" >"$log" 2>&1 || rc=$?
  local execs last cov ft corpus found result="ok"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corpus=$(find "$work" -type f | wc -l)
  found=$(find "$artifacts" -type f | wc -l)
  if ((rc != 0 || found > 0)); then
    result="FAILED: exit $rc, $found crash/timeout inputs in $artifacts (log: $log)"
  fi
  printf '%-18s %10s %8s %8s %8s %s\n' "$h" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corpus" \
    "$result" >"$out/$h.result"
}

mkdir -p "$out"
for h in "${harnesses[@]}"; do
  rm -f "$out/$h.result"
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  run_one "$h" &
done
wait
status=0
printf '%-18s %10s %8s %8s %8s %s\n' harness executions cov features corpus result
for h in "${harnesses[@]}"; do
  cat "$out/$h.result"
  grep -q ' ok$' "$out/$h.result" || status=1
done
exit $status
