#!/usr/bin/env bash
# The main job: installs what it needs, fetches MNIST (cached, verified), builds the example in
# Release and trains the MNIST CNN of the PopTorch tutorial. Extra arguments go to ipuml-mnist.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh
scripts/fetch-data.sh mnist >/dev/null
build=${IPUML_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target ipuml-mnist
# With no arguments: the reference run, replicated over 2 emulated GC200 IPUs.
if (($# == 0)); then set -- --target ipu2 --replication-factor 2; fi
exec "$build/examples/mnist/ipuml-mnist" "$@"
