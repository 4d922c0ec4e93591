#!/usr/bin/env bash
# The ONNX export's test oracle: makes (once, and again when the pins change) .venv-onnx at the
# repository root with ONNX Runtime and the onnx checker pinned in
# tests/export/onnx_requirements.txt (PyPI). tests/export/onnx_runtime_test.cpp runs
# tests/export/check_onnx.py with it. Test tooling only: export never needs Python.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ONNX_VENV:-$ROOT/.venv-onnx}"
REQ="$ROOT/tests/export/onnx_requirements.txt"
if "$VENV/bin/python" -c "import onnxruntime, onnx" 2>/dev/null && cmp -s "$REQ" "$VENV/requirements.txt"; then
  exit 0
fi
echo "onnx_venv: making $VENV (onnxruntime, onnx: $REQ)" >&2
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ"
cp "$REQ" "$VENV/requirements.txt"
