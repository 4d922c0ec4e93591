#!/usr/bin/env bash
# s5_maze training-step time (batch 64, 140 bins, 182 units, state 64; forward + MSE + backward
# + AdamW): native (build/bin/ssm_step_bench: scan "fused" with the fused block kernels, scan
# "fused" with the op-by-op block (--unfused_block), scan "parallel") against the same
# model in Python PyTorch (scripts/bench/reference/s5_maze.py on Debian's /usr/bin/python3).
#   scripts/bench/ssm_step.sh [--rounds 5] [--steps 20] [--threads "1 2"] [--out DIR]
# First checks that both compute the same losses from the same weights (native export →
# Python import by name), then runs the arms interleaved (native, python, native, ...) per
# thread count, and prints median / spread per arm and the native/python ratio.
set -euo pipefail
ARGS_SHOWN="$*"
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
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
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "ssm_step.sh: unknown argument '$1' (accepted: --rounds N, --steps N, --threads \"1 2\", --out DIR, --quick)" >&2; exit 2 ;;
  esac
done
BENCH="${BUILD_DIR:-$ROOT/build}/bin/ssm_step_bench"
PY=/usr/bin/python3
REF="$ROOT/scripts/bench/reference/s5_maze.py"
[ -x "$BENCH" ] || { echo "ssm_step.sh: $BENCH not built (cmake --build build --target ssm_step_bench)" >&2; exit 2; }
OUT="${OUT:-$(mktemp -d /tmp/rt_ssm_bench.XXXXXX)}"
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"

echo "== equivalence check (dropout 0, same weights and batch, 3 AdamW steps)"
for arm in "fused" "fused --unfused_block" "parallel"; do
  name="${arm// --/_}"
  "$BENCH" --export "$OUT/check_$name" --scan $arm >/dev/null
  echo "-- native scan=$arm vs python"
  "$PY" "$REF" --check "$OUT/check_$name"
done

echo "== timing: $ROUNDS rounds x $STEPS steps (after 3 warm-up steps), threads: $THREADS"
for r in $(seq 1 "$ROUNDS"); do
  for t in $THREADS; do
    "$BENCH" --threads "$t" --steps "$STEPS" --warmup 3 --scan fused | sed 's/"impl":"native"/"impl":"native_fused"/' >> "$RESULTS"
    "$PY" "$REF" --threads "$t" --steps "$STEPS" --warmup 3 >> "$RESULTS"
    "$BENCH" --threads "$t" --steps "$STEPS" --warmup 3 --scan fused --unfused_block | sed 's/"impl":"native"/"impl":"native_fused_unfused_block"/' >> "$RESULTS"
    "$BENCH" --threads "$t" --steps "$STEPS" --warmup 3 --scan parallel | sed 's/"impl":"native"/"impl":"native_parallel"/' >> "$RESULTS"
  done
  echo "round $r done"
done

{
  echo "## s5_maze training step, native vs Python (measured by \`scripts/bench/ssm_step.sh\`)"
  echo
  echo "Command: \`scripts/bench/ssm_step.sh${ARGS_SHOWN:+ $ARGS_SHOWN}\` — batch 64 × 140 bins × 182 units, one step ="
  echo "zero_grad + forward + MSE + backward + AdamW; $ROUNDS interleaved rounds (fused block, python, op-by-op block, parallel scan per thread"
  echo "count) × $STEPS steps after 3 warm-up steps; medians of the per-run medians. Equivalence checked first"
  echo "(same weights and batch, dropout 0: losses and parameters after 3 steps). Load average before: $LOAD_BEFORE;"
  echo "after: $(cut -d' ' -f1-3 /proc/loadavg). Method and analysis: the s5_maze section above (scripts/bench/ssm_results.md)."
  "$PY" - "$RESULTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
arms = {}
for r in rows:
    arms.setdefault((r["threads"], r["impl"]), []).append(r["median_ms"])
print("\n| threads | implementation | median step (ms) | spread of run medians (ms) | runs | native/python |")
print("|---|---|---|---|---|---|")
for t in sorted({k[0] for k in arms}):
    py = statistics.median(arms[(t, "python")])
    for impl in ("native_fused", "native_fused_unfused_block", "native_parallel", "python"):
        v = arms.get((t, impl))
        if not v:
            continue
        m = statistics.median(v)
        ratio = f"**{m / py:.2f}**" if impl == "native_fused" else (f"{m / py:.2f}" if impl != "python" else "1.00")
        print(f"| {t} | {impl} | {m:.1f} | {min(v):.1f}–{max(v):.1f} | {len(v)} | {ratio} |")
PY
} > "$OUT/table.md"
cat "$OUT/table.md"
cp "$OUT/table.md" "$ROOT/scripts/bench/ssm_step_results.md"
echo "raw results: $RESULTS"
