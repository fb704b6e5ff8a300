#!/usr/bin/env bash
# The zoo's reference configurations, estimated: each example's preset compiled for the emulated
# IPU system with --compile-only (nothing executes), printed as one markdown row per
# configuration: fit (fullest tile of each IPU), projected throughput and where one weight
# update's time goes. Extra arguments go to every command (e.g. --set host_bytes_per_second=32e9
# to compare a constant). Needs a Release build in ${IPUML_BUILD_DIR:-build}.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${IPUML_BUILD_DIR:-$root/build}
ex=$build/examples
for b in resnet/ipuml-resnet gpt2/ipuml-gpt2 bert/ipuml-bert neuron_inverter/ipuml-neuron-inverter \
  mnist/ipuml-mnist; do
  [[ -x $ex/$b ]] || {
    echo "reference-estimates: $ex/$b is missing; build first (cmake --build $build)" >&2
    exit 1
  }
done

row() {
  local name=$1
  shift
  local out
  if ! out=$("$@" --compile-only 2>&1); then
    echo "reference-estimates: '$*' failed:" >&2
    echo "$out" >&2
    exit 1
  fi
  local fit rate split
  fit=$(grep -m1 -o 'memory: [^(]*([^)]*)' <<<"$out" | sed 's/memory: //; s/fullest tile of each IPU: //; s/ of [0-9]* bytes//')
  rate=$(grep -m1 -o 'projected throughput: .*' <<<"$out" | sed 's/projected throughput: //')
  split=$(grep -m1 -o 'where the time goes[^:]*: .*' <<<"$out" | sed 's/^[^:]*: //')
  echo "| $name | $fit | $rate | $split |"
}

echo "| configuration | fits (fullest tile per IPU) | projected throughput | where the time goes |"
echo "| --- | --- | --- | --- |"
row "ResNet-50 resnet50-pod4 (bow)" "$ex/resnet/ipuml-resnet" --config resnet50-pod4 --target bow "$@"
row "ResNet-50 resnet50-pod4 (ipu2)" "$ex/resnet/ipuml-resnet" --config resnet50-pod4 "$@"
row "GPT-2 small gpt2-small-pod16" "$ex/gpt2/ipuml-gpt2" --config gpt2-small-pod16 "$@"
row "BERT-base pretrain_base_128" "$ex/bert/ipuml-bert" --config pretrain_base_128 "$@"
row "BERT-base squad_base_384" "$ex/bert/ipuml-bert" --config squad_base_384 "$@"
for r in 1 2 4 8; do
  row "Neuron-Inverter hpar_gc4, $r IPU(s)" "$ex/neuron_inverter/ipuml-neuron-inverter" \
    --config hpar_gc4 --replication-factor "$r" "$@"
done
row "Neuron-Inverter hpar_dev" "$ex/neuron_inverter/ipuml-neuron-inverter" --config hpar_dev "$@"
row "MNIST CNN, batch 64" "$ex/mnist/ipuml-mnist" --target ipu2 --batch-size 64 "$@"
row "MNIST CNN, batch 64, 2 replicas" "$ex/mnist/ipuml-mnist" --target ipu2 --batch-size 64 \
  --replication-factor 2 "$@"
