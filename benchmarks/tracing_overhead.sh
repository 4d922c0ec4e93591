#!/usr/bin/env bash
# Overhead of detailed tracing on a real training run (budget: ≤ 10% while active on
# the demo model). Interleaved A/B runs of tiny_rave: tracing off, and tracing active for every
# step (wait 0, warm-up 0, active = max_steps) plain, + record_shapes, + with_stack. Each run
# writes timing_profile.json (per-step training_step time, identical cost in every arm); the
# first WARMUP steps of each run are dropped and the median of the rest is taken per run, then
# the median over the repetitions per arm. Then the same arms inside one process (every other
# step traced), and the per-operator cost (build/bin/op_cost_bench, when built).
#
#   benchmarks/tracing_overhead.sh [--results_dir DIR] [BUILD_DIR] [REPS] [STEPS]   (defaults: build 5 40)
#   benchmarks/tracing_overhead.sh --quick [--results_dir DIR]                    (build 3 30; run.sh --quick)
# Writes benchmarks/results/tracing.json (summarize_tracing.py); bench.py --render_only shows it.
# Environment: THREADS (train.threads, default 1), WORKERS (data.workers, default 1),
# WARMUP (steps dropped per run, default 5), ARMS (default "off traced shapes stack").
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
# shellcheck disable=SC2016  # --quick's assignment, evaluated where it stands
bench_args "ARG..." 'BENCH_ARGS=("$BUILD_DIR" 3 30)' "$@"
POSITIONAL=("${BENCH_ARGS[@]}")
BUILD="${POSITIONAL[0]:-$BUILD_DIR}"
BUILD_SHOWN="$(realpath --relative-to="$ROOT" "$BUILD" 2>/dev/null || echo "$BUILD")"
REPS="${POSITIONAL[1]:-5}"
STEPS="${POSITIONAL[2]:-40}"
THREADS="${THREADS:-1}"
WORKERS="${WORKERS:-1}"
WARMUP="${WARMUP:-5}"
ARMS="${ARMS:-off traced shapes stack}"
BIN="$BUILD/bin"
bench_need_bin train preprocess
WORK="$(mktemp -d /tmp/tracing_overhead.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

bench_audio_db "$WORK/db" 10 --num_signal 8192

# Every step traced (the A/B runs), or every other step (the in-process alternation below).
SCHEDULE_ALL="--profiling.wait 0 --profiling.warmup 0 --profiling.active $STEPS --profiling.repeat 1"
SCHEDULE_ALTERNATE="--profiling.wait 1 --profiling.warmup 0 --profiling.active 1 --profiling.repeat 0"
arm_flags() {  # arm_flags ARM [SCHEDULE]
  local trace="--enable_profiling ${2:-$SCHEDULE_ALL} --profiling.skip_first 0"
  case "$1" in
    off) echo "" ;;
    traced) echo "$trace" ;;
    shapes) echo "$trace --profiling.record_shapes" ;;
    stack) echo "$trace --profiling.with_stack" ;;
    modules) echo "$trace --profiling.with_modules" ;;
    *) echo "unknown arm $1" >&2; exit 2 ;;
  esac
}

train_run() {  # train_run NAME MAX_STEPS FLAGS... → copies the run's timing_profile.json to $WORK/NAME.json
  local name="$1" steps="$2" run
  shift 2
  "$BIN/train" --config tiny_rave --db_path "$WORK/db" --out_path "$WORK/runs" --name "$name" \
    --max_steps "$steps" --train.threads "$THREADS" --data.workers "$WORKERS" --train.val_every 100000 \
    --train.save_every 100000 --train.log_every 1000 --enable_timing_profiling \
    "$@" >"$WORK/$name.log" 2>&1 || bench_die "run $name failed, see $WORK/$name.log"
  run="$(cd "$WORK/runs" && readlink -f "$(cat latest)")"
  cp "$run/timing_profile.json" "$WORK/$name.json"
  rm -rf "$run"/profiler_traces
}

for rep in $(seq 1 "$REPS"); do
  for arm in $ARMS; do
    # shellcheck disable=SC2046
    train_run "ab_${arm}_${rep}" "$STEPS" $(arm_flags "$arm")
    echo "rep $rep $arm done" >&2
  done
done

# In-process alternation: one run per tracing arm whose schedule traces every other step
# (wait 1, warm-up 0, active 1, repeat forever): traced and untraced steps share the process,
# its memory layout and its CPU, which separate processes do not (their medians differ by
# several % between identical runs). Odd steps are traced, even steps run with no callback
# installed; each window is saved after its step's time was taken.
ALT_STEPS=$((STEPS * 4))
for arm in $ARMS; do
  [[ "$arm" == off ]] && continue
  # shellcheck disable=SC2046
  train_run "alt_${arm}" "$ALT_STEPS" $(arm_flags "$arm" "$SCHEDULE_ALTERNATE")
  echo "alternating $arm done" >&2
done

OP_COST=()
if [[ -x "$BIN/op_cost_bench" ]]; then
  "$BIN/op_cost_bench" --benchmark_min_time=0.2 --benchmark_format=json 2>/dev/null >"$WORK/op_cost.json"
  OP_COST=(--op_cost "$WORK/op_cost.json" --op_cost_command "$BUILD_SHOWN/bin/op_cost_bench --benchmark_min_time=0.2")
fi
"$BENCH_PY" "$ROOT/benchmarks/summarize_tracing.py" --work "$WORK" --arms "$ARMS" --reps "$REPS" --steps "$STEPS" \
  --alt_steps "$ALT_STEPS" --warmup "$WARMUP" --threads "$THREADS" --workers "$WORKERS" \
  --alt_schedule "$SCHEDULE_ALTERNATE" "${OP_COST[@]}" --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" \
  --results_dir "$RESULTS_DIR"
