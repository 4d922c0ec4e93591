#!/usr/bin/env bash
# Makes gpu-kit/ (gitignored): everything scripts/gpu_check.sh needs on a GPU machine that has
# Python 3.12 with torch==2.11.0+cu130 and its NVIDIA wheels, CMake and nvcc, but no Debian
# packages and no network. Built here, on a CPU machine (docs/gpu_check.md):
#   native.tar.xz, unpacked there by gpu_check.sh:
#   bin/     train, preprocess, profile-report and the CUDA-bearing test binaries, compiled against
#            PyPI's torch==2.11.0 (scripts/check_cuda_build.sh), stripped; at run time they load
#            the GPU machine's own torch, CUDA, CUPTI and NCCL libraries
#   lib/     the Debian shared libraries those binaries need beyond glibc, torch and CUDA (LMDB,
#            libsndfile and its codecs, soxr, protobuf, HDF5, toml++, libunwind, elfutils, ...)
#   wheels/  pure-Python wheels the GPU image lacks: the real RAVE with the packages it imports
#            there (scripts/bench/rave_gpu_wheels.sh), Holistic Trace Analysis and what it imports
#   MANIFEST.txt  each file's size and origin
# The kit must stay within 40 MiB, small enough to copy to a node that has no network; this
# script fails when it does not.
#
#   scripts/gpu_kit.sh            build what is missing, then (re)assemble gpu-kit/
# Environment: GPU_KIT (default gpu-kit/), CUDA_BUILD_DIR (default build-cuda/), JOBS.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KIT="${GPU_KIT:-$ROOT/gpu-kit}"
CUDA_BUILD_DIR="${CUDA_BUILD_DIR:-$ROOT/build-cuda}"
export CUDA_BUILD_DIR
LIMIT_MIB=40
# rave_bench: the native side of bench.py's comparison with the real RAVE on the CPU
# (gpu_check.sh's cpu_vs_rave step).
APPS=(train preprocess profile-report rave_bench)
# The test binaries that hold CUDA tests (gpu_check.sh runs those tests by name) and the worker
# process test_trainer's multi-process tests start.
TESTS=(test_trainer test_profiling test_data test_models)
# Holistic Trace Analysis and what it imports that the GPU image lacks (it has pandas, numpy,
# narwhals, pyparsing): pinned, pure Python.
HTA_WHEELS=(holistictraceanalysis==0.5.0 plotly==7.1.0 pydot==4.0.1)

step() { printf '== gpu_kit: %s (%(%H:%M:%S)T)\n' "$1" -1; }

step "binaries against torch 2.11 (scripts/check_cuda_build.sh --targets)"
"$ROOT/scripts/check_cuda_build.sh" --targets "${APPS[*]} ${TESTS[*]}"

step "assemble $KIT"
rm -rf "$KIT.new"
mkdir -p "$KIT.new/bin" "$KIT.new/lib" "$KIT.new/wheels"
for exe in "${APPS[@]}"; do install -m 755 "$CUDA_BUILD_DIR/bin/$exe" "$KIT.new/bin/"; done
for exe in "${TESTS[@]}"; do install -m 755 "$CUDA_BUILD_DIR/tests/$exe" "$KIT.new/bin/"; done
strip --strip-unneeded "$KIT.new"/bin/*

# The shared-library closure, minus what the GPU machine brings: glibc's own libraries and the C++
# runtime (its Python 3.12 image is newer than Debian 12), torch's libraries (the venv's
# torch/lib) and CUDA's (the venv's nvidia/* wheels and the driver).
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
# The C++ runtime as a fallback for an image older than Debian 12 (gpu_check.sh adds it only when
# the binaries do not start without it).
mkdir -p "$KIT.new/lib/cxx"
for name in libstdc++.so.6 libgcc_s.so.1; do
  cp -L "$(ldd "$KIT.new/bin/train" | awk -v n="$name" '$1 == n {print $3}')" "$KIT.new/lib/cxx/$name"
done
strip --strip-unneeded "$KIT.new"/lib/*.so* "$KIT.new"/lib/cxx/* 2>/dev/null || true

step "wheels"
"$ROOT/scripts/bench/rave_gpu_wheels.sh" "$KIT.new/wheels"
# The GPU image has numpy (2.5.2 when read); 15 MiB of the kit's 40 are not spent on it again.
rm -f "$KIT.new"/wheels/numpy-*.whl
python3 -m pip download -q --no-deps --only-binary=:all: -d "$KIT.new/wheels" "${HTA_WHEELS[@]}"

{
  echo "gpu-kit made $(date -u +%FT%TZ) from $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo '+changes')"
  echo "torch: $("$ROOT/.venv-cuda/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
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
if [ "$size_kib" -gt $((LIMIT_MIB * 1024)) ]; then
  echo "gpu_kit.sh: the kit is $((size_kib / 1024)) MiB, over its $LIMIT_MIB MiB (MANIFEST: $KIT.new/MANIFEST.txt)" >&2
  exit 1
fi
rm -rf "$KIT"
mv "$KIT.new" "$KIT"
step "done: $KIT, $((size_kib / 1024)) MiB ($KIT/MANIFEST.txt)"
