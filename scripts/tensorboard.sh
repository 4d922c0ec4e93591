#!/usr/bin/env bash
# TensorBoard with the PyTorch-profiler plugin, on a machine whose system Python refuses pip
# (Debian 12 and later: PEP 668, "externally-managed-environment") and whose archive has no
# tensorboard package. The first call makes a virtual environment and installs `tensorboard`
# and `torch-tb-profiler` into it from PyPI; later calls reuse it.
#
#   scripts/tensorboard.sh [LOGDIR] [tensorboard options…]   (LOGDIR default: runs/)
#
# Environment: TB_VENV (default ~/.venvs/rave-ssm-tensorboard), PYTHON (default python3).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TB_VENV:-$HOME/.venvs/rave-ssm-tensorboard}"
PYTHON="${PYTHON:-python3}"
LOGDIR="${1:-$ROOT/runs}"
[ $# -gt 0 ] && shift

if [ ! -x "$VENV/bin/tensorboard" ]; then
  if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    # Debian splits venv's pip bootstrap into python3-venv.
    echo "== installing python3-venv (Debian)" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get install -y python3-venv >&2
  fi
  echo "== creating $VENV with tensorboard and torch-tb-profiler (from PyPI)" >&2
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet tensorboard torch-tb-profiler
fi
[ -d "$LOGDIR" ] || { echo "tensorboard.sh: no such folder '$LOGDIR' (train writes runs under its --out_path)" >&2; exit 2; }
exec "$VENV/bin/tensorboard" --logdir "$LOGDIR" "$@"
