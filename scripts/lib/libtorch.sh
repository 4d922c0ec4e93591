# shellcheck shell=bash
# Which LibTorch the build uses, and getting it ready. Sourced by scripts/setup.sh,
# scripts/build.sh, scripts/demo.sh and scripts/check_cuda_build.sh (docs/gpu.md explains the
# choice); `bash scripts/lib/libtorch.sh` prints the choice and why, changing nothing.
#
# RT_LIBTORCH chooses; unset, the machine does, first match wins:
#   python            python3 (RT_PYTHON) imports a CUDA-capable torch: a cluster module, a
#                     container image. The build uses that torch's LibTorch.
#   pypi              an NVIDIA driver is present (nvidia-smi answers, or
#                     /proc/driver/nvidia/version exists): PyPI's torch==2.11.0 (its CUDA
#                     LibTorch) in the project venv TORCH_VENV (default .venv-cuda/).
#   debian            otherwise: Debian's libtorch-dev (CPU-only), installed by scripts/setup.sh.
#   /path/to/libtorch an unpacked LibTorch (the folder holding share/cmake/Torch/), e.g.
#                     pytorch.org's zip, or any build of one.
# (RT_NVIDIA_PROC replaces /proc/driver/nvidia/version, for the tests.)
# A CUDA LibTorch (pypi, or python / path when theirs has CUDA) is built with the CUDA toolkit at
# CUDA_HOME (default /usr/local/cuda), of the CUDA major version the LibTorch was built for.

RT_TORCH_VERSION="${TORCH_VERSION:-2.11.0}"
# torch 2.11.0's own pins (its METADATA Requires-Dist) for the NVIDIA libraries a CUDA toolkit
# with cuDNN and NCCL still lacks.
RT_NVIDIA_EXTRAS=(nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 nvidia-cufile==1.15.1.6)
# torch's pure-Python requirements, for `import torch` (torch.utils.cmake_prefix_path). With
# --no-deps too (their own requirements are listed), so that pip does not report torch's NVIDIA
# requirements as missing.
RT_TORCH_PY_DEPS=(typing-extensions filelock sympy mpmath networkx jinja2 MarkupSafe fsspec numpy)

rt_root() { (cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd); }

# Prints the NVIDIA driver's description ("NVIDIA H200, driver 580.65.06") and succeeds when one
# is present.
rt_nvidia_driver() {
  local smi
  if command -v nvidia-smi >/dev/null 2>&1 &&
    smi="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)" && [ -n "$smi" ]; then
    local n
    n="$(printf '%s\n' "$smi" | wc -l)"
    printf '%s GPU(s): %s\n' "$n" "$(printf '%s\n' "$smi" | head -1 | sed 's/, */, driver /')"
    return 0
  fi
  local proc="${RT_NVIDIA_PROC:-/proc/driver/nvidia/version}"
  if [ -r "$proc" ]; then
    printf 'driver %s\n' "$(sed -n 's/.*Kernel Module *\([0-9.]*\).*/\1/p' "$proc" | head -1)"
    return 0
  fi
  return 1
}

# "VERSION CUDA" of the torch `python` imports ("2.4.0 12.1", "1.13.0 None"); fails when it
# imports none.
rt_python_torch() {
  "$1" - 2>/dev/null <<'EOF'
import warnings
warnings.simplefilter("ignore")
import torch
print(torch.__version__, torch.version.cuda)
EOF
}

