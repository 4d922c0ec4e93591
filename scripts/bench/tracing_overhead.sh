#!/usr/bin/env bash
# Overhead of detailed tracing on a real training run (budget: ≤ 10% while active on
# the demo model). Interleaved A/B runs of tiny_rave: tracing off, and tracing active for every
# step (wait 0, warm-up 0, active = max_steps) plain, + record_shapes, + with_stack. Each run
# writes timing_profile.json (per-step training_step time, identical cost in every arm); the
# first WARMUP steps of each run are dropped and the median of the rest is taken per run, then
# the median over the repetitions per arm. Prints a Markdown table (scripts/bench/trace_results.md).
#
#   scripts/bench/tracing_overhead.sh [BUILD_DIR] [REPS] [STEPS]     (defaults: build 5 40)
#   scripts/bench/tracing_overhead.sh --quick                          (build 3 30; run.sh --quick)
# The table is also written to scripts/bench/tracing_results.md (folded into BENCHMARKS.md).
# Environment: THREADS (train.threads, default 1), WORKERS (data.workers, default 1),
# WARMUP (steps dropped per run, default 5), ARMS (default "off traced shapes stack").
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
ARGS_SHOWN="$*"
if [[ "${1:-}" == "--quick" ]]; then set -- "${BUILD_DIR:-$ROOT/build}" 3 30; fi
BUILD="${1:-${BUILD_DIR:-$ROOT/build}}"
BUILD_SHOWN="$(realpath --relative-to="$ROOT" "$BUILD" 2>/dev/null || echo "$BUILD")"
REPS="${2:-5}"
STEPS="${3:-40}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
THREADS="${THREADS:-1}"
WORKERS="${WORKERS:-1}"
WARMUP="${WARMUP:-5}"
ARMS="${ARMS:-off traced shapes stack}"
WORK="$(mktemp -d /tmp/tracing_overhead.XXXXXX)"
for bin in train preprocess; do
  [[ -x "$BUILD/bin/$bin" ]] || { echo "error: $BUILD/bin/$bin not found; build it first" >&2; exit 2; }
done

"$BUILD/bin/preprocess" --generate_demo "$WORK/audio" --demo_seconds 10 --seed 1 >/dev/null 2>&1
"$BUILD/bin/preprocess" --input_path "$WORK/audio" --output_path "$WORK/db" --num_signal 8192 >/dev/null 2>&1

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

median_step() {  # median_step <timing_profile.json>: median total_batch_time after WARMUP steps
  python3 - "$1" "$WARMUP" <<'PY'
import json, statistics, sys
entries = json.load(open(sys.argv[1]))
times = [e["total_batch_time"] for e in entries if e["step"] >= int(sys.argv[2])]
print(statistics.median(times))
PY
}

declare -A RESULTS
for rep in $(seq 1 "$REPS"); do
  for arm in $ARMS; do
    name="${arm}_${rep}"
    # shellcheck disable=SC2046
    "$BUILD/bin/train" --config tiny_rave --db_path "$WORK/db" --out_path "$WORK/runs" --name "$name" \
      --max_steps "$STEPS" --train.threads "$THREADS" --data.workers "$WORKERS" --train.val_every 100000 \
      --train.save_every 100000 --train.log_every 1000 --enable_timing_profiling \
      $(arm_flags "$arm") >"$WORK/$name.log" 2>&1 || { echo "error: run $name failed, see $WORK/$name.log" >&2; exit 1; }
    run="$(cd "$WORK/runs" && readlink -f "$(cat latest)")"
    RESULTS[$arm]+="$(median_step "$run/timing_profile.json") "
    echo "rep $rep $arm: $(median_step "$run/timing_profile.json") s/step" >&2
  done
done

# In-process alternation: one run per tracing arm whose schedule traces every other step
# (wait 1, warm-up 0, active 1, repeat forever): traced and untraced steps share the process,
# its memory layout and its CPU, which separate processes do not (their medians differ by
# several % between identical runs). Odd steps are traced, even steps run with no callback
# installed; each window is saved after its step's time was taken.
ALT_STEPS=$((STEPS * 4))
declare -A ALT
for arm in $ARMS; do
  [[ "$arm" == off ]] && continue
  name="alt_${arm}"
  # shellcheck disable=SC2046
  "$BUILD/bin/train" --config tiny_rave --db_path "$WORK/db" --out_path "$WORK/runs" --name "$name" \
    --max_steps "$ALT_STEPS" --train.threads "$THREADS" --data.workers "$WORKERS" --train.val_every 100000 \
    --train.save_every 100000 --train.log_every 1000 --enable_timing_profiling \
    $(arm_flags "$arm" "$SCHEDULE_ALTERNATE") \
    >"$WORK/$name.log" 2>&1 || { echo "error: run $name failed, see $WORK/$name.log" >&2; exit 1; }
  run="$(cd "$WORK/runs" && readlink -f "$(cat latest)")"
  ALT[$arm]="$(python3 - "$run/timing_profile.json" "$WARMUP" <<'PY'
