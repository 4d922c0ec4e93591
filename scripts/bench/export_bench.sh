#!/usr/bin/env bash
# Realtime factor of an exported RAVE v2 (full size) as nn~ runs it: `forward` on 2048-sample
# blocks under c10::InferenceMode, streaming export loaded with torch::jit::load, against the
# same model run as the C++ module (RaveModel::forward on the same blocks) and the offline
# export (build/bin/export_bench). Runs are interleaved; medians are reported.
# Also the floor: one read of every weight of the exported module (every block reads them all).
#   scripts/bench/export_bench.sh [--rounds 3] [--seconds 20] [--threads "1"] [--blocks "2048 4096"]
#                                 [--quick] [--results_dir DIR]
# Writes scripts/bench/results/export.json (summarize_export.py); bench.py --render_only shows it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
ROUNDS=3
SECONDS_TIMED=20
THREADS="1"
BLOCKS="2048 4096"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --seconds) SECONDS_TIMED="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --blocks) BLOCKS="$2"; shift 2 ;;
    --quick) ROUNDS=2; SECONDS_TIMED=10; shift ;;
    --results_dir) RESULTS_DIR="$2"; shift 2 ;;
    -h|--help) bench_usage ;;
    *) bench_bad_arg "$1" "--rounds N, --seconds S, --threads \"1 2\", --blocks \"2048 4096\", --quick, --results_dir DIR" ;;
  esac
done
bench_need_bin export_bench
RAW="$(mktemp /tmp/rt_export_bench.XXXXXX.jsonl)"
for _ in $(seq 1 "$ROUNDS"); do
  for t in $THREADS; do
    for b in $BLOCKS; do
      "$BIN/export_bench" --version v2 --block "$b" --threads "$t" --seconds "$SECONDS_TIMED" >> "$RAW"
    done
  done
done
"$BENCH_PY" "$ROOT/scripts/bench/summarize_export.py" --raw "$RAW" --command "$COMMAND" \
  --rounds "$ROUNDS" --seconds "$SECONDS_TIMED" --blocks "$BLOCKS" --load_before "$BENCH_LOAD_BEFORE" \
  --results_dir "$RESULTS_DIR"
echo "raw results: $RAW"
