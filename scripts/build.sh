#!/usr/bin/env bash
# Configures and builds (Release by default) into ${BUILD_DIR:-build}. Extra arguments go to cmake.
# TARGETS="train preprocess" builds only those targets (and what they need) instead of the
# whole tree with its tests and benchmarks.
# Against the LibTorch scripts/lib/libtorch.sh chooses (printed first; RT_LIBTORCH overrides). A
# build folder configured against another one is reconfigured from scratch (a full rebuild).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
BUILD_TYPE="${BUILD_TYPE:-Release}"
JOBS="${JOBS:-$(nproc)}"
# Precompiled headers and ccache work together only with these sloppiness settings.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
# shellcheck source=lib/libtorch.sh
. "$ROOT/scripts/lib/libtorch.sh"
rt_libtorch_choose
rt_libtorch_line
[ "$RT_LT_KIND" = pypi ] && rt_pypi_venv
rt_libtorch_locate
rt_libtorch_cmake_args
echo "libtorch: torch $RT_LT_VERSION$([ "$RT_LT_CUDA" = None ] && echo ', CPU only' || echo ", CUDA $RT_LT_CUDA")${RT_LT_PREFIX:+ at $RT_LT_PREFIX}"
cache="$BUILD_DIR/CMakeCache.txt"
if [ -f "$cache" ]; then
  # A folder configured before the choice was recorded was configured against Debian's.
  was="$(sed -n 's/^RT_LIBTORCH_CHOICE:[A-Z]*=//p' "$cache")"
  if [ "${was:-debian:}" != "$RT_LT_KIND:$RT_LT_PREFIX" ]; then
    echo "build: $BUILD_DIR was configured against ${was:-debian:} ; reconfiguring it against $RT_LT_KIND:$RT_LT_PREFIX (a full rebuild)"
    rm -rf "$cache" "$BUILD_DIR/CMakeFiles"
  fi
fi
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "${RT_LT_CMAKE_ARGS[@]}" "$@" >/dev/null
if [ -n "${TARGETS:-}" ]; then
  # shellcheck disable=SC2086  # a space-separated list of target names
  cmake --build "$BUILD_DIR" -j "$JOBS" --target $TARGETS
else
  cmake --build "$BUILD_DIR" -j "$JOBS"
fi
