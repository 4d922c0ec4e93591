#!/usr/bin/env bash
# s5_maze training-step time (batch 64, 140 bins, 182 units, state 64; forward + MSE + backward
# + AdamW): native (build/bin/ssm_step_bench: scan "fused" with the fused block kernels, scan
# "fused" with the op-by-op block (--unfused_block), scan "parallel") against the same
# model in Python PyTorch (scripts/bench/reference/s5_maze.py on Debian's /usr/bin/python3).
#   scripts/bench/ssm_step.sh [--rounds 5] [--steps 20] [--threads "1 2"] [--out DIR] [--quick]
#                             [--results_dir DIR]
# First checks that both compute the same losses from the same weights (native export →
# Python import by name), then runs the arms interleaved (native, python, native, ...) per
# thread count; summarize_ssm_step.py writes every run's median, the per-round native/python
# ratios and their medians to scripts/bench/results/ssm_step.json (bench.py --render_only shows it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
ROUNDS=5
STEPS=20
THREADS="1 2"
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --quick) ROUNDS=3; STEPS=10; shift ;;
    --results_dir) RESULTS_DIR="$2"; shift 2 ;;
    -h|--help) bench_usage ;;
    *) bench_bad_arg "$1" "--rounds N, --steps N, --threads \"1 2\", --out DIR, --quick, --results_dir DIR" ;;
  esac
done
bench_need_bin ssm_step_bench
BENCH="$BIN/ssm_step_bench"
PY="$BENCH_PY"
REF="$ROOT/scripts/bench/reference/s5_maze.py"
OUT="${OUT:-$(mktemp -d /tmp/rt_ssm_bench.XXXXXX)}"
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"

echo "== equivalence check (dropout 0, same weights and batch, 3 AdamW steps)"
for arm in "fused" "fused --unfused_block" "parallel"; do
  name="${arm// --/_}"
  read -ra arm_args <<< "$arm"
  "$BENCH" --export "$OUT/check_$name" --scan "${arm_args[@]}" >/dev/null
  echo "-- native scan=$arm vs python"
  "$PY" "$REF" --check "$OUT/check_$name" | tee "$OUT/check_$name.txt"
done

echo "== timing: $ROUNDS rounds x $STEPS steps (after 3 warm-up steps), threads: $THREADS"
for r in $(seq 1 "$ROUNDS"); do
  for t in $THREADS; do
    {
      "$BENCH" --threads "$t" --steps "$STEPS" --warmup 3 --scan fused | sed 's/"impl":"native"/"impl":"native_fused"/'
      "$PY" "$REF" --threads "$t" --steps "$STEPS" --warmup 3
      "$BENCH" --threads "$t" --steps "$STEPS" --warmup 3 --scan fused --unfused_block | sed 's/"impl":"native"/"impl":"native_fused_unfused_block"/'
      "$BENCH" --threads "$t" --steps "$STEPS" --warmup 3 --scan parallel | sed 's/"impl":"native"/"impl":"native_parallel"/'
    } >> "$RESULTS"
  done
  echo "round $r done"
done

"$PY" "$ROOT/scripts/bench/summarize_ssm_step.py" --raw "$RESULTS" --rounds "$ROUNDS" --steps "$STEPS" \
  --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" --results_dir "$RESULTS_DIR"
echo "raw results: $RESULTS"
