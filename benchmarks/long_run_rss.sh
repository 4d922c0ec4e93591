#!/usr/bin/env bash
# A long tiny_ssm run with a timing entry and a log line every step: does the process's memory
# stay flat, and do the profile files stay within their bound (profiling.profile_part_mb ×
# profiling.profile_parts)? Samples VmRSS from /proc while it trains; reports RSS after the first
# STEPS/100 steps against RSS at the end, and the profile's files and bytes.
#
#   benchmarks/long_run_rss.sh [--results_dir DIR] [STEPS]
#       (default 1000000 steps; PART_MB, PARTS to override the bound; MEMORY=1 adds
#        --enable_memory_profiling)
#
# The run is made by long_run_rss.py, which writes benchmarks/results/long_run_rss.json
# (bench.py --render_only shows it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PART_MB="${PART_MB:-64}"
PARTS="${PARTS:-8}"
MEMORY="${MEMORY:-0}"
bench_args "ARG..." "" "$@"
STEPS=1000000
[ ${#BENCH_ARGS[@]} -eq 0 ] || STEPS="${BENCH_ARGS[-1]}"
ENV_SHOWN="PART_MB=$PART_MB PARTS=$PARTS"
[[ "$MEMORY" == 1 ]] && ENV_SHOWN+=" MEMORY=1"
COMMAND="$ENV_SHOWN $(bench_command "${BENCH_ARGS[@]}")"
bench_need_bin train preprocess
# The tree the figures come from, taken before anything is written.
REV="$(git -C "$ROOT" describe --always --dirty)"
WORK="$(mktemp -d /tmp/long_run.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
bench_neural_db "$WORK/ndb" 32 64

"$BENCH_PY" "$ROOT/benchmarks/long_run_rss.py" --bin "$BIN" --work "$WORK" --steps "$STEPS" --part_mb "$PART_MB" \
  --parts "$PARTS" --memory "$MEMORY" --rev "$REV" --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" \
  --results_dir "$RESULTS_DIR"
