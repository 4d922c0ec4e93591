#!/usr/bin/env bash
# The three SSM layers (model.ssm = s5 | s4d | lru) side by side on the s5_maze shape (batch 64,
# 140 bins, 182 units, width 64, state 64, 1 block, fused scan): parameter counts (`train --config
# s5_maze --model.ssm KIND --summary` on a 182-unit synthetic database) and training-step time
# (build/bin/ssm_step_bench --ssm KIND: zero_grad + forward + MSE + backward + AdamW).
#   benchmarks/ssm_kinds.sh [--rounds 5] [--steps 20] [--threads "1 2"] [--kinds "s5 s4d lru"]
#                              [--out DIR] [--quick] [--results_dir DIR]
# The kinds run interleaved (round r: s5, s4d, lru at 1 thread, then at 2 threads, ...), one
# process per run; summarize_ssm_kinds.py writes every run's median, per kind the median and
# spread of the run medians, and the parameter counts to benchmarks/results/ssm_kinds.json
# (bench.py --render_only shows it). --quick: 3 rounds of 10 steps.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
ROUNDS=5
STEPS=20
THREADS="1 2"
KINDS="s5 s4d lru"
OUT=""
bench_args "--rounds=ROUNDS --steps=STEPS --threads=THREADS --kinds=KINDS --out=OUT" "ROUNDS=3 STEPS=10" "$@"
bench_need_bin ssm_step_bench train preprocess
OUT="${OUT:-$(mktemp -d /tmp/rt_ssm_kinds.XXXXXX)}"
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"

echo "== parameter counts: train --config s5_maze --model.ssm KIND --summary (182-unit synthetic database)"
bench_neural_db "$OUT/db182" 182 8
for k in $KINDS; do
  "$BIN/train" --config s5_maze --model.ssm "$k" --summary --db_path "$OUT/db182" > "$OUT/summary_$k.txt"
  grep -E "^      ssm |^total:" "$OUT/summary_$k.txt" | sed "s/^/$k: /"
done

echo "== timing: $ROUNDS rounds x $STEPS steps (after 3 warm-up steps), threads: $THREADS, kinds: $KINDS"
for r in $(seq 1 "$ROUNDS"); do
  for t in $THREADS; do
    for k in $KINDS; do
      "$BIN/ssm_step_bench" --threads "$t" --steps "$STEPS" --warmup 3 --scan fused --ssm "$k" >> "$RESULTS"
    done
  done
  echo "round $r done"
done

"$BENCH_PY" "$ROOT/benchmarks/summarize_ssm_kinds.py" --raw "$RESULTS" --summaries "$OUT" --rounds "$ROUNDS" \
  --steps "$STEPS" --kinds "$KINDS" --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" --results_dir "$RESULTS_DIR"
echo "raw results: $RESULTS"
