#!/usr/bin/env bash
# scripts/gpu_check.sh --rehearse in a fresh Debian chroot that has none of the project's
# dependencies: only the bundle (offline-bundle/), the Python 3.12 stand-in for the node's Python with PyPI's
# torch (.venv-gpu-image/ and the Python it was made from) and the CUDA toolkit torch's wheel
# loads, each mounted read-only (docs/offline_gpu.md). Proves that the bundle alone runs the check.
#
#   scripts/gpu_rehearse_chroot.sh BASE.tar    BASE.tar: a minimal Debian root, such as the
#                                              debootstrap --variant=minbase tree packed with tar
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE="${1:?usage: gpu_rehearse_chroot.sh BASE.tar}"
R="$(mktemp -d /tmp/gpu-rehearse-root.XXXXXX)"
VENV="$ROOT/.venv-gpu-image"
[ -d "$ROOT/offline-bundle" ] || { echo "gpu_rehearse_chroot.sh: no offline-bundle/ (scripts/offline_bundle.sh)" >&2; exit 2; }
[ -x "$VENV/bin/python" ] || "$ROOT/scripts/gpu_image_venv.sh"
PYHOME="$(dirname "$(dirname "$(readlink -f "$VENV/bin/python")")")"  # the interpreter's prefix
CUDA="$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")"
tar -C "$R" -xf "$BASE"
mounts=()
bind() {  # bind SRC [DEST]: read-only, at the same path inside
  mkdir -p "$R${2:-$1}"
  mount --bind -o ro "$1" "$R${2:-$1}"
  mounts=("$R${2:-$1}" "${mounts[@]}")
}
cleanup() {
  for m in "${mounts[@]}" "$R/tmp" "$R/dev" "$R/proc"; do umount "$m" 2>/dev/null || true; done
  rm -rf "$R"
}
trap cleanup EXIT
mount --bind /proc "$R/proc"
mount --bind /dev "$R/dev"
mount -t tmpfs tmpfs "$R/tmp"
bind "$PYHOME"
bind "$VENV"
bind "$CUDA" /usr/local/cuda
git clone -q "$ROOT" "$R/src/project"
cp -r "$ROOT/scripts/gpu_check.sh" "$R/src/project/scripts/"  # the working tree's, committed or not
cp -r "$ROOT/offline-bundle" "$R/src/project/"
chroot "$R" bash -c "cd /src/project && GPU_PYTHON='$VENV/bin/python' GPU_CHECK_BUDGET_S=1500 scripts/gpu_check.sh --rehearse"
