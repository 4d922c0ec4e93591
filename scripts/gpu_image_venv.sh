#!/usr/bin/env bash
# .venv-gpu-image/: a Python 3.12 venv standing in for a GPU node's Python when rehearsing
# (scripts/gpu_check.sh --rehearse, docs/offline_gpu.md): torch==2.11.0 (PyPI's CUDA 13.0 build, as
# there) and those of the image's packages that the check's Python steps import (numpy, pandas,
# narwhals, pyparsing, psutil, scipy — a scipy too new for RAVE, as there — and scikit-learn, which imports it). Nothing of the bundle's own.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${GPU_IMAGE_VENV:-$ROOT/.venv-gpu-image}"
# Python 3.12, as there: on PATH, else a pyenv installation (pyenv's shim fails when 3.12 is
# installed but not selected).
if [ -z "${PY312:-}" ]; then
  for p in python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12; do
    if "$p" -c '' 2>/dev/null; then PY312="$p"; break; fi
  done
fi
[ -n "${PY312:-}" ] || { echo "gpu_image_venv.sh: no working python3.12 (set PY312)" >&2; exit 2; }
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import torch, numpy, pandas, scipy, psutil, sklearn' 2>/dev/null; then
  exit 0
fi
"$PY312" -m venv "$VENV"
P="$VENV/bin/python"
# torch without its 3 GB of NVIDIA wheels (the toolkit in /usr/local/cuda stands in here, as in
# scripts/check_cuda_build.sh), then its pure-Python requirements.
"$P" -m pip install -q --no-deps torch==2.11.0 nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 nvidia-cufile==1.15.1.6
"$P" -m pip install -q --no-deps filelock typing-extensions sympy 'mpmath<1.4' networkx jinja2 MarkupSafe 'setuptools<82'
"$P" -m pip install -q numpy==2.5.5 pandas narwhals pyparsing scipy psutil scikit-learn
