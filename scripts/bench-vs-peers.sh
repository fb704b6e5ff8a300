#!/usr/bin/env bash
# Runs ipuml's benchmarks and the peers (../shared/peers: OpenBLAS sgemm, PyTorch MNIST CNN,
# plus benchmarks/peers/torch_conv.py, torch_neuron_inverter.py, torch_resnet.py and
# torch_transformer.py) in one go
# on the same thread counts, and prints one line per comparison:
#   name ipuml=X peer=Y ratio=Z  (ratio > 1: ipuml is faster), then the cost
# of emulation per zoo model (bench_emulator_cost).
# Usage: scripts/bench-vs-peers.sh [--quick] [--only SECTION] [--isa avx2|avx512]   Installs what
# it needs (Debian packages). SECTION: sgemm, mnist, conv, neuron, resnet, transformer, emulator,
# allreduce or threads (ipuml against itself: its zoo steps on 1, 2 and 16 threads, and how far
# each step's partition could spread over 16 and 32 cores). --isa forces one instruction set on every side at once (ipuml's IPUML_CPU_ISA,
# OpenBLAS's core type, oneDNN's ONEDNN_MAX_CPU_ISA inside PyTorch; the header line shows the ISA
# oneDNN reports it used), so that an AVX-512 machine measures the AVX2 ratios too. The first
# lines give the machine itself as a peer: the fp32 peak of the cores (bench_peak), and each zoo
# section prints its traced steps' GFLOP/s as a fraction of it ("vs machine" lines).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
peers=${IPUML_PEERS_DIR:-$root/../shared/peers}
quick=0
only=""  # --only SECTION: sgemm, mnist, conv, neuron, resnet, transformer, emulator, allreduce, threads
isa=""   # --isa avx2|avx512: the same instruction set on every side
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --only) only=${2:?--only needs a section name}; shift ;;
    --isa) isa=${2:?--isa needs avx2 or avx512}; shift ;;
    *) echo "usage: $0 [--quick] [--only sgemm|mnist|conv|neuron|resnet|transformer|emulator|allreduce|threads] [--isa avx2|avx512]" >&2; exit 2 ;;
  esac
  shift
done
case "$isa" in
  "") ;;
  avx2) [[ $(grep -cw avx2 /proc/cpuinfo) -gt 0 ]] || { echo "$0: this CPU has no AVX2" >&2; exit 2; } ;;
  avx512) [[ $(grep -cw avx512f /proc/cpuinfo) -gt 0 ]] || { echo "$0: this CPU has no AVX-512" >&2; exit 2; } ;;
  *) echo "$0: --isa takes avx2 or avx512, not '$isa'" >&2; exit 2 ;;
esac
want() { [[ -z $only || $only == "$1" ]]; }
secs=$([[ $quick == 1 ]] && echo 1 || echo 3)

scripts/install-deps.sh --peers
build=${IPUML_BENCH_BUILD_DIR:-build-bench}
# A new tree leaves the tests out (only the benchmarks are built); an existing one named by
# IPUML_BENCH_BUILD_DIR (say, build) keeps its own setting.
no_tests=()
[[ -f "$build/CMakeCache.txt" ]] || no_tests=(-DIPUML_BUILD_TESTS=OFF)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DIPUML_BUILD_BENCHMARKS=ON "${no_tests[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target bench_sgemm bench_mnist_train bench_conv bench_neuron_train bench_resnet bench_transformer bench_emulator_cost bench_allreduce bench_peak >/dev/null

# OpenBLAS 0.3.21 misdetects recent Xeons; give it the core type this CPU really has (or the one
# --isa asks for). oneDNN (inside PyTorch) and ipuml are capped the same way.
if [[ $isa == avx2 ]] || { [[ -z $isa ]] && ! grep -qw avx512f /proc/cpuinfo && grep -qw avx2 /proc/cpuinfo; }; then
  coretype=Haswell
elif [[ $isa == avx512 ]] || grep -qw avx512f /proc/cpuinfo; then coretype=SkylakeX
else coretype=""; fi
if [[ -n $isa ]]; then
  export IPUML_CPU_ISA=$isa
  export ONEDNN_MAX_CPU_ISA=$([[ $isa == avx2 ]] && echo AVX2 || echo AVX512_CORE)
  export DNNL_MAX_CPU_ISA=$ONEDNN_MAX_CPU_ISA
