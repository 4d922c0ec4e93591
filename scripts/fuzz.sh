#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang with AddressSanitizer and UBSan) against the
# main build and runs each for SECONDS (default 60) from its seed corpus in tests/fuzz/corpus/.
# Exit 1 when a target finds a crash, a leak of a non-rt::Error exception, or a runaway
# allocation; the input is kept (named on stderr) to become a regression test.
#
#   scripts/fuzz.sh [SECONDS] [TARGET…]      e.g. scripts/fuzz.sh 3600 fuzz_neural_record
#
# Environment: BUILD_DIR (the main build, default build/; scripts/build.sh makes it),
#   FUZZ_BUILD_DIR (default build-fuzz/), FUZZ_RSS_LIMIT_MB (default 2048).
# Working corpora grow under $FUZZ_BUILD_DIR/corpus/<target>; the seeds stay untouched.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_EACH="${1:-60}"
[ $# -gt 0 ] && shift
case "$SECONDS_EACH" in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$SECONDS_EACH'" >&2; exit 2 ;; esac
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
FUZZ_BUILD_DIR="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
ALL_TARGETS=(fuzz_audio_record fuzz_neural_record fuzz_db_metadata fuzz_checkpoint fuzz_config fuzz_export_file)
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL_TARGETS[@]}")
for t in "${TARGETS[@]}"; do
  [[ " ${ALL_TARGETS[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (accepted: ${ALL_TARGETS[*]})" >&2; exit 2; }
done
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (scripts/setup.sh installs clang)" >&2; exit 2; }
[ -f "$BUILD_DIR/util/librt_util.a" ] || { echo "fuzz.sh: no main build in $BUILD_DIR: run scripts/build.sh first" >&2; exit 2; }

# The fuzz targets link the main build's libraries with clang's sanitizers against Debian's CPU
# LibTorch; a main build against another (RT_LIBTORCH, scripts/lib/libtorch.sh) is not mixed in.
choice="$(sed -n 's/^RT_LIBTORCH_CHOICE:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null)"
if [ -n "$choice" ] && [ "$choice" != "debian:" ]; then
  echo "fuzz.sh: skipped: $BUILD_DIR is built against $choice; the fuzz targets need a build against Debian's LibTorch (RT_LIBTORCH=debian BUILD_DIR=… scripts/build.sh)"
  exit 0
fi
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CC=clang CXX=clang++ cmake -S "$ROOT/tests/fuzz" -B "$FUZZ_BUILD_DIR" -DRT_MAIN_BUILD="$BUILD_DIR" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build "$FUZZ_BUILD_DIR" -j "${JOBS:-$(nproc)}" --target "${TARGETS[@]}"

# torch's own thread pools are not what is tested; one thread keeps executions comparable.
export OMP_NUM_THREADS=1
failed=0
for t in "${TARGETS[@]}"; do
  work="$FUZZ_BUILD_DIR/corpus/$t"
  artifacts="$FUZZ_BUILD_DIR/artifacts/$t/"
  mkdir -p "$work" "$artifacts"
  log="$FUZZ_BUILD_DIR/$t.log"
  set +e
  # New inputs go to the working corpus (first folder); the seeds are read only.
  "$FUZZ_BUILD_DIR/$t" "$work" "$ROOT/tests/fuzz/corpus/$t" -max_total_time="$SECONDS_EACH" \
    -rss_limit_mb="${FUZZ_RSS_LIMIT_MB:-2048}" -malloc_limit_mb="${FUZZ_RSS_LIMIT_MB:-2048}" \
    -timeout=25 -print_final_stats=1 -artifact_prefix="$artifacts" >"$log" 2>&1
  rc=$?
  set -e
  # Final figures: executions, coverage (edges) and features, corpus size.
  runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)"
  cov="$(grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1 || true)"
  if [ "$rc" -eq 0 ]; then
    echo "fuzz: $t: ${SECONDS_EACH} s, ${runs:-?} executions, ${cov:-no coverage line}, crashes 0"
  else
    failed=1
    echo "fuzz: $t: FAILED (exit $rc) after ${runs:-?} executions; log $log" >&2
    grep -E 'ERROR:|finding:|SUMMARY:|Test unit written' "$log" | head -8 >&2 || tail -20 "$log" >&2
  fi
done
exit "$failed"
