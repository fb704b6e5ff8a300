#!/usr/bin/env bash
# Header-only use straight from a source checkout: builds the consumer program with the
# checkout's include/ as the only ipuml include path (its committed links reach backends/,
# models/ and datasets/) plus the dependencies' flags, and runs it. No build tree, no install.
# Usage: run_source_include.sh SOURCE_DIR WORK_DIR CXX [dependency flags...]
set -euo pipefail
src=$1 work=$2 cxx=$3
shift 3
rm -rf "$work" && mkdir -p "$work"
for part in backends models datasets; do
  link="$src/include/ipuml/$part"
  [[ -L "$link" && "$(readlink "$link")" == "../../$part" ]] ||
    { echo "$link is not the relative link ../../$part"; exit 1; }
done
# -O0: this checks that the headers resolve and link, not how fast they run.
"$cxx" -std=c++20 -O0 -I "$src/include" "$src/tests/package/consumer/main.cpp" \
  -o "$work/app" "$@" -ltbb -lz -lpthread
said=$("$work/app")
expected="loss decreased: yes; y = [5, 3]"
[[ "$said" == "$expected" ]] || { echo "source-checkout consumer printed '$said', expected '$expected'"; exit 1; }
echo "header-only from a source checkout (-I include): $said"
