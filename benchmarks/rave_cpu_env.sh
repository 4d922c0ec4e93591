#!/usr/bin/env bash
# What benchmarks/bench.py needs to time the real RAVE against the native trainer on the same
# LibTorch, on the CPU (idempotent; benchmarks/run.sh calls it):
#   - build-cuda/bin/{rave_bench,train,preprocess}: the native programs built against PyPI's
#     torch==2.11.0 (scripts/check_cuda_build.sh --targets; they run on the CPU);
#   - .venv-rave-cpu/: Debian's Python 3.11 with acids-rave 2.3.1 and what it imports, pinned in
#     rave_cpu_requirements.txt, whose torch is the one in .venv-cuda/ (a .pth file), i.e. the
#     very libraries the native programs load.
#   benchmarks/rave_cpu_env.sh        VENV overrides the venv's place
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HERE="$ROOT/benchmarks"
VENV="${VENV:-$ROOT/.venv-rave-cpu}"
TORCH_VENV="${TORCH_VENV:-$ROOT/.venv-cuda}"
JOBS="${JOBS:-1}" "$ROOT/scripts/check_cuda_build.sh" --targets "rave_bench train preprocess"
site="$("$TORCH_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if ! cmp -s "$HERE/rave_cpu_requirements.txt" "$VENV/requirements.txt" \
   || ! "$VENV/bin/python" -c "import torch, torchaudio, pytorch_lightning, gin, cached_conv, nn_tilde" 2>/dev/null; then
  echo "rave_cpu_env: making $VENV (acids-rave 2.3.1 on $TORCH_VENV's torch)" >&2
  [ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv "$VENV"
  own="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$site" > "$own/torch_venv.pth"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -r "$HERE/rave_cpu_requirements.txt"
  cp "$HERE/rave_cpu_requirements.txt" "$VENV/requirements.txt"
fi
# RAVE imports GPUtil and librosa at module level; the benchmarks stand in for them (rave_gpu_step.py).
PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" "$VENV/bin/python" -W ignore -c 'import torch
from rave_gpu_step import replace_unused_imports
replaced = replace_unused_imports()
import rave
print("rave_cpu_env: acids-rave imports on torch", torch.__version__, "from", torch.__file__,
      "; stand-ins for", ", ".join(replaced) or "nothing")'
