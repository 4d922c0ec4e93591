#!/usr/bin/env bash
# Full-size RAVE smoke run on this machine's CPU (not in CI: minutes per config): v2 and v3
# each train 3 real steps at batch 2, n_signal 65536, on the demo dataset, and the script
# prints each step's time and the peak memory (process RSS and the CPU allocator's peak).
# phase_1_duration is 0 so that the three steps are one discriminator step (step 0) and two
# phase-2 generator steps (adversarial + feature matching): every step kind is measured.
#   scripts/smoke_rave.sh [--configs "v2 v3"] [--steps 3] [--batch 2] [--n_signal 65536]
#                         [--threads N] [--work DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/bin"
CONFIGS="v2 v3"
STEPS=3
BATCH=2
N_SIGNAL=65536
THREADS=0
WORK="$ROOT/demo/smoke_rave"
while [ $# -gt 0 ]; do
  case "$1" in
    --configs) CONFIGS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --n_signal) N_SIGNAL="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "smoke_rave.sh: unknown argument '$1' (accepted: --configs, --steps, --batch, --n_signal, --threads, --work)" >&2
       exit 2 ;;
  esac
done
for tool in train preprocess; do
  [ -x "$BIN/$tool" ] || { echo "smoke_rave.sh: $BIN/$tool not found; build it first (scripts/build.sh)" >&2; exit 2; }
done
command -v jq >/dev/null || { echo "smoke_rave.sh: needs jq (apt-get install jq)" >&2; exit 2; }

DB="$WORK/db_$N_SIGNAL"
if [ ! -f "$DB/metadata.yaml" ]; then
  echo "== demo dataset with chunks of 2 x $N_SIGNAL samples: $DB"
  "$BIN/preprocess" --generate_demo "$WORK/audio" --force --demo_seconds 12 --seed 1 >/dev/null
  "$BIN/preprocess" --input_path "$WORK/audio" --output_path "$DB" --num_signal "$N_SIGNAL" >/dev/null
fi

for CONFIG in $CONFIGS; do
  echo "== $CONFIG: $STEPS steps, batch $BATCH, n_signal $N_SIGNAL, threads $THREADS"
  LOG="$WORK/$CONFIG.log"
  "$BIN/train" --config "$CONFIG" --db_path "$DB" --out_path "$WORK/runs" --name "smoke_$CONFIG" \
    --max_steps "$STEPS" --batch "$BATCH" --n_signal "$N_SIGNAL" --threads "$THREADS" --log_every 1 \
    --val_every 1000000 --train.phase_1_duration 0 --workers 1 \
    --enable_timing_profiling --enable_memory_profiling --profiling.memory_every 1 >"$LOG" 2>&1 \
    || { echo "train failed (log: $LOG):" >&2; tail -20 "$LOG" >&2; exit 1; }
  RUN="$(cd "$WORK/runs" && readlink -f "$(cat latest)")"
  jq -r '.[] | "  step \(.step): \(.total_batch_time * 1000 | round) ms  (forward \(.forward_time * 1000 | round), loss \(.loss_time * 1000 | round), backward \(.backward_time * 1000 | round), optimizer \(.optimizer_time * 1000 | round), data \(.data_time * 1000 | round) ms)"' \
    "$RUN/timing_profile.json"
  jq -r '"  mean step time after the first: \((([.[1:][].total_batch_time] | add) / ((length - 1) | if . < 1 then 1 else . end)) * 1000 | round) ms"' \
    "$RUN/timing_profile.json"
  jq -r '"  peak RSS: \(([.[].peak_rss_bytes] | max) / 1048576 | round) MiB, CPU allocator peak: \(([.[].memory.cpu.peak_bytes_in_use // 0] | max) / 1048576 | round) MiB"' \
    "$RUN/memory_profile.json"
  jq -r '"  process peak RSS at exit: \(.peak_rss_bytes / 1048576 | round) MiB, status: \(.status)"' \
    "$RUN/training_summary.json"
done
