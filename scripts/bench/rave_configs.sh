#!/usr/bin/env bash
# Every RAVE configuration at full size on this machine's CPU, through `train --smoke_test`:
# per config the trained parameter count (`--summary`), the median step time of phase 1 and of
# phase 2 (adversarial, a discriminator update included), the peak resident memory, and RAVE's
# own stated minimum GPU memory beside them. Writes scripts/bench/rave_configs_results.md, which
# `python3 scripts/bench/bench.py --render_only` folds into BENCHMARKS.md ("RAVE's configurations
# on the CPU"). Minutes per config on 2 cores; run it on an idle machine.
#   scripts/bench/rave_configs.sh [--batch 2] [--n_signal 131072] [--threads 0] [--work DIR]
#                                 [--stacks "v1 v2 v2+causal …"]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/bin"
BATCH=2
N_SIGNAL=131072
THREADS=0
WORK="${TMPDIR:-/tmp}/rave_configs_bench"
STACKS="v1 v2 v2_small v2_nopqmf v3 discrete discrete_v3 hybrid onnx raspberry v2+causal v2+noise v2+snake v2+adain v2+descript_discriminator v2+wasserstein v2+spherical v2+spectral_discriminator discrete+causal"
while [ $# -gt 0 ]; do
  case "$1" in
    --batch) BATCH="$2"; shift 2 ;;
    --n_signal) N_SIGNAL="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --stacks) STACKS="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "rave_configs.sh: unknown argument '$1' (accepted: --batch, --n_signal, --threads, --work, --stacks)" >&2
       exit 2 ;;
  esac
done
for tool in train preprocess; do
  [ -x "$BIN/$tool" ] || { echo "rave_configs.sh: $BIN/$tool not found; build it first (scripts/build.sh)" >&2; exit 2; }
done
OUT="$ROOT/scripts/bench/rave_configs_results.md"
DB="$WORK/db_$N_SIGNAL"
if [ ! -f "$DB/metadata.yaml" ]; then
  echo "== demo dataset with records of 2 x $N_SIGNAL samples: $DB"
  "$BIN/preprocess" --generate_demo "$WORK/audio" --demo_seconds 60 --seed 1 >/dev/null
  "$BIN/preprocess" --input_path "$WORK/audio" --output_path "$DB" --num_signal "$N_SIGNAL" --channels 1 >/dev/null
fi
REV="$(git -C "$ROOT" describe --always --dirty)"
LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
CPU="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
ROWS=""
for STACK in $STACKS; do
  ARGS=()
  for name in ${STACK//+/ }; do ARGS+=(--config "$name"); done
  echo "== $STACK: --smoke_test, batch $BATCH, n_signal $N_SIGNAL" >&2
  PARAMS="$("$BIN/train" "${ARGS[@]}" --summary | awk -F: '/^total trained/ {gsub(/^ +/, "", $2); print $2}')"
  GPU="$(for name in ${STACK//+/ }; do sed -n 's/^rave_gpu_memory = "\(.*\)"/\1/p' "$ROOT/configs/$name.toml"; done | head -1)"
  LOG="$WORK/${STACK//+/_}.log"
  rm -rf "$WORK/runs"
  "$BIN/train" "${ARGS[@]}" --db_path "$DB" --out_path "$WORK/runs" --smoke_test --batch "$BATCH" \
    --n_signal "$N_SIGNAL" --threads "$THREADS" --workers 1 >"$LOG" 2>&1 \
    || { echo "train failed (log: $LOG):" >&2; tail -20 "$LOG" >&2; exit 1; }
  P1="$(sed -n 's/^  phase 1 .*then median \([0-9.]*\) s\/step.*/\1/p' "$LOG")"
  P2="$(sed -n 's/^  phase 2 (adversarial) .*then median \([0-9.]*\) s\/step.*/\1/p' "$LOG")"
  RSS="$(sed -n 's/^  peak memory: \([0-9.]*\) MiB resident.*/\1/p' "$LOG")"
  [ -n "$P1" ] && [ -n "$P2" ] && [ -n "$RSS" ] || { echo "no smoke-test report in $LOG" >&2; tail -20 "$LOG" >&2; exit 1; }
  echo "   phase 1 $P1 s/step, phase 2 $P2 s/step, peak RSS $RSS MiB, $PARAMS parameters" >&2
  ROWS+="| \`${STACK//+/ + }\` | $PARAMS | $P1 s | $P2 s | $RSS MiB | ${GPU:-(as its base)} |"$'\n'
  rm -rf "$WORK/runs"
done
{
  echo "## RAVE's configurations on the CPU (measured by \`scripts/bench/rave_configs.sh\`)"
  echo
  echo "Command: \`scripts/bench/rave_configs.sh --batch $BATCH --n_signal $N_SIGNAL --threads $THREADS\` at $REV,"
  echo "$CPU, load before the run $LOAD. Each row is \`train --config … --smoke_test\` at full size:"
  echo "median step time of phase 1 and of phase 2 (RAVE's adversarial phase, a discriminator update"
  echo "included) after one warm-up step each, and the peak resident memory of the whole smoke run"
  echo "(validation and the final checkpoint included). RAVE's minimum GPU memory is what its"
  echo "README states for the base config (batch 8 on a GPU): a different quantity, shown for scale."
  echo
  echo "| config | parameters trained | phase 1 step | phase 2 step | peak RSS | RAVE's minimum GPU memory |"
  echo "|---|---|---|---|---|---|"
  printf '%s' "$ROWS"
} >"$OUT"
echo "wrote $OUT" >&2
