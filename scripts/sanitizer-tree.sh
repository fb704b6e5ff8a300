#!/usr/bin/env bash
# Configures the one instrumented tree that scripts/test.sh --sanitize and scripts/fuzz.sh share
# (build-sanitize, or IPUML_SANITIZE_BUILD_DIR): Clang, AddressSanitizer + UndefinedBehaviorSanitizer,
# libFuzzer coverage in every object (-fsanitize=fuzzer-no-link), the unit tests and the fuzz
# harnesses, warnings as errors. Installs Clang first. Prints the tree's path.
# Usage: dir=$(scripts/sanitizer-tree.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh --fuzz >&2
build=${IPUML_SANITIZE_BUILD_DIR:-build-sanitize}
# Line tables only: reports keep their file:line frames, and a unit compiles in 14 % less CPU
# with a third less object code than under -g (src/lib/ipu_compiler.cpp, 2026-11-27).
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIPUML_SANITIZE=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
  -DIPUML_BUILD_FUZZERS=ON -DIPUML_BUILD_TESTS=ON -DIPUML_WARNINGS_AS_ERRORS=ON \
  -DIPUML_BUILD_EXAMPLES=OFF >/dev/null
echo "$build"
