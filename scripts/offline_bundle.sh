#!/usr/bin/env bash
# Makes offline-bundle/ (gitignored): what training on a GPU node without network access needs
# (an air-gapped cluster; docs/offline_gpu.md), built on a connected machine. The node needs only
# Python with the same torch minor version as the bundle (PyPI's torch==2.11.0 by default) and its
# NVIDIA libraries (the wheels' or a CUDA installation's); no compiler, no system packages.
#   native.tar.xz  unpacked on the node by env.sh:
#     bin/  train, preprocess, profile-report, export and the CUDA-bearing test binaries,
#           compiled against the bundle's torch (scripts/check_cuda_build.sh), stripped; at run
#           time they load the node's own torch, CUDA, CUPTI and NCCL libraries
#     lib/  the shared libraries those binaries need beyond glibc, torch and CUDA (LMDB,
#           libsndfile and its codecs, soxr, protobuf, HDF5, toml++, libunwind, elfutils, ...),
#           and lib/cxx/ the C++ runtime, for nodes older than Debian 12
#   env.sh         `. offline-bundle/env.sh` on the node: PATH and LD_LIBRARY_PATH for the binaries
#   wheels/        for scripts/gpu_check.sh's comparisons: the real RAVE with the packages its
#                  training step and `rave train` import (below), Holistic Trace Analysis
#   MANIFEST.txt   the commit, the torch version, each file's size and each library's origin
#
#   scripts/offline_bundle.sh [--no_wheels]
# Environment: OFFLINE_BUNDLE (default offline-bundle/), CUDA_BUILD_DIR (default build-cuda/),
# JOBS, and TORCH_VERSION (default 2.11.0) for a node whose torch is another version (the
# binaries need the node's minor version: env.sh refuses another).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KIT="${OFFLINE_BUNDLE:-$ROOT/offline-bundle}"
CUDA_BUILD_DIR="${CUDA_BUILD_DIR:-$ROOT/build-cuda}"
export CUDA_BUILD_DIR
WHEELS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no_wheels) WHEELS=0 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "offline_bundle.sh: unknown argument '$1' (accepted: --no_wheels)" >&2; exit 2 ;;
  esac
  shift
done
APPS=(train preprocess profile-report export)
# The test binaries that hold CUDA tests (gpu_check.sh runs those tests by name) and the worker
# process test_trainer's multi-process tests start.
TESTS=(test_trainer test_profiling test_data test_models)
# The wheels benchmarks/rave_gpu_step.py and rave_train.py need on a Python 3.12 x86_64 node
# that has torch==2.11.0, all pinned and downloaded (and installed) with --no-deps: acids-rave's
# own requirements include scipy==1.10.0 (no Python 3.12 wheel; newer scipy lacks the
# scipy.signal.kaiser rave/pqmf.py imports), scikit-learn, librosa, GPUtil (no wheel) and more
# that its training step never uses; --replace-unused-imports stands in for those it imports, and
# the PQMF prototype comes from benchmarks/rave_pqmf_prototypes.json. torch is the node's.
WHEELS_RAVE=(
  acids-rave==2.3.1 cached-conv==2.5.0 gin-config==0.5.0 einops==0.8.2 torchaudio==2.11.0
  pytorch-lightning==1.9.0 lightning-utilities==0.15.3 torchmetrics==1.9.0 pyyaml==6.0.4 tqdm==4.70.1
  packaging==26.4
  # `rave train` beyond the step: the LMDB database of udls AudioExample protobufs, absl's flags,
  # Lightning's TensorBoard logger (tensorboardX; its add_audio writes through soundfile).
  lmdb==3.0.0 udls==1.1.4 protobuf==7.36.2 absl-py==2.5.1 tensorboardX==2.6.5 soundfile==0.14.0 cffi==2.1.1
  pycparser==3.12
  # Holistic Trace Analysis and what it imports beyond pandas, numpy, narwhals and pyparsing.
  holistictraceanalysis==0.5.0 plotly==7.1.0 pydot==4.0.1
)
# torch's own requirements that pytorch-lightning imports (pkg_resources from setuptools < 82,
# fsspec), for a torch installed without them: gpu_check.sh installs these only where missing.
WHEELS_EXTRA=(setuptools==81.0.0 fsspec==2026.9.0)

