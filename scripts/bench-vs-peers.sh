#!/usr/bin/env bash
# Runs ipuml's benchmarks and the peers (../shared/peers: OpenBLAS sgemm, PyTorch MNIST CNN,
# plus benchmarks/peers/torch_conv.py) in one go on the same thread counts, and prints one line
# per comparison:  name ipuml=X peer=Y ratio=Z  (ratio > 1: ipuml is faster).
# Usage: scripts/bench-vs-peers.sh [--quick]     Installs what it needs (Debian packages).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
peers=${IPUML_PEERS_DIR:-$root/../shared/peers}
quick=0
[[ "${1:-}" == "--quick" ]] && quick=1
secs=$([[ $quick == 1 ]] && echo 1 || echo 3)

scripts/install-deps.sh --peers
build=${IPUML_BENCH_BUILD_DIR:-build-bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DIPUML_BUILD_BENCHMARKS=ON -DIPUML_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target bench_sgemm bench_mnist_train bench_conv >/dev/null

# OpenBLAS 0.3.21 misdetects recent Xeons; give it the core type this CPU really has.
if grep -qw avx512f /proc/cpuinfo; then coretype=SkylakeX
elif grep -qw avx2 /proc/cpuinfo; then coretype=Haswell
else coretype=""; fi
mkdir -p "$build/peers"
cc -O2 "$peers/openblas_sgemm.c" -o "$build/peers/openblas_sgemm" \
   -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas

ratio() { awk -v a="$2" -v b="$3" -v n="$1" 'BEGIN { printf "%s ipuml=%.1f peer=%.1f ratio=%.2f\n", n, a, b, (b > 0 ? a / b : 0) }'; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" | head -1; }

echo "# $(lscpu | sed -n 's/Model name:[ ]*//p'), $(nproc) cores; OpenBLAS core type ${coretype:-default}"
sizes=$([[ $quick == 1 ]] && echo "64 256 1024" || echo "64 256 1024 2048")
for t in 1 2; do
  for n in $sizes; do
    ours=$("$build/benchmarks/bench_sgemm" --threads "$t" --seconds "$secs" "$n" | field gflops)
    theirs=$(OPENBLAS_CORETYPE=$coretype OPENBLAS_NUM_THREADS=$t "$build/peers/openblas_sgemm" "$n" | field gflops)
    ratio "sgemm n=$n threads=$t gflops" "$ours" "$theirs"
  done
done

# MNIST CNN training throughput: each batch size against PyTorch's best thread count.
torch_out=$(/usr/bin/python3 "$peers/torch_mnist_cnn.py" --batch 8 64 --threads 1 2 --seconds "$secs")
for b in 8 64; do
  best_torch=0
  for t in 1 2; do
    v=$(echo "$torch_out" | grep "batch=$b threads=$t " | field samples_per_s)
    best_torch=$(awk -v a="$best_torch" -v b="$v" 'BEGIN { print (b > a ? b : a) }')
  done
  for t in 1 2; do
    ours=$("$build/benchmarks/bench_mnist_train" --batch "$b" --threads "$t" --seconds "$secs" | grep "mode=eager" | field samples_per_s)
    ratio "mnist_cnn train batch=$b threads=$t mode=eager samples_per_s (vs torch best)" "$ours" "$best_torch"
    ours=$("$build/benchmarks/bench_mnist_train" --batch "$b" --threads "$t" --seconds "$secs" | grep "mode=graph" | field samples_per_s)
    ratio "mnist_cnn train batch=$b threads=$t mode=graph samples_per_s (vs torch best)" "$ours" "$best_torch"
  done
done

# Convolution forward+backward at the zoo's layer shapes, against PyTorch (oneDNN).
conv_torch=$(/usr/bin/python3 benchmarks/peers/torch_conv.py --threads 1 2 --seconds "$secs")
for t in 1 2; do
  ours_all=$("$build/benchmarks/bench_conv" --threads "$t" --seconds "$secs")
  while read -r line; do
    name=$(echo "$line" | sed -n 's/.*layer=\([^ ]*\).*/\1/p')
    ours=$(echo "$line" | field ms)
    theirs=$(echo "$conv_torch" | grep "layer=$name threads=$t " | field ms)
    # Times: the ratio is peer/ours so that > 1 still means ipuml is faster.
    awk -v n="$name" -v t="$t" -v a="$ours" -v b="$theirs" \
      'BEGIN { printf "conv fwd+bwd layer=%s threads=%s ms ipuml=%.2f peer=%.2f ratio=%.2f\n", n, t, a, b, (a > 0 ? b / a : 0) }'
  done <<< "$(echo "$ours_all" | grep '^ipuml conv')"
done
