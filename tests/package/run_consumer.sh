#!/usr/bin/env bash
# Installs the built ipuml into a fresh prefix and builds two consumers against it:
# 1. compiled mode: a CMake project using find_package(ipuml CONFIG REQUIRED) + ipuml::ipuml;
# 2. header-only mode: one g++ command with only the include path and the dependencies' libs.
set -euo pipefail
build=$1 consumer=$2 work=$3 cxx=$4
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null

cmake -S "$consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" -j2 >/dev/null
compiled=$("$work/consumer/app")
echo "compiled mode: $compiled"

"$cxx" -std=c++20 -O1 -I"$work/prefix/include" -I/usr/include/hdf5/serial "$consumer/main.cpp" \
  -o "$work/header_only_app" -ltbb -lhdf5_serial -lz -lpthread
header_only=$("$work/header_only_app")
echo "header-only mode: $header_only"

expected="loss decreased: yes; y = [5, 3]"
[[ "$compiled" == "$expected" ]] || { echo "compiled consumer printed '$compiled', expected '$expected'"; exit 1; }
[[ "$header_only" == "$expected" ]] || { echo "header-only consumer printed '$header_only', expected '$expected'"; exit 1; }
