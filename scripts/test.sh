#!/usr/bin/env bash
# Fresh machine → dependencies, Release build, every test, then every fuzz target briefly
# (FUZZ_SECONDS each, default 10; 0 skips them). This is what CI runs (.ci/run).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
cd "$BUILD_DIR"
# Tests run two at a time on 2 cores: OpenMP threads that spin while waiting would steal the
# core the other test needs (measured: a 2-thread training step ran hundreds of times slower
# under oversubscription). Passive waiting keeps parallel test processes from fighting.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
ctest --output-on-failure -j "${TEST_JOBS:-2}" "$@"
# The fuzz targets replay their seed corpora, the regress-* inputs of earlier findings included,
# under ASan and UBSan, then fuzz briefly (scripts/fuzz.sh; longer runs: BENCHMARKS.md).
if [ "${FUZZ_SECONDS:-10}" != 0 ]; then
  BUILD_DIR="$BUILD_DIR" "$ROOT/scripts/fuzz.sh" "${FUZZ_SECONDS:-10}"
fi
