#!/usr/bin/env bash
# SSM smoke run (too slow for CI): synthetic reaching data for 3 groups → neural LMDB →
# `train --config foundational` (multi-session S5) → checks every group's validation R².
#   scripts/smoke_ssm.sh [--steps N] [--config NAME] [--threads N] [--min_r2 X] [--trials N]
# Uses an existing build (BUILD_DIR, default build/); work files go to $SMOKE_DIR (default
# a fresh temp dir, kept); extra train flags in $TRAIN_ARGS. Exit 1 when a group's val/r2_group_<name> is below --min_r2.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STEPS=600
CONFIG=foundational
THREADS=2
MIN_R2=0.5
TRIALS=128
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS="$2"; shift 2 ;;
    --config) CONFIG="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --min_r2) MIN_R2="$2"; shift 2 ;;
    --trials) TRIALS="$2"; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "smoke_ssm.sh: unknown argument '$1' (accepted: --steps N, --config NAME, --threads N, --min_r2 X, --trials N)" >&2; exit 2 ;;
  esac
done
BIN="${BUILD_DIR:-$ROOT/build}/bin"
for exe in preprocess train; do
  [ -x "$BIN/$exe" ] || { echo "smoke_ssm.sh: $BIN/$exe not built (cmake --build build --target train preprocess)" >&2; exit 2; }
done
W="${SMOKE_DIR:-$(mktemp -d /tmp/rt_smoke_ssm.XXXXXX)}"
mkdir -p "$W"
echo "== work dir $W"

T0=$(date +%s.%N)
"$BIN/preprocess" --generate_neural_demo "$W/h5" --force --groups 3 --trials "$TRIALS" --seed 1
rm -rf "$W/db"
"$BIN/preprocess" --kind neural --input_path "$W/h5" --output_path "$W/db"
"$BIN/preprocess" --inspect "$W/db"
T1=$(date +%s.%N)
"$BIN/train" --config "$CONFIG" --db_path "$W/db" --out_path "$W/runs" --max_steps "$STEPS" ${TRAIN_ARGS:-} \
  --val_every "$STEPS" --save_every "$STEPS" --log_every 50 --threads "$THREADS" --seed 0 \
  --train.warmup_steps 50 --enable_timing_profiling
T2=$(date +%s.%N)
RUN="$(cd "$W/runs" && readlink -f "$(cat latest)")"
python3 - "$RUN/training_summary.json" "$MIN_R2" "$T0" "$T1" "$T2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); min_r2 = float(sys.argv[2])
m = s["metrics"]
groups = {k[len("val/r2_group_"):]: v for k, v in m.items() if k.startswith("val/r2_group_")}
t0, t1, t2 = map(float, sys.argv[3:6])
print(f"data {t1 - t0:.1f} s, training {t2 - t1:.1f} s, {s['total_steps']} steps, "
      f"{s['steps_per_second']:.2f} steps/s, status {s['status']}")
print(f"val/r2 {m.get('val/r2', float('nan')):.4f}")
ok = s["status"] == "completed" and len(groups) >= 2
for g, v in sorted(groups.items()):
    print(f"val/r2_group_{g} {v:.4f} {'ok' if v >= min_r2 else 'BELOW ' + str(min_r2)}")
    ok = ok and v >= min_r2
print("smoke_ssm: " + ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
