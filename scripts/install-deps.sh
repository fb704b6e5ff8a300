#!/usr/bin/env bash
# Installs what building and testing ipuml needs, from Debian's packages only. Idempotent:
# packages already present are skipped, and apt's index is refreshed at most once a day.
# Usage: scripts/install-deps.sh [--peers] [--fuzz] [--browser]   (--peers adds PyTorch and
#        OpenBLAS for benchmarks and for regenerating golden data; --fuzz adds Clang and
#        libFuzzer for scripts/fuzz.sh; --browser adds Chromium, about 300 MB installed, which
#        the test of ipuml-report's HTML page renders it with and skips without)
set -euo pipefail

build_pkgs=(build-essential cmake pkg-config libxtensor-dev libxsimd-dev libtbb-dev
            libhdf5-dev catch2 nlohmann-json3-dev libcli11-dev zlib1g-dev nodejs npm
            libyaml-cpp-dev libopenmpi-dev openmpi-bin fortunes-min fortunes)
peer_pkgs=(python3-torch libopenblas-dev)
fuzz_pkgs=(clang libclang-rt-dev)
browser_pkgs=(chromium)

want=("${build_pkgs[@]}")
for arg in "$@"; do
  case "$arg" in
    --peers) want+=("${peer_pkgs[@]}") ;;
    --fuzz) want+=("${fuzz_pkgs[@]}") ;;
    --browser) want+=("${browser_pkgs[@]}") ;;
    *) echo "install-deps: unknown option '$arg' (expected --peers, --fuzz or --browser)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs/npm may come from elsewhere on the image; only the commands matter.
if command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
filtered=()
for p in "${missing[@]}"; do [[ -n "$p" ]] && filtered+=("$p"); done
if ((${#filtered[@]} == 0)); then
  exit 0
fi

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
stamp=/var/lib/apt/periodic/ipuml-update-stamp
if [[ ! -f $stamp ]] || [[ -n $(find "$stamp" -mmin +1440 2>/dev/null) ]]; then
  $sudo apt-get update -q
  $sudo mkdir -p "$(dirname $stamp)" && $sudo touch "$stamp"
fi
echo "install-deps: installing ${filtered[*]}" >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${filtered[@]}"
