#!/usr/bin/env bash
# A long tiny_ssm run with a timing entry and a log line every step: does the process's memory
# stay flat, and do the profile files stay within their bound (profiling.profile_part_mb ×
# profiling.profile_parts)? Samples VmRSS from /proc while it trains; reports RSS after the first
# STEPS/100 steps against RSS at the end, and the profile's files and bytes.
#
#   scripts/bench/long_run_rss.sh [--results_dir DIR] [STEPS]
#       (default 1000000 steps; PART_MB, PARTS to override the bound; MEMORY=1 adds
#        --enable_memory_profiling)
#
# The run is made by long_run_rss.py, which writes scripts/bench/results/long_run_rss.json
# (bench.py --render_only shows it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PART_MB="${PART_MB:-64}"
PARTS="${PARTS:-8}"
MEMORY="${MEMORY:-0}"
STEPS=1000000
SHOWN=()
while [ $# -gt 0 ]; do
  case "$1" in
    --results_dir) RESULTS_DIR="$2"; shift 2 ;;
    -h|--help) bench_usage ;;
    -*) bench_bad_arg "$1" "--results_dir DIR, STEPS" ;;
    *) STEPS="$1"; SHOWN+=("$1"); shift ;;
  esac
done
ENV_SHOWN="PART_MB=$PART_MB PARTS=$PARTS"
[[ "$MEMORY" == 1 ]] && ENV_SHOWN+=" MEMORY=1"
COMMAND="$ENV_SHOWN $(bench_command "${SHOWN[@]}")"
bench_need_bin train preprocess
# The tree the figures come from, taken before anything is written.
REV="$(git -C "$ROOT" describe --always --dirty)"
WORK="$(mktemp -d /tmp/long_run.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
"$BIN/preprocess" --generate_neural_demo "$WORK/h5" --force --groups 1 --units 32 --trials 64 --seed 1 >/dev/null
"$BIN/preprocess" --kind neural --input_path "$WORK/h5" --output_path "$WORK/ndb" >/dev/null

"$BENCH_PY" "$ROOT/scripts/bench/long_run_rss.py" --bin "$BIN" --work "$WORK" --steps "$STEPS" --part_mb "$PART_MB" \
  --parts "$PARTS" --memory "$MEMORY" --rev "$REV" --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" \
  --results_dir "$RESULTS_DIR"