step() { printf '== offline_bundle: %s (%(%H:%M:%S)T)\n' "$1" -1; }

step "binaries against torch ${TORCH_VERSION:-2.11.0} (scripts/check_cuda_build.sh --targets)"
"$ROOT/scripts/check_cuda_build.sh" --targets "${APPS[*]} ${TESTS[*]}"

step "assemble $KIT"
rm -rf "$KIT.new"
mkdir -p "$KIT.new/bin" "$KIT.new/lib" "$KIT.new/wheels/extra"
for exe in "${APPS[@]}"; do install -m 755 "$CUDA_BUILD_DIR/bin/$exe" "$KIT.new/bin/"; done
for exe in "${TESTS[@]}"; do install -m 755 "$CUDA_BUILD_DIR/tests/$exe" "$KIT.new/bin/"; done
strip --strip-unneeded "$KIT.new"/bin/*

# The shared-library closure, minus what the node brings: glibc's own libraries and the C++ runtime
# (lib/cxx/ covers an older one), torch's libraries (its torch/lib) and CUDA's (the nvidia/*
# wheels, a CUDA installation, the driver).
provided='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libresolv|libutil|libstdc\+\+|libgcc_s|libtorch|libc10|libgomp|libcuda|libcudart|libcupti|libnccl|libnvrtc|libnvToolsExt|libnvtx|libcublas|libcudnn|libcufft|libcurand|libcusolver|libcusparse|libnvJitLink|libnvshmem|libcufile|libshm)[.-]'
for exe in "$KIT.new"/bin/*; do
  ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $provided ]]; then continue; fi
  case "$path" in
    "$CUDA_BUILD_DIR"* | */site-packages/* | /usr/local/cuda*) continue ;;
  esac
  cp -L "$path" "$KIT.new/lib/$name"
  pkg="$(dpkg -S "$path" 2>/dev/null || dpkg -S "/usr$path" 2>/dev/null || true)"
  echo "lib/$name  <- $path (${pkg%%:*})"
done >"$KIT.new/MANIFEST.libs"
# The C++ runtime as a fallback for a node older than Debian 12 (env.sh adds it only when the
# binaries do not start without it).
mkdir -p "$KIT.new/lib/cxx"
for name in libstdc++.so.6 libgcc_s.so.1; do
  cp -L "$(ldd "$KIT.new/bin/train" | awk -v n="$name" '$1 == n {print $3}')" "$KIT.new/lib/cxx/$name"
done
strip --strip-unneeded "$KIT.new"/lib/*.so* "$KIT.new"/lib/cxx/* 2>/dev/null || true

if [ $WHEELS = 1 ]; then
  step "wheels"
  get() {
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any "$@"
  }
  get -d "$KIT.new/wheels" "${WHEELS_RAVE[@]}"
  get -d "$KIT.new/wheels/extra" "${WHEELS_EXTRA[@]}"
fi
install -m 644 "$ROOT/scripts/lib/offline_env.sh" "$KIT.new/env.sh"

{
  echo "offline bundle made $(date -u +%FT%TZ) from $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo '+changes')"
  echo "torch: $("${TORCH_VENV:-$ROOT/.venv-cuda}/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  echo
  (cd "$KIT.new" && find . -type f ! -name MANIFEST.txt -printf '%8k KiB  %P\n' | sort -k3)
  echo
  cat "$KIT.new/MANIFEST.libs"
} >"$KIT.new/MANIFEST.txt"
rm -f "$KIT.new/MANIFEST.libs"
# Binaries and libraries travel compressed (about a third of their size); gpu_check.sh unpacks them.
tar -C "$KIT.new" -cJf "$KIT.new/native.tar.xz" bin lib
rm -rf "$KIT.new/bin" "$KIT.new/lib"

size_kib="$(du -sk "$KIT.new" | cut -f1)"
rm -rf "$KIT"
mv "$KIT.new" "$KIT"
step "done: $KIT, $((size_kib / 1024)) MiB ($KIT/MANIFEST.txt); on the node: . $(basename "$KIT")/env.sh"
