#!/usr/bin/env bash
# Builds oneTBB with ThreadSanitizer from Debian's own source package (onetbb, the version the
# build uses: 2021.8), so that `scripts/test.sh --tsan` sees the happens-before edges of oneTBB's
# task spawns and waits instead of reporting them as races. Cached: the instrumented library is
# installed under ${XDG_CACHE_HOME:-~/.cache}/ipuml/tbb-tsan-<version> and a second run only
# prints its CMake package directory (what IPUML_TSAN_TBB_DIR / TBB_DIR take).
# The source comes through apt's deb-src (a sources entry for Debian's main archive is added
# once, in /etc/apt/sources.list.d/ipuml-deb-src.sources); dpkg-source checks the .dsc's hashes.
# Usage: scripts/build-tsan-tbb.sh   (prints the directory on stdout; progress on stderr)
set -euo pipefail

version=$(dpkg-query -W -f='${Version}' libtbb-dev 2>/dev/null || true)
[[ -n "$version" ]] || { echo "build-tsan-tbb: libtbb-dev is not installed (scripts/install-deps.sh)" >&2; exit 1; }
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ipuml
prefix="$cache/tbb-tsan-${version//[^A-Za-z0-9.+-]/_}"
pkgdir() { find "$prefix" -name TBBConfig.cmake -printf '%h\n' 2>/dev/null | head -1; }
if [[ -n "$(pkgdir)" ]]; then pkgdir; exit 0; fi

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
command -v dpkg-source >/dev/null || $sudo apt-get install -y -q --no-install-recommends dpkg-dev >&2
src_list=/etc/apt/sources.list.d/ipuml-deb-src.sources
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  $sudo tee "$src_list" >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  $sudo apt-get update -q >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get source -q "onetbb=$version" >&2)
src=$(find "$work" -maxdepth 1 -type d -name 'onetbb-*' | head -1)
[[ -n "$src" ]] || { echo "build-tsan-tbb: no onetbb source unpacked in $work" >&2; exit 1; }
echo "build-tsan-tbb: building oneTBB $version with -fsanitize=thread (a few minutes)" >&2
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTBB_TEST=OFF \
  -DTBB_EXAMPLES=OFF -DTBB_STRICT=OFF -DTBBMALLOC_BUILD=ON -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_C_FLAGS="-fsanitize=thread" -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" >&2
cmake --build "$work/build" -j"$(nproc)" >&2
cmake --install "$work/build" >&2
pkgdir