import json, statistics, sys
e = [x for x in json.load(open(sys.argv[1])) if x["step"] >= int(sys.argv[2])]
on = [x["total_batch_time"] for x in e if x["step"] % 2 == 1]
off = [x["total_batch_time"] for x in e if x["step"] % 2 == 0]
print(f"{statistics.median(off) * 1e3:.2f} {statistics.median(on) * 1e3:.2f} {len(off)} {len(on)} "
      f"{(statistics.median(on) / statistics.median(off) - 1) * 100:+.1f}")
PY
)"
  echo "alternating $arm: ${ALT[$arm]}" >&2
  rm -rf "$run"/profiler_traces
done

{
echo "## Detailed tracing overhead: step-time A/B on tiny_rave"
echo
echo "Command: \`scripts/bench/tracing_overhead.sh${ARGS_SHOWN:+ $ARGS_SHOWN}\` — tiny_rave, $STEPS steps per run (first $WARMUP dropped),"
echo "$REPS interleaved repetitions of the arms (off, traced, + record_shapes, + with_stack), tracing active on"
echo "every step (wait 0, warm-up 0, active = max_steps), train.threads $THREADS, data.workers $WORKERS;"
echo "median of per-step \`total_batch_time\` (timing_profile.json) per run, then the median over repetitions."
echo "Load average before: $LOAD_BEFORE; after: $(cut -d' ' -f1-3 /proc/loadavg)."
echo
echo "| arm | median step (ms) | per-run medians (ms) | overhead vs off |"
echo "|---|---|---|---|"
python3 - "$ARMS" <<PY
import statistics
arms = "$ARMS".split()
label = {"off": "off", "traced": "traced", "shapes": "+ record_shapes", "stack": "+ with_stack", "modules": "+ with_modules"}
results = {$(for arm in $ARMS; do printf '"%s": [%s], ' "$arm" "$(echo "${RESULTS[$arm]}" | xargs | tr ' ' ',')"; done)}
base = statistics.median(results["off"]) if "off" in results else None
for arm in arms:
    m = statistics.median(results[arm])
    runs = " ".join(f"{v * 1e3:.1f}" for v in results[arm])
    over = "—" if base is None or arm == "off" else f"{(m / base - 1) * 100:+.1f}%"
    print(f"| {label.get(arm, arm)} | {m * 1e3:.2f} | {runs} | {over} |")
PY
echo
echo "The same arms measured inside one process: \`train --config tiny_rave --max_steps $ALT_STEPS\` with the schedule"
echo "\`$SCHEDULE_ALTERNATE\` (every odd step traced, every"
echo "even step with no callback installed; steps before $WARMUP dropped); medians of the two step sets of one run:"
echo
echo "| arm | untraced steps (ms) | traced steps (ms) | steps (untraced / traced) | overhead |"
echo "|---|---|---|---|---|"
for arm in $ARMS; do
  [[ "$arm" == off ]] && continue
  read -r off on n_off n_on over <<< "${ALT[$arm]}"
  case "$arm" in traced) label="traced" ;; shapes) label="+ record_shapes" ;; stack) label="+ with_stack" ;; *) label="$arm" ;; esac
  echo "| $label | $off | $on | $n_off / $n_on | **$over%** |"
done
if [[ -x "$BUILD/bin/op_cost_bench" ]]; then
  echo
  echo "Per-operator cost: \`$BUILD_SHOWN/bin/op_cost_bench --benchmark_min_time=0.2\` (Google Benchmark; \`torch::add\` of"
  echo "two 8-element tensors, 1 thread, NoGradGuard; CPU ns per op):"
  echo
  echo "| benchmark | CPU ns/op | added by tracing |"
  echo "|---|---|---|"
  "$BUILD/bin/op_cost_bench" --benchmark_min_time=0.2 --benchmark_format=json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)["benchmarks"]
t = {b["name"]: b["cpu_time"] for b in d}
base = t.get("BM_AddUntraced")
for name, ns in t.items():
    add = f"+{ns - base:.0f} ns" if base and name.startswith("BM_AddTraced") else "—"
    print(f"| {name} | {ns:.0f} | {add} |")
'
fi
} > "$WORK/table.md"
cat "$WORK/table.md"
cp "$WORK/table.md" "$ROOT/scripts/bench/tracing_results.md"
rm -rf "$WORK"
