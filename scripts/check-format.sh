#!/usr/bin/env bash
# Fails when a C++ file does not follow .clang-format (run with --fix to reformat in place).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format not installed, skipping" >&2; exit 0; }
mapfile -t files < <(git ls-files '*.hpp' '*.cpp' '*.h' '*.cc')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f" >&2
    bad=1
  fi
done
exit $bad
