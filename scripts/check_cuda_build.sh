#!/usr/bin/env bash
# Builds the project against the CUDA LibTorch of PyPI's torch wheel (torch==2.11.0+cu130, what
# RT_LIBTORCH=pypi builds against on a GPU machine) on a machine without a GPU, then runs the
# test suite on the CPU (CUDA-only tests skip with their reason). docs/cuda_build.md explains the choices.
#
#   scripts/check_cuda_build.sh [CTEST ARGS…]    venv, configure, build every target, ctest
#   scripts/check_cuda_build.sh --compile-only   the non-test targets only, no tests (fails when
#                                                the tree stops compiling against 2.x)
#   scripts/check_cuda_build.sh --ci             --compile-only, then the real-RAVE oracle tests
#                                                (RaveOracle*, less the 4 slowest) against 2.x:
#                                                what scripts/test.sh runs
#   scripts/check_cuda_build.sh --targets "A B"  those targets only (tests configured), no ctest
#                                                (scripts/offline_bundle.sh: what a GPU node runs)
#
# Environment: TORCH_VENV (default .venv-cuda/), CUDA_BUILD_DIR (default build-cuda/),
#   BUILD_TYPE (default Release), UNITY_BATCH (sources per unity compiler run, default 32),
#   CUDA_HOME (default /usr/local/cuda), TORCH_VERSION (default 2.11.0), JOBS, TEST_JOBS.
# The venv holds torch without most of its NVIDIA wheels: the local CUDA toolkit provides the
# CUDA runtime, cuDNN, NCCL and CUPTI; only the three libraries libtorch_cuda.so needs that the
# toolkit lacks are installed (cuSPARSELt, NVSHMEM, cuFile).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COMPILE_ONLY=0
CI_ORACLE=0
ONLY_TARGETS=""
if [[ "${1:-}" == "--compile-only" ]]; then
  COMPILE_ONLY=1
  shift
elif [[ "${1:-}" == "--ci" ]]; then
  COMPILE_ONLY=1
  CI_ORACLE=1
  shift
elif [[ "${1:-}" == "--targets" ]]; then
  ONLY_TARGETS="${2:?--targets needs a space-separated list of target names}"
  shift 2
fi
export TORCH_VENV="${TORCH_VENV:-$ROOT/.venv-cuda}"
# One folder for both modes (a switch rebuilds nothing); Release, the flags the tests run with.
CUDA_BUILD_DIR="${CUDA_BUILD_DIR:-$ROOT/build-cuda}"
BUILD_TYPE="${BUILD_TYPE:-Release}"
UNITY_BATCH="${UNITY_BATCH:-32}"
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export TORCH_VERSION="${TORCH_VERSION:-2.11.0}"
JOBS="${JOBS:-$(nproc)}"

step() { printf '== check_cuda_build: %s (%(%H:%M:%S)T)\n' "$1" -1; }

[ -x "$CUDA_HOME/bin/nvcc" ] || {
  echo "check_cuda_build.sh: no CUDA toolkit at $CUDA_HOME (nvcc missing); set CUDA_HOME" >&2
  exit 2
}

step "Debian dependencies"
RT_LIBTORCH=debian "$ROOT/scripts/setup.sh"

step "torch==$TORCH_VERSION in $TORCH_VENV"
# The venv, torch's LibTorch in it and the toolkit checked against the CUDA it was built for
# (scripts/lib/libtorch.sh, what RT_LIBTORCH=pypi builds against).
# shellcheck source=lib/libtorch.sh
. "$ROOT/scripts/lib/libtorch.sh"
RT_LIBTORCH=pypi rt_libtorch_choose
rt_pypi_venv
rt_libtorch_locate
echo "torch $RT_LT_VERSION built for CUDA $RT_LT_CUDA; toolkit $CUDA_HOME"
if [ "$RT_LT_CUDA" = "None" ]; then
  echo "check_cuda_build.sh: torch $RT_LT_VERSION in $TORCH_VENV is a CPU-only build; a CUDA one is needed" >&2
  exit 1
fi
rt_libtorch_cmake_args

step "configure $CUDA_BUILD_DIR"
tests=ON
[ $COMPILE_ONLY = 1 ] && tests=OFF
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# UNITY_BATCH sources to a compiler run, not the main build's 8: a check build is compiled whole
# rather than edited file by file (docs/cuda_build.md).
cmake -S "$ROOT" -B "$CUDA_BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "${RT_LT_CMAKE_ARGS[@]}" \
  -DCMAKE_UNITY_BUILD_BATCH_SIZE="$UNITY_BATCH" \
  -DRT_BUILD_TESTS="$tests" >"$log" 2>&1 || {
  cat "$log" >&2
  exit 1
}
grep -E '^-- (LibTorch|rt_profiling|rt_distributed)' "$log"
# The point of this build: the CUDA-only code is compiled. A configuration that silently lost
# CUPTI or NCCL would pass while compiling none of it.
grep -q "^-- LibTorch $TORCH_VERSION; CUPTI GPU tracer: ON" "$log" || {
  echo "check_cuda_build.sh: the CUPTI tracer is off against torch $TORCH_VERSION (CMake output above)" >&2
  exit 1
}
grep -q '^-- rt_distributed: .*NCCL ON' "$log" || {
  echo "check_cuda_build.sh: the NCCL backend is off against torch $TORCH_VERSION (CMake output above)" >&2
  exit 1
}

if [ -n "$ONLY_TARGETS" ]; then
  step "build $ONLY_TARGETS ($JOBS jobs)"
  # shellcheck disable=SC2086  # a space-separated list of target names
  cmake --build "$CUDA_BUILD_DIR" -j "$JOBS" --target $ONLY_TARGETS
  step "done ($ONLY_TARGETS)"
  exit 0
fi
step "build ($JOBS jobs)"
cmake --build "$CUDA_BUILD_DIR" -j "$JOBS"

if [ $CI_ORACLE = 1 ]; then
  # The real-RAVE oracle tests against PyPI's CUDA LibTorch (the main suite runs them against
  # Debian's 1.13), less the float64 gradients of the four largest models, whose code paths the
  # smaller configurations share (docs/cuda_build.md).
  step "the real-RAVE oracle tests against torch $TORCH_VERSION"
  cmake -S "$ROOT" -B "$CUDA_BUILD_DIR" -DRT_BUILD_TESTS=ON >/dev/null
  cmake --build "$CUDA_BUILD_DIR" -j "$JOBS" --target test_models
  (cd "$CUDA_BUILD_DIR" && OMP_WAIT_POLICY=PASSIVE ctest --output-on-failure -j "${TEST_JOBS:-2}" -R '^RaveOracle' \
    -E 'Float64/"rave_(v3|discrete_v3|v2_descript_discriminator|v2_wasserstein)_step"')
fi
if [ $COMPILE_ONLY = 1 ]; then
  step "done (compile only$([ $CI_ORACLE = 1 ] && echo ', oracle tests'))"
  exit 0
fi
step "test suite on the CPU"
cd "$CUDA_BUILD_DIR"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# The data-parallel tests start ranks under torchrun: the venv's, of the same torch as this build
# (Debian's torchrun is 1.13's, whose TCPStore 2.x clients cannot join).
export PATH="$TORCH_VENV/bin:$PATH"
ctest --output-on-failure -j "${TEST_JOBS:-2}" "$@"
step "done"
