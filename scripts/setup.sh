#!/usr/bin/env bash
# Installs the build and runtime dependencies from Debian's archive, idempotently:
# packages already installed are skipped, so a second run changes nothing and needs no network.
# Then chooses the LibTorch to build against and says which and why (scripts/lib/libtorch.sh:
# a CUDA torch python3 imports, PyPI's CUDA torch in a venv where an NVIDIA driver is present,
# Debian's otherwise; RT_LIBTORCH=debian|pypi|python|/path/to/libtorch overrides), and makes the
# venv when the choice is PyPI's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# libtorch-dev brings oneDNN (libdnnl2 on Debian 12), whose sgemm our own CPU products call also
# in a build against PyPI's torch (models/common/row_linear.h, docs/cli.md "Threads and BLAS kernels").
PACKAGES=(
  build-essential cmake ccache pkg-config git
  libtorch-dev libgloo-dev libopenblas0-openmp
  libsndfile1-dev libsoxr-dev libsox-dev liblmdb-dev lmdb-utils
  libprotobuf-dev protobuf-compiler
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libbenchmark-dev libhdf5-dev libunwind-dev libdw-dev
)
# Tools the tests and examples use to make and read fixtures (real encoders, not mocks).
PACKAGES+=(sox flac vorbis-tools)
# Recorded speech for the export fidelity tests: alsa-utils installs speaker-test's spoken
# channel names under /usr/share/sounds/alsa (tests/e2e/e2e_fixtures.h, speech_fixture).
PACKAGES+=(alsa-utils)
# profile-report --plots draws with gnuplot's pngcairo terminal; the example-script test drives
# the menu through a pseudo-terminal with python3's pty module.
PACKAGES+=(gnuplot-nox fonts-dejavu-core python3)
# scripts/check_cuda_build.sh makes a venv for PyPI's torch (the CUDA LibTorch RT_LIBTORCH=pypi builds against).
PACKAGES+=(python3-venv)
# Test dependency only (the trainer never needs Python): torch's own launcher, torchrun, which
# the data-parallel tests start `train` under (python3-torch is the same LibTorch version).
# The export tests load exported TorchScript files with Python's torch.jit.load, as users of
# the files do (tests/export/check_torchscript.py).
PACKAGES+=(python3-torch)
# scripts/check_trace_consumers.sh (and the TraceConsumers tests when HTA_DIR / TB_PLUGIN_DIR
# point at checkouts): Holistic Trace Analysis needs pandas, TensorBoard's profiler plugin
# pandas and absl.
PACKAGES+=(python3-pandas python3-absl)
# rsync: docs/distributed.md's gather of a multi-node run's files, which WhatEachNodeWrites.* runs.
PACKAGES+=(rsync)
# The fuzz targets (tests/fuzz/, scripts/fuzz.sh, run briefly by scripts/test.sh): clang with
# libFuzzer and the sanitizer runtimes (libclang-rt-dev, for the default clang; clang only
# recommends it, and recommendations are not installed here).
PACKAGES+=(clang libclang-rt-dev)
# scripts/check_format.sh (run by scripts/test.sh) formats with clang-format 14, Debian 12's; on
# another release (Debian 13 has no clang-format-14) the check says it was skipped.
if [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" = bookworm ]; then PACKAGES+=(clang-format-14); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} packages present"
fi

# Debian's default BLAS is the reference one (~20x slower at matmul). libopenblas0-openmp
# registers itself through update-alternatives; make sure it is the one selected.
for alt in libblas.so.3-x86_64-linux-gnu liblapack.so.3-x86_64-linux-gnu; do
  target=$(update-alternatives --list "$alt" 2>/dev/null | grep openblas | grep openmp | head -1 || true)
  if [ -n "$target" ] && [ "$(readlink -f /etc/alternatives/$alt)" != "$(readlink -f "$target")" ]; then
    ${SUDO:-} update-alternatives --set "$alt" "$target" >/dev/null
  fi
done

# shellcheck source=lib/libtorch.sh
. "$ROOT/scripts/lib/libtorch.sh"
rt_libtorch_choose
rt_libtorch_line
case "$RT_LT_KIND" in
  pypi) rt_pypi_venv ;;
  python | path) rt_libtorch_locate ;;
esac

# Test dependency only: ONNX Runtime and the onnx checker for the ONNX export's tests
# (scripts/onnx_venv.sh). Without PyPI (an offline machine) those tests skip; under CI they fail.
"$ROOT/scripts/onnx_venv.sh" || echo "setup: no ONNX Runtime venv (PyPI unreachable?): the OnnxRuntime test will skip" >&2
