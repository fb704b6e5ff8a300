#!/usr/bin/env bash
# ctest's libtorch_port_mnist: runs the LibTorch mnist port (the program given as $1) as the
# original runs, in a working directory whose ./data links to the data cache's MNIST directory
# (which $2, find_mnist.cpp, prints by the library's own search), and passes when the last
# "Test set: ..." line reports an accuracy above 0.95. Exits 77 (ctest's skip) when MNIST is not
# cached.
set -euo pipefail
exe=${1:?usage: run_mnist.sh PATH-TO-ipuml_libtorch_mnist PATH-TO-ipuml_find_mnist}
finder=${2:?usage: run_mnist.sh PATH-TO-ipuml_libtorch_mnist PATH-TO-ipuml_find_mnist}
threshold=0.95

rc=0
data=$("$finder") || rc=$?
if ((rc == 77)); then
  echo "libtorch_port_mnist: SKIPPED: MNIST is not in the data cache; run scripts/fetch-data.sh" \
       "mnist" >&2
  exit 77
elif ((rc != 0)); then
  echo "libtorch_port_mnist: FAILED: $finder exited with $rc" >&2
  exit 1
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
