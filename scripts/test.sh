#!/usr/bin/env bash
# Fresh machine → dependencies, the C++ formatting check, Release build, every test, then every fuzz target briefly
# (FUZZ_SECONDS each, default 10; 0 skips them), then the LibTorch 2.x / CUDA compile check.
# This is what CI runs (.ci/run). The build is against the LibTorch scripts/lib/libtorch.sh
# chooses: on a GPU machine, PyPI's CUDA torch, and the CUDA tests run there (none skips).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
# First, as it takes seconds: every C++ source as .clang-format says (scripts/check_format.sh).
"$ROOT/scripts/check_format.sh"
"$ROOT/scripts/build.sh"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
cd "$BUILD_DIR"
# Tests run two at a time: OpenMP threads that spin while waiting would steal the core the other
# test needs. Passive waiting keeps parallel test processes from fighting.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# shellcheck source=lib/libtorch.sh
. "$ROOT/scripts/lib/libtorch.sh"
rt_libtorch_choose >/dev/null
rt_libtorch_locate >/dev/null
# The data-parallel tests start ranks under torchrun: the one of the torch built against (a
# 2.x TCPStore does not take 1.13's clients).
if [ -n "$RT_LT_PYTHON" ]; then
  lt_bin="$(dirname "$(command -v "$RT_LT_PYTHON")")"
  export PATH="$lt_bin:$PATH"
fi
ctest --output-on-failure -j "${TEST_JOBS:-2}" "$@"
# The fuzz targets replay their seed corpora, the regress-* inputs of earlier findings included,
# under ASan and UBSan, then fuzz briefly (scripts/fuzz.sh; longer runs: BENCHMARKS.md).
if [ "${FUZZ_SECONDS:-10}" != 0 ]; then
  BUILD_DIR="$BUILD_DIR" "$ROOT/scripts/fuzz.sh" "${FUZZ_SECONDS:-10}"
fi
# LibTorch 2.x: every non-test target compiled against PyPI's CUDA LibTorch (torch==2.11.0, what
# RT_LIBTORCH=pypi builds against), with the CUPTI tracer and the NCCL backend on, so CI fails
# when the tree stops compiling against 2.x or its CUDA-only code; then the real-RAVE oracle tests against it
# (docs/cuda_build.md; TORCH2_CHECK=0 skips).
# A machine without the toolkit (a bare chroot) cannot configure a CUDA LibTorch: said, not failed.
if [ "${TORCH2_CHECK:-1}" != 0 ]; then
  if [ "$RT_LT_KIND" = pypi ]; then
    echo "test.sh: the build above is PyPI's torch $RT_LT_VERSION with CUDA: no separate LibTorch 2.x check"
  elif [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
    "$ROOT/scripts/check_cuda_build.sh" --ci
  else
    echo "test.sh: NOT compiled against LibTorch 2.x / CUDA: no CUDA toolkit at ${CUDA_HOME:-/usr/local/cuda}" >&2
  fi
fi
