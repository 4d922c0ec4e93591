#!/usr/bin/env bash
# s5_maze training-step time (batch 64, 140 bins, 182 units, state 64; forward + MSE + backward
# + AdamW): native (build/bin/ssm_step_bench: scan "fused" with the fused block kernels, scan
# "fused" with the op-by-op block (--unfused_block), scan "parallel") against the same
# model in Python PyTorch (tests/oracle/s5_maze.py on Debian's /usr/bin/python3), and,
# with --fssm DIR (a checkout of github.com/Melina-Jingting/foundational_ssm), against that
# project's own models: its PyTorch S4D decoder on Debian's torch (the LibTorch of build/) and
# its JAX S5 decoder with its own jitted step (benchmarks/fssm_step.py; venvs made by
# benchmarks/fssm_env.sh; FSSM_DIR in the environment does the same, e.g. under run.sh).
#   benchmarks/ssm_step.sh [--rounds 5] [--steps 20] [--fused_steps 4*STEPS] [--threads "1 2"]
#                             [--out DIR] [--quick] [--fssm DIR] [--results_dir DIR]
# The fused native arm runs 4x the steps by default: it is 4-5x faster than the S4D and Python
# arms, so its run then lasts about as long as theirs, and a shared host's slow and fast phases
# (seconds long) weigh the same in the medians on both sides of a ratio.
# First checks that both compute the same losses from the same weights (native export →
# Python import by name), then runs the arms interleaved (native, python, native, ...) per
# thread count; summarize_ssm_step.py writes every run's median, the per-round native/python
# ratios and their medians to benchmarks/results/ssm_step.json (bench.py --render_only shows it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
ROUNDS=5
STEPS=20
FUSED_STEPS=""
THREADS="1 2"
OUT=""
FSSM="${FSSM_DIR:-}"
bench_args "--rounds=ROUNDS --steps=STEPS --fused_steps=FUSED_STEPS --threads=THREADS --out=OUT --fssm=FSSM" "ROUNDS=3 STEPS=10" "$@"
FUSED_STEPS="${FUSED_STEPS:-$((4 * STEPS))}"
bench_need_bin ssm_step_bench
BENCH="$BIN/ssm_step_bench"
PY="$BENCH_PY"
REF="$ROOT/tests/oracle/s5_maze.py"
if [ -n "$FSSM" ]; then
  [ -f "$FSSM/src/foundational_ssm/models/archive/s4d.py" ] ||
    bench_die "--fssm $FSSM: not a checkout of github.com/Melina-Jingting/foundational_ssm (no src/foundational_ssm/models/archive/s4d.py)"
  FSSM="$(cd "$FSSM" && pwd)"
  "$ROOT/benchmarks/fssm_env.sh"
fi
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
      "$BENCH" --threads "$t" --steps "$FUSED_STEPS" --warmup 3 --scan fused | sed 's/"impl":"native"/"impl":"native_fused"/'
      "$PY" "$REF" --threads "$t" --steps "$STEPS" --warmup 3
      "$BENCH" --threads "$t" --steps "$STEPS" --warmup 3 --scan fused --unfused_block | sed 's/"impl":"native"/"impl":"native_fused_unfused_block"/'
      "$BENCH" --threads "$t" --steps "$STEPS" --warmup 3 --scan parallel | sed 's/"impl":"native"/"impl":"native_parallel"/'
      if [ -n "$FSSM" ]; then
        "$ROOT/.venv-fssm-torch/bin/python" "$ROOT/benchmarks/fssm_step.py" --fssm "$FSSM" --model s4d \
          --threads "$t" --steps "$STEPS" --warmup 3
        "$ROOT/.venv-fssm-jax/bin/python" -W ignore "$ROOT/benchmarks/fssm_step.py" --fssm "$FSSM" --model s5 \
          --threads "$t" --steps "$STEPS" --warmup 3
      fi
    } >> "$RESULTS"
  done
  echo "round $r done"
done

"$PY" "$ROOT/benchmarks/summarize_ssm_step.py" --raw "$RESULTS" --rounds "$ROUNDS" --steps "$STEPS" \
  --fused_steps "$FUSED_STEPS" \
  --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" --results_dir "$RESULTS_DIR"
echo "raw results: $RESULTS"
