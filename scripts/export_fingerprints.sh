#!/usr/bin/env bash
# Writes tests/assets/golden/export_fingerprints.json: what every configuration the export tests
# export writes (tests/export/export_fingerprint_test.cpp), from the export as it is now, for the
# LibTorch of the build folder (TorchScript's code is kept per LibTorch version; ONNX once).
# Run it only when a change to the exported files is meant; the test then pins the new files.
#   scripts/export_fingerprints.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
cmake --build "$BUILD_DIR" --target test_export -j "${JOBS:-2}"
out="$PWD/tests/assets/golden/export_fingerprints.json"
RT_WRITE_EXPORT_FINGERPRINTS="$out.tmp" OMP_NUM_THREADS=1 \
  "$BUILD_DIR/tests/test_export" --gtest_filter='ExportFingerprints.*'
mv "$out.tmp" "$out"
echo "wrote $out"
