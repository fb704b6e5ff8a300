#!/usr/bin/env bash
# Installs the built ipuml into a fresh prefix and builds consumers against it:
# 1. a CMake project using find_package(ipuml CONFIG REQUIRED): ipuml::ipuml (compiled mode) and
#    ipuml::header_only (one unit defines IPUML_IMPLEMENTATION, the other uses a precompiled
#    header of the declarations);
# 2. compiled mode without CMake: one g++ command with `pkg-config --cflags --libs ipuml`;
# 3. header-only mode: one g++ command with `pkg-config --cflags --libs ipuml-header-only`.
# Then checks that every program the build makes (tests/programs.txt) is installed and runs.
set -euo pipefail
build=$1 consumer=$2 work=$3 cxx=$4
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null

# Unoptimised (no build type, no -O): what is tested is that the package's flags build and link a
# program, and the header-only units compile all of ipuml, minutes at -O3.
cmake -S "$consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE= >/dev/null
cmake --build "$work/consumer" -j2 >/dev/null
compiled=$("$work/consumer/app")
echo "compiled mode: $compiled"
cmake_header_only=$("$work/consumer/app_header_only")
echo "header-only mode through CMake, with a precompiled header: $cmake_header_only"

pcdir=$(dirname "$(find "$work/prefix" -name ipuml.pc | head -1)")
[[ -f "$pcdir/ipuml.pc" && -f "$pcdir/ipuml-header-only.pc" ]] || { echo "no ipuml.pc installed"; exit 1; }
export PKG_CONFIG_PATH="$pcdir"
version=$(pkg-config --modversion ipuml)
expected_version=$(sed -n 's/^#define IPUML_VERSION_STRING "\(.*\)"$/\1/p' "$work/prefix/include/ipuml/version.hpp")
[[ "$version" == "$expected_version" ]] || { echo "ipuml.pc says $version, version.hpp $expected_version"; exit 1; }
# shellcheck disable=SC2046  # pkg-config's flags are separate words
"$cxx" -std=c++20 -O0 "$consumer/main.cpp" "$consumer/implementation.cpp" -o "$work/pkgconfig_app" \
  $(pkg-config --cflags --libs ipuml)
pkgconfig=$("$work/pkgconfig_app")
echo "compiled mode through pkg-config: $pkgconfig"

# shellcheck disable=SC2046
"$cxx" -std=c++20 -O0 "$consumer/main.cpp" "$consumer/implementation.cpp" -o "$work/header_only_app" \
  $(pkg-config --cflags --libs ipuml-header-only)
header_only=$("$work/header_only_app")
echo "header-only mode through pkg-config: $header_only"

while read -r program; do
  [[ -n "$program" ]] || continue
  name=$(basename "$program")
  [[ -x "$work/prefix/bin/$name" ]] || { echo "$name is not installed in bin/"; exit 1; }
  said=$("$work/prefix/bin/$name" --version)
  [[ "$said" == "$name (ipuml) $expected_version" ]] ||
    { echo "installed $name --version printed '$said'"; exit 1; }
done < "$build/tests/programs.txt"
echo "installed programs: $(ls "$work/prefix/bin" | tr '\n' ' ')"

expected="loss decreased: yes; y = [5, 3]"
[[ "$compiled" == "$expected" ]] || { echo "compiled consumer printed '$compiled', expected '$expected'"; exit 1; }
[[ "$cmake_header_only" == "$expected" ]] || { echo "CMake header-only consumer printed '$cmake_header_only', expected '$expected'"; exit 1; }
[[ "$pkgconfig" == "$expected" ]] || { echo "pkg-config consumer printed '$pkgconfig', expected '$expected'"; exit 1; }
[[ "$header_only" == "$expected" ]] || { echo "header-only consumer printed '$header_only', expected '$expected'"; exit 1; }
