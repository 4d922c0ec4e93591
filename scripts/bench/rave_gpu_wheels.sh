#!/usr/bin/env bash
# The wheels that scripts/bench/rave_gpu_step.py needs on a Python 3.12 x86_64 machine that has
# torch==2.11.0 (and torch's own requirements: typing-extensions, fsspec, setuptools<82, ...)
# and no network:
#
#   scripts/bench/rave_gpu_wheels.sh DEST          # here, with PyPI
#   python -m pip install --no-index --no-deps DEST/*.whl                              # there
#   python -c 'import pkg_resources, fsspec' 2>/dev/null ||
#     python -m pip install --no-index --no-deps DEST/extra/*.whl                      # there
#   python scripts/bench/rave_gpu_step.py --replace-unused-imports --out rave_gpu_step.json      # there
#
# For `rave train` itself (scripts/bench/rave_train.py, gpu_check.sh's rave_parity step), the
# database readers, the command line and the logger come too (TRAIN below).
#
# Every version is pinned and downloaded with --no-deps: acids-rave's own requirements include
# scipy==1.10.0 (no Python 3.12 wheel exists; newer scipy lacks the scipy.signal.kaiser that
# rave/pqmf.py imports), scikit-learn, librosa, GPUtil (no wheel), udls, lmdb, tensorboard, Flask
# and nn-tilde, none of which RAVE's training step uses. rave_gpu_step.py --replace-unused-imports stands
# in for the ones it imports, and takes the PQMF prototype from rave_pqmf_prototypes.json (made
# with scipy 1.10.0, checked bit-identical). torch is not downloaded. Install with --no-deps too,
# so that pip does not look for those.
set -euo pipefail
DEST="${1:?usage: rave_gpu_wheels.sh DEST}"
PYTHON="${PYTHON:-python3}"
WHEELS=(
  acids-rave==2.3.1             # RAVE itself (py3-none-any), the code being timed
  cached-conv==2.5.0            # RAVE's convolutions
  gin-config==0.5.0             # RAVE's configuration (v2.gin)
  einops==0.8.2                 # rearrange, in the PQMF and model
  numpy==2.5.5                  # RAVE's blocks and PQMF (and torchmetrics, pytorch-lightning)
  torchaudio==2.11.0            # Spectrogram in the multiscale STFT distance (torch 2.11.0's)
  pytorch-lightning==1.9.0      # RAVE's LightningModule base (pinned by acids-rave)
  lightning-utilities==0.15.3   # pytorch-lightning and torchmetrics
  torchmetrics==1.9.0           # imported by pytorch-lightning
  pyyaml==6.0.4                 # imported by pytorch-lightning
  tqdm==4.70.1                  # imported by pytorch-lightning
  packaging==26.4               # imported by pytorch-lightning and lightning-utilities
)
# What `rave train` imports beyond the training step: the LMDB database of udls AudioExample
# protobufs, absl's flags, and Lightning's TensorBoard logger (tensorboardX, whose add_audio of
# RAVE's validation writes through soundfile). rave_train.py stands in for GPUtil, librosa,
# requests and flask, which `rave train --gpu N` on a local database never calls.
TRAIN=(
  lmdb==3.0.0                   # rave/dataset.py's database
  udls==1.1.4                   # its AudioExample records (pinned as tests/oracle/requirements.txt)
  protobuf==7.36.2              # udls.generated
  absl-py==2.5.1                # scripts/train.py's flags
  tensorboardX==2.6.5           # pytorch-lightning's TensorBoardLogger without tensorboard
  soundfile==0.14.0             # tensorboardX's add_audio (bundles libsndfile)
  cffi==2.1.1                   # soundfile
  pycparser==3.12               # cffi
)
# torch's own requirements that pytorch-lightning imports, for a torch installed without them
# (pip install --no-deps): lightning imports pkg_resources at import time (setuptools < 82 has it;
# torch 2.11.0 requires setuptools<82) and fsspec. Installed only where missing (above).
EXTRA=(
  setuptools==81.0.0
  fsspec==2026.9.0
)
mkdir -p "$DEST/extra"
get() {
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any "$@"
}
get -d "$DEST" "${WHEELS[@]}" "${TRAIN[@]}"
get -d "$DEST/extra" "${EXTRA[@]}"
# shellcheck disable=SC2010  # pip's wheel names are plain file names
if ls "$DEST" "$DEST/extra" | grep -qi '^torch-'; then
  echo "rave_gpu_wheels.sh: a torch wheel is in $DEST; the device has its own" >&2
  exit 1
fi
# shellcheck disable=SC2012  # the same plain names; ls -l gives the sizes
ls -l "$DEST"/*.whl "$DEST"/extra/*.whl |
  awk '{printf "%10d  %s\n", $5, $NF; t += $5}
       END {printf "%10d  total (%.2f MiB)\n", t, t / 1048576}'
