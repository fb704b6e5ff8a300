#!/usr/bin/env bash
# What header-only use costs a consumer: CPU seconds (user + sys) and peak memory to compile one
# translation unit at -O2 with the system g++, for
#   - a program's unit that includes <ipuml/ipuml.hpp> (declarations only, the default; goal: at
#     most 2x the peer's unit below, measured in the same run)
#   - the same unit with ipuml.hpp from a GCC precompiled header
#   - the one unit that defines IPUML_IMPLEMENTATION (compiled once per program)
#   - the same program unit with IPUML_HEADER_ONLY_INLINE (every definition in every unit)
#   - a peer: a unit using xtensor's xarray
# The program is tests/package/consumer/main.cpp. Usage: scripts/bench-header-only.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cxx=${CXX:-g++}
flags=(-std=c++20 -O2 -I "$root/include" -I/usr/include/hdf5/serial)
main=tests/package/consumer/main.cpp

# Runs the compiler and prints "CPU_SECONDS PEAK_MB".
measure() {
  /usr/bin/time -f "%U %S %M" -o "$work/time" "$cxx" "${flags[@]}" "$@" -c -o "$work/out.o"
  read -r user sys kb <"$work/time"
  awk -v u="$user" -v s="$sys" -v k="$kb" 'BEGIN { printf "%.2f %.0f\n", u + s, k / 1024 }'
}

cat >"$work/xarray.cpp" <<'CPP'
#include <iostream>
#include <xtensor/xarray.hpp>
#include <xtensor/xio.hpp>
int main() {
  xt::xarray<float> a = {{1, 2}, {3, 4}};
  std::cout << xt::xarray<float>(a * a + 1) << "\n";
}
CPP
echo '#include <ipuml/ipuml.hpp>' >"$work/ipuml_pch.hpp"
"$cxx" "${flags[@]}" -x c++-header "$work/ipuml_pch.hpp" -o "$work/ipuml_pch.hpp.gch"

printf '%-58s %10s %8s\n' "translation unit (g++ -O2)" "CPU s" "peak MB"
row() { local name=$1; shift; read -r s mb < <(measure "$@"); printf '%-58s %10s %8s\n' "$name" "$s" "$mb"; last=$s; }
row "program unit, <ipuml/ipuml.hpp> (declarations)" "$main"
program=$last
row "program unit, ipuml.hpp precompiled" -include "$work/ipuml_pch.hpp" -Winvalid-pch "$main"
row "implementation unit (IPUML_IMPLEMENTATION, once)" tests/package/consumer/implementation.cpp
row "program unit, IPUML_HEADER_ONLY_INLINE" -DIPUML_HEADER_ONLY_INLINE "$main"
row "peer: xtensor xarray" "$work/xarray.cpp"
awk -v p="$program" -v x="$last" 'BEGIN { printf "program unit / peer unit: %.2fx (goal <= 2x)\n", p / x }'
