#!/usr/bin/env bash
# Configures and builds (Release by default) into ${BUILD_DIR:-build}. Extra arguments go to cmake.
# TARGETS="train preprocess" builds only those targets (and what they need) instead of the
# whole tree with its tests and benchmarks.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
BUILD_TYPE="${BUILD_TYPE:-Release}"
JOBS="${JOBS:-$(nproc)}"
# Precompiled headers and ccache work together only with these sloppiness settings.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "$@" >/dev/null
if [ -n "${TARGETS:-}" ]; then
  # shellcheck disable=SC2086  # a space-separated list of target names
  cmake --build "$BUILD_DIR" -j "$JOBS" --target $TARGETS
else
  cmake --build "$BUILD_DIR" -j "$JOBS"
fi
