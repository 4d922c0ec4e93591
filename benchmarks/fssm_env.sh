#!/usr/bin/env bash
# The Python side of the side-by-side with foundational_ssm's own models (benchmarks/ssm_step.sh
# --fssm DIR, benchmarks/fssm_step.py), made or completed idempotently:
#   .venv-fssm-torch/  Debian's Python 3.11 with its python3-torch (the LibTorch of build/) and
#                      einops 0.8.1, for foundational_ssm's PyTorch S4D;
#   .venv-fssm-jax/    Debian's Python 3.11 with foundational_ssm's JAX pins
#                      (fssm_requirements.txt) for its S5, plus PyPI's torch==2.11.0 from
#                      .venv-cuda/ through a .pth file (its metrics.py imports torch; made by
#                      scripts/lib/libtorch.sh's rt_pypi_venv when missing).
#   benchmarks/fssm_env.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/benchmarks/deps.sh"
TORCH_ENV="$ROOT/.venv-fssm-torch"
if ! "$TORCH_ENV/bin/python" -c "import torch, einops" 2>/dev/null; then
  echo "fssm_env: making $TORCH_ENV (Debian's torch, einops)" >&2
  /usr/bin/python3 -m venv --system-site-packages "$TORCH_ENV"
  "$TORCH_ENV/bin/pip" install -q --disable-pip-version-check einops==0.8.1
fi
JAX_ENV="$ROOT/.venv-fssm-jax"
REQ="$ROOT/benchmarks/fssm_requirements.txt"
if ! cmp -s "$REQ" "$JAX_ENV/requirements.txt" \
   || ! "$JAX_ENV/bin/python" -c "import torch, jax, equinox, optax, omegaconf, wandb" 2>/dev/null; then
  # shellcheck source=../lib/libtorch.sh
  source "$ROOT/scripts/lib/libtorch.sh"
  rt_pypi_venv >&2
  echo "fssm_env: making $JAX_ENV (foundational_ssm's JAX pins on .venv-cuda's torch)" >&2
  [ -x "$JAX_ENV/bin/python" ] || /usr/bin/python3 -m venv "$JAX_ENV"
  site="$("${TORCH_VENV:-$ROOT/.venv-cuda}/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  own="$("$JAX_ENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$site" > "$own/torch_venv.pth"
  "$JAX_ENV/bin/pip" install -q --disable-pip-version-check -r "$REQ"
  cp "$REQ" "$JAX_ENV/requirements.txt"
fi
