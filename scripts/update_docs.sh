#!/usr/bin/env bash
# Regenerates docs/config.md, the config reference, from the schema: `train --config_reference`.
#   scripts/update_docs.sh [TRAIN]           write docs/config.md (TRAIN: default build/bin/train)
#   scripts/update_docs.sh --check [TRAIN]   exit 1 when docs/config.md differs (a CTest test)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECK=0
if [[ "${1:-}" == "--check" ]]; then
  CHECK=1
  shift
fi
TRAIN="${1:-${BUILD_DIR:-$ROOT/build}/bin/train}"
DOC="$ROOT/docs/config.md"
if [[ ! -x "$TRAIN" ]]; then
  echo "update_docs.sh: no train binary at $TRAIN (build it first: scripts/build.sh)" >&2
  exit 2
fi
generated="$("$TRAIN" --config_reference)"
if [[ $CHECK == 1 ]]; then
  if ! diff -u "$DOC" <(printf '%s\n' "$generated") >&2; then
    echo "docs/config.md is stale: the config schema changed. Regenerate it with" >&2
    echo "  scripts/update_docs.sh   (or: build/bin/train --config_reference > docs/config.md)" >&2
    exit 1
  fi
  echo "docs/config.md matches the config schema"
else
  mkdir -p "$ROOT/docs"
  printf '%s\n' "$generated" > "$DOC"
  echo "wrote $DOC"
fi
