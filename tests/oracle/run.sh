#!/usr/bin/env bash
# The real RAVE as the test oracle: makes (once) a venv holding acids-rave==2.3.1 and every
# package it imports, pinned in requirements.txt beside this script (torch 2.5.0 and its own
# torchaudio; PyPI only), then runs rave_oracle.py with the given arguments, which writes the
# golden tensors under tests/assets/golden/ (see its docstring). Test and reference tooling
# only: train, preprocess, export and profile-report never need Python.
#   tests/oracle/run.sh                      # every golden file
#   tests/oracle/run.sh --only rave_v2_step  # one
# VENV overrides the venv's place (default: .venv-rave at the repository root, gitignored).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${VENV:-$ROOT/.venv-rave}"
PYTHON="${PYTHON:-python3}"
if ! "$VENV/bin/python" -c "import rave" 2>/dev/null \
   || ! cmp -s "$HERE/requirements.txt" "$VENV/requirements.txt"; then
  echo "oracle: making $VENV (acids-rave 2.3.1, pinned in tests/oracle/requirements.txt)" >&2
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$HERE/requirements.txt"
  cp "$HERE/requirements.txt" "$VENV/requirements.txt"
fi
# RAVE's import prints gin's search-path notes and deprecation warnings: keep them out of the way.
exec "$VENV/bin/python" -W ignore "$HERE/rave_oracle.py" "$@"
