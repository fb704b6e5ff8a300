#!/usr/bin/env bash
# The model-parallel experiment of Graphcore's tutorial deck: ResNet-50 with layer4 on IPU 1
# (--pipeline-splits layer4), one host batch of generated 224x224 images run on one IPU, sharded
# over two and pipelined over two emulated GC200s, simulated throughput side by side.
# Extra arguments go to ipuml-resnet (e.g. --micro-batch-size 4 --gradient-accumulation 8).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${IPUML_BUILD_DIR:-build}
if [[ ! -x $build/examples/resnet/ipuml-resnet ]]; then
  scripts/install-deps.sh
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target ipuml-resnet
fi
# A small micro-batch keeps the run to a few minutes of wall-clock on a CPU; accumulation 6
# gives the 3 pipeline stages of two IPUs work to overlap.
exec "$build/examples/resnet/ipuml-resnet" --model resnet50 --data generated --device ipu \
  --precision 16.16 --micro-batch-size 2 --gradient-accumulation 6 --pipeline-splits layer4 \
  --compare-strategies "$@"
