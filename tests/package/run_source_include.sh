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
  "$src/tests/package/consumer/implementation.cpp" \
  -o "$work/app" "$@" -ltbb -lz -lpthread
# Without HDF5's flags, header-only use stops with a message unless hdf5.h is on the default
# include path (Debian keeps it in /usr/include/hdf5/serial).
if ! out=$("$cxx" -std=c++20 -fsyntax-only -I "$src/include" "$src/tests/package/consumer/main.cpp" 2>&1); then
  grep -q "HDF5's headers were not found" <<<"$out" ||
    { echo "without HDF5's flags the compiler said, not ipuml's message:"; echo "$out" | head -5; exit 1; }
  echo "without HDF5's flags: ipuml's #error names them"
fi
said=$("$work/app")
expected="loss decreased: yes; y = [5, 3]"
[[ "$said" == "$expected" ]] || { echo "source-checkout consumer printed '$said', expected '$expected'"; exit 1; }
echo "header-only from a source checkout (-I include): $said"
