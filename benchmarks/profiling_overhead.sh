#!/usr/bin/env bash
# Overhead of timing + memory profiling (budget: <= 1% of step time), measured as
# interleaved A/B training runs of the same job: A = no profiling flags, B =
# --enable_timing_profiling --enable_memory_profiling. Each run logs steps/s per interval of
# --log_every steps; the first interval (warm-up) is dropped and the rest averaged. Then the
# share of CPU samples in profiling code (perf record on one profiled run per job).
#   benchmarks/profiling_overhead.sh [--quick] [--results_dir DIR]
# Writes benchmarks/results/profiling.json (summarize_profiling.py); bench.py --render_only
# shows it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
PAIRS=6; STEPS=160; EVERY=40
bench_args "" "PAIRS=4 STEPS=120" "$@"
bench_need_bin train preprocess
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
bench_audio_db "$TMP/audio_db" 30 --num_signal 16384 --max_db_size 1
bench_neural_db "$TMP/neural_db" 182
JOBS=("tiny_rave|$TMP/audio_db" "s5_maze|$TMP/neural_db")

run() {  # config db threads flags... → prints mean steps/s after the first interval
  local cfg="$1" db="$2" threads="$3"; shift 3
  if ! "$BIN/train" --config "$cfg" --db_path "$db" --out_path "$TMP/runs" --max_steps "$STEPS" \
    --log_every "$EVERY" --val_every 100000 --save_every 100000 --threads "$threads" "$@" > "$TMP/log" 2>&1; then
    echo "profiling_overhead.sh: train --config $cfg failed:" >&2; tail -5 "$TMP/log" >&2; exit 1
  fi
  sed -n 's/.*| \([0-9.e+]*\) steps\/s\( |.*\)\{0,1\}$/\1/p' "$TMP/log" | tail -n +2 |
    awk '{ s += $1; n++ } END { if (n) printf "%.4f\n", s / n }'
}

CONFIGS=()
for job in "${JOBS[@]}"; do
  cfg="${job%%|*}"; db="${job#*|}"
  CONFIGS+=("$cfg")
  for threads in 1 2; do
    : > "$TMP/off.$cfg.$threads"; : > "$TMP/on.$cfg.$threads"
    for ((i = 0; i < PAIRS; i++)); do
      run "$cfg" "$db" "$threads" >> "$TMP/off.$cfg.$threads"
      run "$cfg" "$db" "$threads" --enable_timing_profiling --enable_memory_profiling >> "$TMP/on.$cfg.$threads"
    done
  done
done
# Attribution: what separate processes cannot resolve (their spread is several %), sampling
# can: the share of CPU samples whose function is profiling code, in one profiled run
# (summarize_profiling.py says which symbols count).
if command -v perf >/dev/null 2>&1; then
  for job in "${JOBS[@]}"; do
    cfg="${job%%|*}"; db="${job#*|}"
    if perf record -q -F 4999 -o "$TMP/perf.data" -- "$BIN/train" --config "$cfg" --db_path "$db" \
        --out_path "$TMP/runs" --max_steps "$STEPS" --log_every "$EVERY" --val_every 100000 --save_every 100000 \
        --threads 1 --enable_timing_profiling --enable_memory_profiling > "$TMP/log" 2>&1; then
      perf report -i "$TMP/perf.data" --no-children --sort symbol --stdio 2> /dev/null > "$TMP/perf.$cfg.txt" || true
    else
      tail -1 "$TMP/log" > "$TMP/perf_failed.$cfg"
    fi
  done
fi
"$BENCH_PY" "$ROOT/benchmarks/summarize_profiling.py" --work "$TMP" --configs "${CONFIGS[*]}" --pairs "$PAIRS" \
  --steps "$STEPS" --every "$EVERY" --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" --results_dir "$RESULTS_DIR"