# Sets RT_LT_KIND (debian|pypi|python|path), RT_LT_WHY, and RT_LT_PATH for `path`.
rt_libtorch_choose() {
  local choice="${RT_LIBTORCH:-}" py="${RT_PYTHON:-python3}" found driver
  RT_LT_PATH=""
  case "$choice" in
    debian) RT_LT_KIND=debian RT_LT_WHY="RT_LIBTORCH=debian: Debian's libtorch-dev" ;;
    pypi) RT_LT_KIND=pypi RT_LT_WHY="RT_LIBTORCH=pypi: PyPI's torch==$RT_TORCH_VERSION in ${TORCH_VENV:-.venv-cuda}" ;;
    python) RT_LT_KIND=python RT_LT_WHY="RT_LIBTORCH=python: the torch $py imports" ;;
    /* | ./* | ../*)
      RT_LT_KIND=path RT_LT_PATH="$(cd "$choice" 2>/dev/null && pwd || echo "$choice")"
      RT_LT_WHY="RT_LIBTORCH=$choice: the LibTorch in that folder"
      ;;
    "")
      if found="$(rt_python_torch "$py")" && [ "${found#* }" != None ]; then
        RT_LT_KIND=python
        RT_LT_WHY="$py imports torch ${found% *} built for CUDA ${found#* }: building against it"
      elif driver="$(rt_nvidia_driver)"; then
        RT_LT_KIND=pypi
        RT_LT_WHY="an NVIDIA driver is present ($driver): PyPI's torch==$RT_TORCH_VERSION (CUDA) in ${TORCH_VENV:-.venv-cuda}"
      else
        RT_LT_KIND=debian
        RT_LT_WHY="no NVIDIA driver and no CUDA torch in $py: Debian's libtorch-dev (CPU)"
      fi
      ;;
    *)
      echo "RT_LIBTORCH='$choice' is not a choice (accepted: debian, pypi, python, or a LibTorch folder's absolute or ./ path)" >&2
      return 2
      ;;
  esac
}

rt_libtorch_line() { echo "libtorch: $RT_LT_KIND — $RT_LT_WHY (RT_LIBTORCH=debian|pypi|python|/path overrides)"; }

# The venv with PyPI's torch, made or completed idempotently. With a CUDA toolkit that carries
# cuDNN and NCCL at CUDA_HOME, torch alone (--no-deps) plus the three NVIDIA libraries the toolkit
# lacks: the toolkit serves the rest (about 3 GB of NVIDIA wheels not downloaded). Otherwise torch
# with all its requirements, the NVIDIA runtime wheels included.
rt_pypi_venv() {
  local venv="${TORCH_VENV:-$(rt_root)/.venv-cuda}" cuda="${CUDA_HOME:-/usr/local/cuda}"
  local py="$venv/bin/python" installed=""
  [ -x "$py" ] && installed="$("$py" -m pip show torch 2>/dev/null | sed -n 's/^Version: //p' || true)"
  [ "$installed" = "$RT_TORCH_VERSION" ] && return 0
  [ -x "$py" ] || /usr/bin/python3 -m venv "$venv" || {
    echo "libtorch: cannot make the venv $venv (python3-venv missing? scripts/setup.sh installs it)" >&2
    return 1
  }
  if ls "$cuda"/lib64/libcudnn.so* "$cuda"/lib64/libnccl.so* >/dev/null 2>&1; then
    echo "libtorch: torch==$RT_TORCH_VERSION into $venv, the CUDA libraries from $cuda"
    "$py" -m pip install -q --no-deps "torch==$RT_TORCH_VERSION" "${RT_NVIDIA_EXTRAS[@]}" &&
      "$py" -m pip install -q --no-deps "${RT_TORCH_PY_DEPS[@]}"
  else
    echo "libtorch: torch==$RT_TORCH_VERSION with its NVIDIA wheels into $venv (no cuDNN/NCCL in $cuda)"
    "$py" -m pip install -q "torch==$RT_TORCH_VERSION"
  fi
}

# Sets RT_LT_PREFIX (the CMAKE_PREFIX_PATH finding TorchConfig.cmake), RT_LT_CUDA (the CUDA
# version the LibTorch targets, or "None"), RT_LT_PYTHON (the python that imports it, "" for
# debian / path) and RT_LT_VERSION. For pypi the venv must exist (rt_pypi_venv).
rt_libtorch_locate() {
  local found prefix
  RT_LT_PYTHON=""
  case "$RT_LT_KIND" in
    debian)
      RT_LT_PREFIX="" RT_LT_CUDA=None
      RT_LT_VERSION="$(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo '?')"
      return 0
      ;;
    path)
      [ -f "$RT_LT_PATH/share/cmake/Torch/TorchConfig.cmake" ] || {
        echo "RT_LIBTORCH=$RT_LT_PATH: no LibTorch there (share/cmake/Torch/TorchConfig.cmake missing)" >&2
        return 1
      }
      RT_LT_PREFIX="$RT_LT_PATH" RT_LT_VERSION="$(cat "$RT_LT_PATH/build-version" 2>/dev/null || echo '?')"
      if ls "$RT_LT_PATH"/lib/libtorch_cuda.so >/dev/null 2>&1; then
        RT_LT_CUDA="$(sed -n 's/.*+cu\([0-9]*\)\([0-9]\)$/\1.\2/p' "$RT_LT_PATH/build-version" 2>/dev/null)"
        RT_LT_CUDA="${RT_LT_CUDA:-unknown}"
      else
        RT_LT_CUDA=None
      fi
      return 0
      ;;
    pypi)
      RT_LT_PYTHON="${TORCH_VENV:-$(rt_root)/.venv-cuda}/bin/python"
      # A venv made without the NVIDIA wheels loads the toolkit's libraries, which a machine
      # need not list for the dynamic linker.
      [ -d "${CUDA_HOME:-/usr/local/cuda}/lib64" ] &&
        export LD_LIBRARY_PATH="${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      ;;
    python) RT_LT_PYTHON="${RT_PYTHON:-python3}" ;;
  esac
  found="$(rt_python_torch "$RT_LT_PYTHON")" || {
    echo "libtorch: $RT_LT_PYTHON cannot import torch (RT_LIBTORCH=$RT_LT_KIND)" >&2
    return 1
  }
  prefix="$("$RT_LT_PYTHON" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
  RT_LT_PREFIX="$prefix" RT_LT_VERSION="${found% *}" RT_LT_CUDA="${found#* }"
}

# Sets RT_LT_CMAKE_ARGS (an array) for a LibTorch located by rt_libtorch_locate: the prefix, and
# for a CUDA LibTorch the toolkit, checked against the CUDA version the LibTorch was built for.
rt_libtorch_cmake_args() {
  local cuda="${CUDA_HOME:-/usr/local/cuda}" toolkit
  RT_LT_CMAKE_ARGS=(-DRT_LIBTORCH_CHOICE="$RT_LT_KIND:$RT_LT_PREFIX")
  [ -n "$RT_LT_PREFIX" ] && RT_LT_CMAKE_ARGS+=(-DCMAKE_PREFIX_PATH="$RT_LT_PREFIX")
  [ "$RT_LT_CUDA" = None ] && return 0
  [ -x "$cuda/bin/nvcc" ] || {
    echo "libtorch: torch $RT_LT_VERSION is built for CUDA $RT_LT_CUDA, and building against it needs that CUDA" \
      "toolkit (nvcc, headers): none at $cuda. Install CUDA ${RT_LT_CUDA%%.*}'s toolkit (docs/gpu.md) and set" \
      "CUDA_HOME, or RT_LIBTORCH=debian for the CPU build" >&2
    return 1
  }
  toolkit="$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
  if [ "$RT_LT_CUDA" != unknown ] && [ "${RT_LT_CUDA%%.*}" != "${toolkit%%.*}" ]; then
    echo "libtorch: torch $RT_LT_VERSION targets CUDA $RT_LT_CUDA but $cuda is CUDA $toolkit; point CUDA_HOME at a" \
      "CUDA ${RT_LT_CUDA%%.*} toolkit (libtorch_cuda.so links CUDA ${RT_LT_CUDA%%.*}'s libraries)" >&2
    return 1
  fi
  # The toolkit's lib64 on the binaries' run path: a venv made without the NVIDIA wheels loads
  # cuDNN, NCCL and CUPTI from there.
  RT_LT_CMAKE_ARGS+=(-DCUDAToolkit_ROOT="$cuda" -DCUDA_TOOLKIT_ROOT_DIR="$cuda"
    -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCMAKE_BUILD_RPATH="$cuda/lib64")
}

# Run as a script: the choice and why; with --cmake-args, then the LibTorch found and the CMake
# arguments the build would take, one per line (a `pypi` venv must already exist: nothing is
# installed).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  rt_libtorch_choose
  rt_libtorch_line
  if [ "${1:-}" = --cmake-args ]; then
    rt_libtorch_locate
    echo "torch $RT_LT_VERSION, CUDA $RT_LT_CUDA"
    rt_libtorch_cmake_args
    printf '%s\n' "${RT_LT_CMAKE_ARGS[@]}"
  fi
fi
