#!/usr/bin/env bash
# The environment in which an offline bundle's binaries (scripts/offline_bundle.sh) run on a GPU
# node without network: the bundle's own libraries first, then the node's torch and the NVIDIA
# libraries beside it (its wheels' nvidia/*/lib, or CUDA_HOME's), then the system's.
#
# offline_bundle.sh copies this file into the bundle as env.sh. There, sourcing it sets the
# shell up; nothing else is needed on the node:
#   . offline-bundle/env.sh             # RT_PYTHON: the Python whose torch to run against (python3)
#   train --config v2 --db_path ... --device cuda
# scripts/gpu_check.sh sources it from scripts/lib/ and calls rt_offline_env itself.

# rt_offline_env BUNDLE DEST PYTHON: unpacks BUNDLE/native.tar.xz into DEST (bin/, lib/) unless
# that copy is current, and exports PATH and LD_LIBRARY_PATH for it, and RT_OFFLINE_BIN,
# RT_OFFLINE_LIB, RT_OFFLINE_TORCH_LIB, RT_OFFLINE_SITE (the node's torch/lib and site-packages).
# Returns 2 with a message naming what is missing.
rt_offline_env() {
  local bundle="$1" dest="$2" py="$3"
  if [ ! -f "$bundle/native.tar.xz" ]; then
    echo "offline env: no native.tar.xz in $bundle (make the bundle with scripts/offline_bundle.sh)" >&2
    return 2
  fi
  if ! command -v "$py" >/dev/null 2>&1; then
    echo "offline env: no Python at '$py' (set RT_PYTHON to the Python whose torch the node runs)" >&2
    return 2
  fi
  if [ ! -f "$dest/.unpacked" ] || [ "$bundle/native.tar.xz" -nt "$dest/.unpacked" ]; then
    mkdir -p "$dest" || return 2
    # Python's lzma where the node has no xz.
    tar -C "$dest" -xJf "$bundle/native.tar.xz" 2>/dev/null ||
      "$py" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$bundle/native.tar.xz" "$dest" ||
      { echo "offline env: cannot unpack $bundle/native.tar.xz into $dest" >&2; return 2; }
    touch "$dest/.unpacked"
  fi
  local torch_lib site version
  read -r torch_lib site version < <("$py" -c 'import os, torch
d = os.path.dirname(torch.__file__)
print(d + "/lib", os.path.dirname(d), torch.__version__)' 2>/dev/null)
  if [ -z "${torch_lib:-}" ]; then
    echo "offline env: $py cannot import torch (set RT_PYTHON to the Python whose torch the node runs)" >&2
    return 2
  fi
  # The bundle's binaries call LibTorch's C++ API, whose ABI changes between minor versions.
  local built
  built="$(sed -n 's/^torch: //p' "$bundle/MANIFEST.txt" 2>/dev/null)"
  if [ -n "$built" ] && [ "${built%.*}" != "${version%.*}" ]; then
    echo "offline env: the bundle was built against torch $built, and $py has torch $version:" \
      "rebuild the bundle for it (TORCH_VERSION=$version scripts/offline_bundle.sh)" >&2
    return 2
  fi
  local nv_libs
  nv_libs="$(find "$site/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | sort | tr '\n' ':')"
  export LD_LIBRARY_PATH="$dest/lib:$torch_lib:$nv_libs${CUDA_HOME:+$CUDA_HOME/lib64:}${LD_LIBRARY_PATH:-}"
  # A node whose C++ runtime is older than the bundle's (Debian 12's) gets the bundle's.
  if "$dest/bin/train" --help 2>&1 | grep -q "GLIBCXX\|CXXABI\|GCC_"; then
    export LD_LIBRARY_PATH="$dest/lib/cxx:$LD_LIBRARY_PATH"
  fi
  case ":$PATH:" in *":$dest/bin:"*) ;; *) export PATH="$dest/bin:$PATH" ;; esac
  export RT_OFFLINE_BIN="$dest/bin" RT_OFFLINE_LIB="$dest/lib" RT_OFFLINE_TORCH_LIB="$torch_lib" \
    RT_OFFLINE_SITE="$site"
  echo "offline env: $(sed -n 1p "$bundle/MANIFEST.txt" 2>/dev/null); torch $version at $torch_lib"
}

# Sourced from inside a bundle (native.tar.xz beside this file): set this shell up, and return
# rt_offline_env's status (`. offline-bundle/env.sh || exit` stops a job script that cannot run).
_rt_offline_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -f "$_rt_offline_here/native.tar.xz" ]; then
  rt_offline_env "$_rt_offline_here" "$_rt_offline_here/native" "${RT_PYTHON:-python3}"
  _rt_offline_status=$?
  unset _rt_offline_here
  return $_rt_offline_status 2>/dev/null || exit $_rt_offline_status
fi
unset _rt_offline_here
