#!/usr/bin/env bash
# Fresh machine → dependencies, Release build, every test. This is what CI runs (.ci/run).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
cd "$BUILD_DIR"
ctest --output-on-failure -j "${TEST_JOBS:-2}" "$@"
