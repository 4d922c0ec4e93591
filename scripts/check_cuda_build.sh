#!/usr/bin/env bash
# Builds the project against the CUDA LibTorch of PyPI's torch wheel, the version the GPU
# machines run (torch==2.11.0+cu130), on a machine without a GPU, then runs the test suite on
# the CPU (CUDA-only tests skip with their reason). docs/cuda_build.md explains the choices.
#
#   scripts/check_cuda_build.sh [CTEST ARGS…]    venv, configure, build every target, ctest
#   scripts/check_cuda_build.sh --compile-only   the non-test targets only, no tests (fails when
#                                                the tree stops compiling against 2.x)
#   scripts/check_cuda_build.sh --ci             --compile-only, then the real-RAVE oracle tests
#                                                (RaveOracle*) against 2.x: what scripts/test.sh runs
#   scripts/check_cuda_build.sh --targets "A B"  those targets only (tests configured), no ctest
#                                                (scripts/gpu_kit.sh: what the GPU machine runs)
#
# Environment: TORCH_VENV (default .venv-cuda/), CUDA_BUILD_DIR (default build-cuda/),
#   BUILD_TYPE (default Release),
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
TORCH_VENV="${TORCH_VENV:-$ROOT/.venv-cuda}"
# One folder for both modes (a switch rebuilds nothing); Release, the flags the tests run with.
CUDA_BUILD_DIR="${CUDA_BUILD_DIR:-$ROOT/build-cuda}"
BUILD_TYPE="${BUILD_TYPE:-Release}"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
TORCH_VERSION="${TORCH_VERSION:-2.11.0}"
JOBS="${JOBS:-$(nproc)}"
# torch 2.11.0's own pins (its METADATA Requires-Dist) for the libraries the toolkit lacks.
NVIDIA_EXTRAS=(nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 nvidia-cufile==1.15.1.6)
# torch's pure-Python requirements, for `import torch` (torch.utils.cmake_prefix_path).
# All with --no-deps too (their own requirements are listed: mpmath, MarkupSafe), so that pip's
# resolver does not report torch's NVIDIA requirements as missing.
TORCH_PY_DEPS=(typing-extensions filelock sympy mpmath networkx jinja2 MarkupSafe fsspec numpy)

step() { printf '== check_cuda_build: %s (%(%H:%M:%S)T)\n' "$1" -1; }

[ -x "$CUDA_HOME/bin/nvcc" ] || {
  echo "check_cuda_build.sh: no CUDA toolkit at $CUDA_HOME (nvcc missing); set CUDA_HOME" >&2
  exit 2
}

# The toolkit's libraries (CUDA runtime, cuBLAS, cuDNN, NCCL, CUPTI) for `import torch` and the
# binaries: this workplace's machines list them for the dynamic linker (ld.so.conf.d), a fresh
# root with the toolkit mounted does not.
export LD_LIBRARY_PATH="$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

step "Debian dependencies"
"$ROOT/scripts/setup.sh"

step "torch==$TORCH_VERSION in $TORCH_VENV"
PY="$TORCH_VENV/bin/python"
installed=""
[ -x "$PY" ] && installed="$("$PY" -m pip show torch 2>/dev/null | sed -n 's/^Version: //p' || true)"
if [ "$installed" != "$TORCH_VERSION" ]; then
  [ -x "$PY" ] || /usr/bin/python3 -m venv "$TORCH_VENV"
  # --no-deps: torch's full requirement set pulls about 3 GB of NVIDIA wheels that duplicate the
  # toolkit in $CUDA_HOME (docs/cuda_build.md).
  "$PY" -m pip install -q --no-deps "torch==$TORCH_VERSION" "${NVIDIA_EXTRAS[@]}"
  "$PY" -m pip install -q --no-deps "${TORCH_PY_DEPS[@]}"
fi
# Which CUDA the wheel was built for, against the local toolkit: the headers, the CMake config's
# nvcc checks and the libraries the binaries load at run time must all be one CUDA release.
read -r torch_full torch_cuda prefix < <("$PY" - <<'EOF'
import warnings
warnings.simplefilter("ignore")
import torch, torch.utils
print(torch.__version__, torch.version.cuda, torch.utils.cmake_prefix_path)
EOF
)
[ -n "${prefix:-}" ] || { echo "check_cuda_build.sh: $PY cannot import torch (see the error above)" >&2; exit 1; }
toolkit_cuda="$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
echo "torch $torch_full built for CUDA $torch_cuda; toolkit $CUDA_HOME: CUDA $toolkit_cuda"
if [ "$torch_cuda" = "None" ]; then
  echo "check_cuda_build.sh: torch $torch_full in $TORCH_VENV is a CPU-only build; a CUDA one is needed" >&2
  exit 1
fi
if [ "${torch_cuda%%.*}" != "${toolkit_cuda%%.*}" ]; then
  echo "check_cuda_build.sh: torch $torch_full targets CUDA $torch_cuda but $CUDA_HOME is CUDA $toolkit_cuda;" \
    "point CUDA_HOME at a CUDA ${torch_cuda%%.*} toolkit (libtorch_cuda.so links CUDA ${torch_cuda%%.*}'s sonames)" >&2
  exit 1
fi

step "configure $CUDA_BUILD_DIR"
tests=ON
[ $COMPILE_ONLY = 1 ] && tests=OFF
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cmake -S "$ROOT" -B "$CUDA_BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCUDAToolkit_ROOT="$CUDA_HOME" -DCUDA_TOOLKIT_ROOT_DIR="$CUDA_HOME" \
  -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" -DRT_BUILD_TESTS="$tests" >"$log" 2>&1 || {
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
  # CI's tests run against Debian's 1.13, whose float32 hann window is not RAVE's (a few values
  # one ulp off): the float64 gradients against the real RAVE meet their 1e-6 goal only on 2.x.
  # So the oracle tests also run here, against the GPU machines' LibTorch (docs/rave_fidelity.md).
  step "the real-RAVE oracle tests against torch $TORCH_VERSION"
  cmake -S "$ROOT" -B "$CUDA_BUILD_DIR" -DRT_BUILD_TESTS=ON >/dev/null
  cmake --build "$CUDA_BUILD_DIR" -j "$JOBS" --target test_models
  (cd "$CUDA_BUILD_DIR" && OMP_WAIT_POLICY=PASSIVE ./tests/test_models --gtest_filter='RaveOracle*')
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
