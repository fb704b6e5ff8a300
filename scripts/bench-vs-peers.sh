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
# The machine's speed drifts over seconds, so each side runs `rounds` times, alternating with the
# other, and keeps its best (highest rate, lowest time).
rounds=$([[ $quick == 1 ]] && echo 2 || echo 3)
max() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { print (b > a ? b : a) }'; }
min() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { print ((a == 0 || (b > 0 && b < a)) ? b : a) }'; }

echo "# $(lscpu | sed -n 's/Model name:[ ]*//p'), $(nproc) cores; OpenBLAS core type ${coretype:-default}; best of $rounds alternating rounds"
sizes=$([[ $quick == 1 ]] && echo "64 256 1024" || echo "64 256 1024 2048")
for t in 1 2; do
  for n in $sizes; do
    ours=0 theirs=0
    for _ in $(seq "$rounds"); do
      ours=$(max "$ours" "$("$build/benchmarks/bench_sgemm" --threads "$t" --seconds "$secs" "$n" | field gflops)")
      theirs=$(max "$theirs" "$(OPENBLAS_CORETYPE=$coretype OPENBLAS_NUM_THREADS=$t "$build/peers/openblas_sgemm" "$n" | field gflops)")
    done
    ratio "sgemm n=$n threads=$t gflops" "$ours" "$theirs"
  done
done

# MNIST CNN training throughput: each batch size against PyTorch's best thread count.
torch_out=""
declare -A ours_mnist
for _ in $(seq "$rounds"); do
  torch_out+=$(/usr/bin/python3 "$peers/torch_mnist_cnn.py" --batch 8 64 --threads 1 2 --seconds "$secs")$'\n'
  for b in 8 64; do
    for t in 1 2; do
      out=$("$build/benchmarks/bench_mnist_train" --batch "$b" --threads "$t" --seconds "$secs")
      for mode in eager graph; do
        v=$(echo "$out" | grep "mode=$mode" | field samples_per_s)
        ours_mnist[$b,$t,$mode]=$(max "${ours_mnist[$b,$t,$mode]:-0}" "$v")
      done
    done
  done
done
for b in 8 64; do
  best_torch=0
  for v in $(echo "$torch_out" | grep "batch=$b " | sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p'); do
    best_torch=$(max "$best_torch" "$v")
  done
  for t in 1 2; do
    for mode in eager graph; do
      ratio "mnist_cnn train batch=$b threads=$t mode=$mode samples_per_s (vs torch best)" "${ours_mnist[$b,$t,$mode]}" "$best_torch"
    done
  done
done

# Convolution forward+backward at the zoo's layer shapes, against PyTorch (oneDNN).
conv_torch="" conv_ours=""
for _ in $(seq "$rounds"); do
  conv_torch+=$(/usr/bin/python3 benchmarks/peers/torch_conv.py --threads 1 2 --seconds "$secs")$'\n'
  for t in 1 2; do
    conv_ours+=$("$build/benchmarks/bench_conv" --threads "$t" --seconds "$secs")$'\n'
  done
done
for t in 1 2; do
  for name in $(echo "$conv_ours" | grep "threads=$t " | sed -n 's/.*layer=\([^ ]*\).*/\1/p' | awk '!seen[$0]++'); do
    ours=0 theirs=0
    for v in $(echo "$conv_ours" | grep "layer=$name threads=$t " | sed -n 's/.*ms=\([0-9.]*\).*/\1/p'); do ours=$(min "$ours" "$v"); done
    for v in $(echo "$conv_torch" | grep "layer=$name threads=$t " | sed -n 's/.*ms=\([0-9.]*\).*/\1/p'); do theirs=$(min "$theirs" "$v"); done
    # Times: the ratio is peer/ours so that > 1 still means ipuml is faster.
    awk -v n="$name" -v t="$t" -v a="$ours" -v b="$theirs" \
      'BEGIN { printf "conv fwd+bwd layer=%s threads=%s ms ipuml=%.2f peer=%.2f ratio=%.2f\n", n, t, a, b, (a > 0 ? b / a : 0) }'
  done
done