fi
# The ISA oneDNN says it runs (its verbose header), from one small convolution.
onednn_isa=$(ONEDNN_VERBOSE=1 /usr/bin/python3 -c '
import torch, torch.nn.functional as F
F.conv2d(torch.randn(4, 16, 28, 28), torch.randn(16, 16, 3, 3))' 2>/dev/null |
  sed -n 's/.*,isa:\(.*\)/\1/p' | head -1)
mkdir -p "$build/peers"
cc -O2 "$peers/openblas_sgemm.c" -o "$build/peers/openblas_sgemm" \
   -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas
cc -O2 benchmarks/peers/openblas_sgemm_shapes.c -o "$build/peers/openblas_sgemm_shapes" \
   -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas

# Every measurement is recorded as "round side name unit value"; scripts/summarize-bench.py
# turns them into one line per comparison. The machine's speed drifts over seconds, so both sides
# of a comparison run back to back in each round (which one goes first alternates) and the ratio
# printed is the median of the per-round ratios.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
records=$tmp/records.tsv
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$records"; }
# Prints the comparisons of the section just measured, then starts a new one.
summarize() {
  [[ -t 2 ]] && printf '\r\033[K' >&2
  /usr/bin/python3 scripts/summarize-bench.py <"$records"
  : >"$records"
}
# A progress line on a terminal; nothing in logs.
progress() { [[ -t 2 ]] && printf '\r\033[K[bench-vs-peers] %s' "$*" >&2 || true; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" | head -1; }
sgemm_rounds=$([[ $quick == 1 ]] && echo 3 || echo 5)  # sgemm runs are short: more rounds
rounds=$([[ $quick == 1 ]] && echo 2 || echo 3)

echo "# $(lscpu | sed -n 's/Model name:[ ]*//p'), $(nproc) cores; ipuml ISA $("$build/benchmarks/bench_peak" --threads 1 --seconds 0.01 | sed -n 's/.*isa=\([a-z0-9]*\).*/\1/p'); OpenBLAS core type ${coretype:-default}; oneDNN ISA ${onednn_isa:-unknown}; median of $sgemm_rounds (sgemm) or $rounds alternating rounds"
# The machine as a peer: the fp32 peak of 1 and 2 cores for that ISA (register-only FMAs).
"$build/benchmarks/bench_peak" --threads 1 2
# "vs machine" lines of the zoo benchmarks, printed at the end of each section.
machine=$tmp/machine.txt
: >"$machine"
print_machine() {
  [[ -s $machine ]] || return 0
  sort "$machine" | awk '{print "  " $0}'
  : >"$machine"
}
# sgemm: the peers time themselves for 1 s, so ours runs for 1 s too.
sizes=$([[ $quick == 1 ]] && echo "64 256 1024" || echo "64 256 1024 2048")
# Square sizes (the peer from ../shared/peers) and the zoo's shapes [B*]MxNxK[:ab] (op(A) m x k
# times op(B) k x n, a/b n or t for transposed, B products of that shape; bench_sgemm.cpp):
# MNIST's fc1 at batch 8 and 64; then the transformers' at seq 128 (GPT-2 small batch 1 and 4,
# BERT-base batch 4), as bench_transformer --profile lists them: the FFN forward at 128 and 512
# tokens (128x3072x768, 512x3072x768, 512x768x3072), its backward dX (:nt) and dW (:tn), the
# attention projections (512x768x768, GPT-2's fused QKV 512x2304x768), the tied LM head at 128
# tokens (128x50257x768:nt) and the per-head attention products at batch 4 (48 heads x
# QK^T and PV). (No pathname expansion in this script: the shapes hold '*'.)
set -f
shapes=$([[ $quick == 1 ]] && echo "" || echo "8x128x1600 64x128x1600 128x3072x768 512x768x3072 \
  128x768x3072 512x3072x768 512x768x768 512x2304x768 512x768x3072:nt 768x3072x512:tn \
  128x50257x768:nt 48*128x128x64:nt 48*128x64x128")
sgemm_name() {
  if [[ $2 == *x* ]]; then
    local spec=$2 batch="" op=""
    if [[ $spec == *'*'* ]]; then batch=" batch=${spec%%'*'*}"; spec=${spec#*'*'}; fi
    if [[ $spec == *:* ]]; then op=" op=${spec#*:}"; spec=${spec%%:*}; fi
    IFS=x read -r m n k <<<"$spec"
    echo "sgemm m=$m n=$n k=$k$op$batch threads=$1 gflops"
  else
    echo "sgemm n=$2 threads=$1 gflops"
  fi
}
ipuml_sgemm() { record "$3" ipuml "$(sgemm_name "$1" "$2")" rate "$("$build/benchmarks/bench_sgemm" --threads "$1" --seconds 1 "$2" | field gflops)"; }
peer_sgemm() {
  local bin=openblas_sgemm
  [[ $2 == *x* ]] && bin=openblas_sgemm_shapes
  record "$3" peer "$(sgemm_name "$1" "$2")" rate "$(OPENBLAS_CORETYPE=$coretype OPENBLAS_NUM_THREADS=$1 "$build/peers/$bin" "$2" | field gflops)"
}
if want sgemm; then
for t in 1 2; do
  for n in $sizes $shapes; do
    for r in $(seq "$sgemm_rounds"); do
      progress "sgemm $n threads=$t round $r/$sgemm_rounds"
      if ((r % 2)); then ipuml_sgemm "$t" "$n" "$r"; peer_sgemm "$t" "$n" "$r"; else peer_sgemm "$t" "$n" "$r"; ipuml_sgemm "$t" "$n" "$r"; fi
    done
  done
done
summarize
fi

# MNIST CNN training throughput: each batch size against PyTorch's best thread count (per round).
mnist_name() { echo "mnist_cnn train batch=$1 threads=$2 mode=$3 samples_per_s (vs torch best)"; }
torch_mnist() {
  while read -r line; do
    b=$(echo "$line" | field batch) v=$(echo "$line" | field samples_per_s)
    for t in 1 2; do
      for mode in eager graph; do record "$1" peer "$(mnist_name "$b" "$t" "$mode")" rate "$v"; done
    done
  done < <(for t in 1 2; do
    # The shared peer sets torch's threads only; OpenBLAS (its Linear layers) would use every core.
    OPENBLAS_NUM_THREADS=$t /usr/bin/python3 "$peers/torch_mnist_cnn.py" --batch 8 64 --threads "$t" --seconds "$secs"
  done | grep samples_per_s)
}
ipuml_mnist() {
  for b in 8 64; do
    for t in 1 2; do
      out=$("$build/benchmarks/bench_mnist_train" --batch "$b" --threads "$t" --seconds "$secs")
      echo "$out" | grep "vs machine" >>"$machine" || true
      for mode in eager graph; do
        record "$1" ipuml "$(mnist_name "$b" "$t" "$mode")" rate "$(echo "$out" | grep "mode=$mode" | field samples_per_s)"
      done
    done
  done
}
if want mnist; then
for r in $(seq "$rounds"); do
  progress "MNIST CNN training round $r/$rounds"
  if ((r % 2)); then torch_mnist "$r"; ipuml_mnist "$r"; else ipuml_mnist "$r"; torch_mnist "$r"; fi
done
summarize
print_machine
fi

# Convolution forward+backward at the zoo's layer shapes, against PyTorch (oneDNN). Times: the
# ratio is peer/ours so that > 1 still means ipuml is faster.
conv_name() { echo "$1" | sed -n 's/.*layer=\([^ ]*\) threads=\([0-9]*\).*/conv fwd+bwd layer=\1 threads=\2 ms/p'; }
torch_conv() {
  while read -r line; do
    record "$1" peer "$(conv_name "$line")" ms "$(echo "$line" | field ms)"
  done < <(/usr/bin/python3 benchmarks/peers/torch_conv.py --threads 1 2 --seconds "$secs" | grep "ms=")
}
ipuml_conv() {
  for t in 1 2; do
    while read -r line; do
      record "$1" ipuml "$(conv_name "$line")" ms "$(echo "$line" | field ms)"
    done < <("$build/benchmarks/bench_conv" --threads "$t" --seconds "$secs" | grep "ms=")
  done
}
if want conv; then
for r in $(seq "$rounds"); do
  progress "convolutions round $r/$rounds"
  if ((r % 2)); then torch_conv "$r"; ipuml_conv "$r"; else ipuml_conv "$r"; torch_conv "$r"; fi
done
summarize
fi

# Neuron-Inverter (hpar_gc4) training step at local batch 192, AdamW: each mode and thread count
# against PyTorch's best thread count (per round). Goal: >= 2x.
neuron_name() { echo "neuron_inverter train batch=192 threads=$1 mode=$2 samples_per_s (vs torch best)"; }
torch_neuron() {
  local best=0
  while read -r line; do
    v=$(echo "$line" | field samples_per_s)
    best=$(/usr/bin/python3 -c "print(max($best, $v))")
  done < <(/usr/bin/python3 benchmarks/peers/torch_neuron_inverter.py --threads 1 2 --seconds "$secs" | grep samples_per_s)
  for t in 1 2; do for mode in eager graph; do record "$1" peer "$(neuron_name "$t" "$mode")" rate "$best"; done; done
}
ipuml_neuron() {
  for t in 1 2; do
    out=$("$build/benchmarks/bench_neuron_train" --threads "$t" --seconds "$secs")
    for mode in eager graph; do
      record "$1" ipuml "$(neuron_name "$t" "$mode")" rate "$(echo "$out" | grep "mode=$mode" | field samples_per_s)"
    done
  done
}
if want neuron; then
for r in $(seq "$rounds"); do
  progress "Neuron-Inverter training round $r/$rounds"
  if ((r % 2)); then torch_neuron "$r"; ipuml_neuron "$r"; else ipuml_neuron "$r"; torch_neuron "$r"; fi
done
summarize
fi

# ResNet-50 (224x224, 1000 classes) on the CPU: the traced training step (cross entropy, SGD
# momentum 0.9, weight decay 1e-4) and eval-mode inference, each batch size and thread count
# against PyTorch's best thread count (per round; benchmarks/peers/torch_resnet.py).
# Goals: >= 1.5x on training, >= 2x on inference.
resnet_name() { echo "resnet50 $1 batch=$2 threads=$3 mode=graph samples_per_s (vs torch best)"; }
resnet_train_batches=$([[ $quick == 1 ]] && echo "4" || echo "4 16")
resnet_infer_batches=$([[ $quick == 1 ]] && echo "1" || echo "1 32")
torch_resnet() {  # round task batch
  local best=0
  while read -r line; do
    v=$(echo "$line" | field samples_per_s)
    best=$(/usr/bin/python3 -c "print(max($best, $v))")
  done < <(/usr/bin/python3 benchmarks/peers/torch_resnet.py --task "$2" --batch "$3" --threads 1 2 --seconds "$secs" | grep samples_per_s)
  for t in 1 2; do record "$1" peer "$(resnet_name "$2" "$3" "$t")" rate "$best"; done
}
ipuml_resnet() {  # round task batch
  local out
  for t in 1 2; do
    out=$("$build/benchmarks/bench_resnet" --task "$2" --batch "$3" --threads "$t" --seconds "$secs")
    echo "$out" | grep "vs machine" >>"$machine" || true
    record "$1" ipuml "$(resnet_name "$2" "$3" "$t")" rate "$(echo "$out" | grep samples_per_s | field samples_per_s)"
  done
}
if want resnet; then
for r in $(seq "$rounds"); do
  for task in train infer; do
    batches=$([[ $task == train ]] && echo "$resnet_train_batches" || echo "$resnet_infer_batches")
    for b in $batches; do
      progress "ResNet-50 $task batch $b round $r/$rounds"
      if ((r % 2)); then torch_resnet "$r" "$task" "$b"; ipuml_resnet "$r" "$task" "$b"; else ipuml_resnet "$r" "$task" "$b"; torch_resnet "$r" "$task" "$b"; fi
    done
  done
done
summarize
print_machine
fi

# Transformer training steps, seq 128 (bench_transformer, benchmarks/peers/torch_transformer.py):
# GPT-2 small with AdamW at batch 1 and 4, BERT-base pre-training (MLM at the masked positions +
# NSP) with AdamW at batch 4; eager and traced (graph) steps, each thread count against PyTorch's
# best thread count (per round). Each side times its steps one by one after warm-up steps and
# reports the median. PyTorch's products run in OpenBLAS, given the same core type as the sgemm
# peer. Then the traced step against the eager one, and the parameter counts of both sides.
# Goals: >= 3x PyTorch; graph >= eager.
tf_steps=$([[ $quick == 1 ]] && echo 3 || echo 5)
tf_warmup=$([[ $quick == 1 ]] && echo 1 || echo 2)
tf_configs=$([[ $quick == 1 ]] && echo "gpt2:1 bert:4" || echo "gpt2:1 gpt2:4 bert:4")
tf_label() { [[ $1 == gpt2 ]] && echo "gpt2_small adamw" || echo "bert_base adamw mlm+nsp"; }
tf_name() { echo "$(tf_label "$1") train seq=128 batch=$2 threads=$3 mode=$4 tokens_per_s (vs torch best)"; }
tf_graph_name() { echo "$(tf_label "$1") train seq=128 batch=$2 threads=$3 graph vs eager tokens_per_s"; }
torch_tf() {  # round model batch
  local best=0 out
  out=$(OPENBLAS_CORETYPE=$coretype /usr/bin/python3 benchmarks/peers/torch_transformer.py --model "$2" --batch "$3" --threads 1 2 --steps "$tf_steps" --warmup "$tf_warmup")
  while read -r line; do
    v=$(echo "$line" | field tokens_per_s)
    best=$(/usr/bin/python3 -c "print(max($best, $v))")
  done < <(echo "$out" | grep tokens_per_s)
  echo "$out" | field params >"$tmp/params_torch_$2"
  for t in 1 2; do for mode in eager graph; do record "$1" peer "$(tf_name "$2" "$3" "$t" "$mode")" rate "$best"; done; done
}
ipuml_tf() {  # round model batch
  local out
  for t in 1 2; do
    out=$("$build/benchmarks/bench_transformer" --model "$2" --batch "$3" --threads "$t" --steps "$tf_steps" --warmup "$tf_warmup")
    echo "$out" | field params >"$tmp/params_ipuml_$2"
    echo "$out" | grep "vs machine" >>"$machine" || true
    for mode in eager graph; do
      record "$1" ipuml "$(tf_name "$2" "$3" "$t" "$mode")" rate "$(echo "$out" | grep "mode=$mode" | field tokens_per_s)"
    done
    for mode in graph eager; do  # recorded as ipuml = graph, peer = eager
      printf '%s\t%s\t%s\trate\t%s\n' "$1" "$([[ $mode == graph ]] && echo ipuml || echo peer)" "$(tf_graph_name "$2" "$3" "$t")" \
        "$(echo "$out" | grep "mode=$mode" | field tokens_per_s)" >>"$tmp/graph_vs_eager.tsv"
    done
  done
}
if want transformer; then
: >"$tmp/graph_vs_eager.tsv"
for r in $(seq "$rounds"); do
  for c in $tf_configs; do
    model=${c%%:*} b=${c##*:}
    progress "transformer $model batch $b round $r/$rounds"
    if ((r % 2)); then torch_tf "$r" "$model" "$b"; ipuml_tf "$r" "$model" "$b"; else ipuml_tf "$r" "$model" "$b"; torch_tf "$r" "$model" "$b"; fi
  done
done
summarize
print_machine
# "ipuml" is the traced step, "peer" the eager one here: ratio > 1 means graph is faster.
/usr/bin/python3 scripts/summarize-bench.py <"$tmp/graph_vs_eager.tsv" | sed 's/ ipuml=/ graph=/; s/ peer=/ eager=/'
for model in $(for c in $tf_configs; do echo "${c%%:*}"; done | sort -u); do
  p_ours=$(cat "$tmp/params_ipuml_$model") p_torch=$(cat "$tmp/params_torch_$model")
  echo "$(tf_label "$model") parameters ipuml=$p_ours torch=$p_torch $([[ $p_ours == "$p_torch" ]] && echo same || echo DIFFERENT)"
done
fi

# What emulation costs: each zoo model's training step on emulated GC200s against the same
# graph on the CPU executor (ratio = emulated / CPU wall time, lower is better; goal <= 1.3),
# with the compile time and whether the model fits.
if want emulator; then
progress "emulator cost"
"$build/benchmarks/bench_emulator_cost" --rounds "$([[ $quick == 1 ]] && echo 1 || echo 3)"
fi

# Gradient all-reduce between two processes: ipuml's deterministic communicator against
# MPI_Allreduce (ratio = MPI time / ipuml time). Needs a build that found MPI.
if want allreduce; then
  if command -v mpirun >/dev/null; then
    progress "all-reduce, 2 processes"
    root_flag=$([[ $(id -u) == 0 ]] && echo --allow-run-as-root || true)
    mpirun -np 2 --oversubscribe $root_flag "$build/benchmarks/bench_allreduce"
  else
    echo "allreduce: skipped (no mpirun; scripts/install-deps.sh installs OpenMPI)"
  fi
fi

# Threads: each zoo step's traced (graph) rate on 1, 2 and 16 oneTBB threads, the three back to
# back in every round (their order alternating), then the median rates and per-round ratios: 2
# threads over 1 (the second core's gain) and 16 over 2 (on a 2-core machine, 16 threads share the
# 2 cores: what the finer partition and the extra tasks cost). Then each step once more with the
# op profile at 16 and 32 threads: the most of the ideal speed-up on that many cores that the
# pieces of work of its ops' parallel loops allow (print_op_profile.hpp; the machine need not
# have the cores: the partition is made for the thread count).
if want threads; then
  scaling=$tmp/threads.tsv
  : >"$scaling"
  thread_configs="mnist:64 resnet:16 gpt2:4 bert:4"
  [[ $quick == 1 ]] && thread_configs="mnist:64 gpt2:4"
  step_cmd() {  # model batch threads [extra flags]
    case $1 in
      mnist) "$build/benchmarks/bench_mnist_train" --batch "$2" --threads "$3" --seconds "$secs" --modes graph "${@:4}" ;;
      resnet) "$build/benchmarks/bench_resnet" --task train --batch "$2" --threads "$3" --seconds "$secs" --modes graph "${@:4}" ;;
      *) "$build/benchmarks/bench_transformer" --model "$1" --batch "$2" --threads "$3" --steps 3 --modes graph "${@:4}" ;;
    esac
  }
  for r in $(seq "$rounds"); do
    for c in $thread_configs; do
      model=${c%%:*} b=${c##*:}
      order=$( ((r % 2)) && echo "1 2 16" || echo "16 2 1")
      for t in $order; do
        progress "threads: $model batch $b, $t threads, round $r/$rounds"
        rate=$(step_cmd "$model" "$b" "$t" | grep " mode=graph" | field samples_per_s)
        printf '%s\t%s batch=%s\t%s\t%s\n' "$r" "$model" "$b" "$t" "$rate" >>"$scaling"
      done
    done
  done
  [[ -t 2 ]] && printf '\r\033[K' >&2
  /usr/bin/python3 - "$scaling" <<'PY'
import collections, statistics, sys
rate = collections.defaultdict(dict)  # (config, threads) -> {round: samples/s}
for line in open(sys.argv[1]):
    r, config, t, v = line.rstrip("\n").split("\t")
    if v:
        rate[(config, int(t))][r] = float(v)
for config in dict.fromkeys(c for c, _ in rate):
    med = {t: statistics.median(rate[(config, t)].values()) for t in (1, 2, 16) if rate[(config, t)]}
    def ratio(a, b):
        rs = [rate[(config, a)][r] / rate[(config, b)][r] for r in rate[(config, a)] if r in rate[(config, b)]]
        return statistics.median(rs) if rs else 0.0
    print(f"threads {config} samples_per_s 1={med.get(1, 0):.2f} 2={med.get(2, 0):.2f} 16={med.get(16, 0):.2f}"
          f" speedup_2_over_1={ratio(2, 1):.2f} oversubscribed_16_over_2={ratio(16, 2):.2f}")
PY
  for c in $thread_configs; do
    model=${c%%:*} b=${c##*:}
    bounds=""
    for t in 16 32; do
      progress "threads: $model batch $b, partition for $t threads"
      bound=$(step_cmd "$model" "$b" "$t" --profile | sed -n 's/^  total .* \([0-9]*\)%$/\1/p' | head -1)
      bounds="$bounds on_${t}_cores=${bound}%"
    done
    [[ -t 2 ]] && printf '\r\033[K' >&2
    echo "threads $model batch=$b partition: the most of the ideal speed-up$bounds"
  done
fi
