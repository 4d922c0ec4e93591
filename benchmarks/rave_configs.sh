#!/usr/bin/env bash
# Every RAVE configuration at full size on this machine's CPU, through `train --smoke_test`:
# per config the trained parameter count (`--summary`), the median step time of phase 1 and of
# phase 2 (adversarial, a discriminator update included), the peak resident memory, and RAVE's
# own stated minimum GPU memory beside them. Writes benchmarks/results/rave_configs.json
# (summarize_rave_configs.py), which `python3 benchmarks/bench.py --render_only` shows in
# BENCHMARKS.md ("RAVE's configurations on the CPU"). Minutes per config on 2 cores; run it on
# an idle machine.
#   benchmarks/rave_configs.sh [--batch 2] [--n_signal 131072] [--threads 0] [--work DIR]
#                                 [--stacks "v1 v2 v2+causal …"] [--results_dir DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
BATCH=2
N_SIGNAL=131072
THREADS=0
WORK="${TMPDIR:-/tmp}/rave_configs_bench"
STACKS="v1 v2 v2_small v2_nopqmf v3 discrete discrete_v3 hybrid onnx raspberry v2+causal v2+noise v2+snake v2+adain v2+descript_discriminator v2+wasserstein v2+spherical v2+spectral_discriminator discrete+causal"
bench_args "--batch=BATCH --n_signal=N_SIGNAL --threads=THREADS --work=WORK --stacks=STACKS" "" "$@"
bench_need_bin train preprocess
DB="$WORK/db_$N_SIGNAL"
if [ ! -f "$DB/metadata.yaml" ]; then
  echo "== demo dataset with records of 2 x $N_SIGNAL samples: $DB"
  mkdir -p "$WORK"
  bench_audio_db "$DB" 60 --num_signal "$N_SIGNAL" --channels 1
fi
REV="$(git -C "$ROOT" describe --always --dirty)"
mkdir -p "$WORK"
ROWS="$(mktemp "$WORK/rows.XXXXXX.tsv")"
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
  if [ -z "$P1" ] || [ -z "$P2" ] || [ -z "$RSS" ]; then
    echo "no smoke-test report in $LOG" >&2; tail -20 "$LOG" >&2; exit 1
  fi
  echo "   phase 1 $P1 s/step, phase 2 $P2 s/step, peak RSS $RSS MiB, $PARAMS parameters" >&2
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$STACK" "$PARAMS" "$P1" "$P2" "$RSS" "$GPU" >>"$ROWS"
  rm -rf "$WORK/runs"
done
"$BENCH_PY" "$ROOT/benchmarks/summarize_rave_configs.py" --rows "$ROWS" --batch "$BATCH" --n_signal "$N_SIGNAL" \
  --threads "$THREADS" --rev "$REV" --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" --results_dir "$RESULTS_DIR"
