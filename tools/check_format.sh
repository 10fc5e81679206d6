#!/usr/bin/env bash
# Checks that every C and C++ source is formatted as .clang-format says.
#
#   tools/check_format.sh          # check; exit 1 if any file is unformatted
#   tools/check_format.sh --fix    # reformat the files in place
#
# Files: *.h, *.c and *.cpp under common/, chapters/, examples/ and
# benchmarks/, build output excluded. Formatting differs between clang-format
# releases; the reference is Debian's clang-format 14 (override the binary with
# CLANG_FORMAT=...).
set -euo pipefail

cd "$(dirname "$0")/.."
clang_format="${CLANG_FORMAT:-clang-format}"

mode=check
case "${1:-}" in
  "") ;;
  --fix) mode=fix ;;
  *)
    echo "usage: $0 [--fix]" >&2
    exit 2
    ;;
esac

if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "check_format: $clang_format not found (apt-get install clang-format)" >&2
  exit 2
fi

dirs=()
for dir in common chapters examples benchmarks; do
  [[ -d "$dir" ]] && dirs+=("$dir")
done
files=()
if ((${#dirs[@]})); then
  while IFS= read -r -d '' file; do
    files+=("$file")
  done < <(find "${dirs[@]}" \
    \( -name build -o -name output -o -name .git -o -name '__pycache__' \) -prune \
    -o -type f \( -name '*.h' -o -name '*.c' -o -name '*.cpp' \) -print0 | sort -z)
fi

if ((${#files[@]} == 0)); then
  echo "check_format: no C/C++ files found"
  exit 0
fi

if [[ "$mode" == fix ]]; then
  "$clang_format" -i --style=file "${files[@]}"
  echo "check_format: formatted ${#files[@]} file(s)"
  exit 0
fi

bad=()
for file in "${files[@]}"; do
  if ! "$clang_format" --dry-run --Werror --style=file "$file" 2>/dev/null; then
    bad+=("$file")
  fi
done

if ((${#bad[@]})); then
  echo "check_format: ${#bad[@]} of ${#files[@]} file(s) are not formatted:" >&2
  for file in "${bad[@]}"; do
    echo "  $file" >&2
  done
  echo "see the changes with: $clang_format --dry-run --style=file FILE" >&2
  echo "or fix them all with: tools/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} file(s) formatted ($("$clang_format" --version))"
