#!/usr/bin/env bash
# Fails when a C++ source differs from what clang-format makes of it (.clang-format at the root).
#   scripts/check_format.sh          check every tracked *.h / *.cpp / *.cu, print the first diffs
#   scripts/check_format.sh --fix    rewrite them in place
# The formatting is clang-format 14's (Debian 12's clang-format-14, which scripts/setup.sh
# installs): other versions format some constructs differently, so a machine without it skips
# the check and says so rather than reporting another version's opinion as a failure.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FORMAT="${CLANG_FORMAT:-clang-format-14}"
FIX=0
case "${1:-}" in
  --fix) FIX=1 ;;
  "") ;;
  -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
  *) echo "check_format.sh: unknown argument '$1' (accepted: --fix)" >&2; exit 2 ;;
esac
if ! command -v "$FORMAT" >/dev/null; then
  echo "check_format.sh: $FORMAT not found: formatting NOT checked (scripts/setup.sh installs it on Debian 12)" >&2
  exit 0
fi
cd "$ROOT"
mapfile -t FILES < <(git ls-files '*.h' '*.cpp' '*.cu')
if [ "$FIX" = 1 ]; then
  printf '%s\0' "${FILES[@]}" | xargs -0 -n 50 "$FORMAT" -i
  echo "check_format.sh: formatted ${#FILES[@]} files"
  exit 0
fi
BAD=()
for f in "${FILES[@]}"; do
  if ! "$FORMAT" "$f" | cmp -s - "$f"; then BAD+=("$f"); fi
done
if [ "${#BAD[@]}" -gt 0 ]; then
  echo "check_format.sh: ${#BAD[@]} of ${#FILES[@]} C++ files are not formatted as .clang-format says:" >&2
  for f in "${BAD[@]:0:5}"; do
    echo "--- $f" >&2
    "$FORMAT" "$f" | diff -u "$f" - | sed -n '3,20p' >&2 || true
  done
  if [ "${#BAD[@]}" -gt 5 ]; then
    printf '  … and %s more, among them %s\n' "$((${#BAD[@]} - 5))" "${BAD[*]:5:15}" >&2
  fi
  echo "check_format.sh: run scripts/check_format.sh --fix (clang-format-14 -i) and commit the result" >&2
  exit 1
fi
echo "check_format.sh: ${#FILES[@]} C++ files formatted as .clang-format says"
