#!/usr/bin/env bash
# ctest's libtorch_port_mnist: runs the LibTorch mnist port (the program given as $1) as the
# original runs, in a working directory whose ./data holds the MNIST files (a link to the data
# cache, searched in find_mnist_dir's order), and passes when the last "Test set: ..." line
# reports an accuracy above 0.95. Exits 77 (ctest's skip) when MNIST is not cached.
set -euo pipefail
exe=${1:?usage: run_mnist.sh PATH-TO-ipuml_libtorch_mnist}
threshold=0.95

candidates=()
[[ -n "${IPUML_DATA_DIR:-}" ]] && candidates+=("$IPUML_DATA_DIR/mnist")
if [[ -n "${XDG_CACHE_HOME:-}" ]]; then
  candidates+=("$XDG_CACHE_HOME/ipuml/mnist")
elif [[ -n "${HOME:-}" ]]; then
  candidates+=("$HOME/.cache/ipuml/mnist")
fi
data=""
for dir in "${candidates[@]}"; do
  complete=1
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
           t10k-labels-idx1-ubyte; do
    [[ -f "$dir/$f" || -f "$dir/$f.gz" ]] || complete=0
  done
  if ((complete)); then data=$dir; break; fi
done
if [[ -z "$data" ]]; then
  echo "libtorch_port_mnist: SKIPPED: MNIST is not in the data cache (looked in:" \
       "${candidates[*]:-nowhere}); run scripts/fetch-data.sh mnist" >&2
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ipuml-libtorch-mnist.XXXXXX")
trap 'rm -rf "$work"' EXIT
ln -s "$data" "$work/data"
log="$work/output.txt"
start=$(date +%s)
(cd "$work" && "$exe") | tee "$log"
echo "libtorch_port_mnist: ran in $(($(date +%s) - start)) s"

last=$(grep -a 'Test set: .*Accuracy: ' "$log" | tail -n 1 || true)
if [[ -z "$last" ]]; then
  echo "libtorch_port_mnist: FAILED: no \"Test set: ... Accuracy: X\" line in the output" >&2
  exit 1
fi
accuracy=${last##*Accuracy: }
if ! awk -v a="$accuracy" -v t="$threshold" 'BEGIN { exit !(a + 0 > t + 0) }'; then
  echo "libtorch_port_mnist: FAILED: final accuracy $accuracy is not above $threshold" >&2
  exit 1
fi
echo "libtorch_port_mnist: final accuracy $accuracy > $threshold"
