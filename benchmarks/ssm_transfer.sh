#!/usr/bin/env bash
# Why pretrain: a multi-session SSM decoder pretrained on four synthetic sessions, transferred to
# a fifth (`--config foundational_transfer --init_from PRETRAIN_RUN`), against the same model
# trained from scratch on that session (the same config and flags without --init_from), at 10,
# 25, 50 and 100 % of the new session's training trials (--max_train_trials N, the first N), for
# each SSM kind (model.ssm; one pretraining per kind).
#   benchmarks/ssm_transfer.sh [--kinds "s5 s4d lru"] [--fractions "10 25 50 100"]
#       [--seeds "0 1"] [--modes "all freeze_a"] [--steps 300] [--pretrain_steps 800]
#       [--trials 250] [--units "40 48 56 64 72"] [--data_seed 7] [--d_model 32] [--state 32]
#       [--lr 3e-3] [--val_fraction 0.2] [--jobs 2] [--out DIR] [--keep] [--quick]
#       [--results_dir DIR]
# Data: preprocess --generate_neural_demo writes the five sessions in one call (--groups 5
# --units ... --seed DATA_SEED): each session's units and their tuning come from (seed, session),
# the latent reach dynamics and the behaviour readout from the seed alone, so the sessions are
# different recordings of one task. Sessions 0-3 are imported into one database (pretraining),
# session 4 into its own (the new session; validation: its held-out VAL_FRACTION of trials, the
# same for every run). Every run: --threads 1, foundational's 4 blocks at --model.d_model D
# --model.state_dim S, lr LR (cosine, 50 warm-up steps); the fine-tune runs validate at the last
# step, and the figure is that final val/r2 (training_summary.json "metrics"), per train.seed in
# SEEDS. Transfer runs once per transfer mode in MODES (train.transfer_mode). Runs go JOBS at a
# time. summarize_ssm_transfer.py writes benchmarks/results/ssm_transfer.{json,png}
# (bench.py --render_only shows it). The work folder (default: a new /tmp/rt_ssm_transfer.*) is
# removed at the end unless --keep or --out is given.
# --quick: kinds s5, seeds 0, modes all, 200 steps, pretraining 400 steps.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
KINDS="s5 s4d lru"
FRACTIONS="10 25 50 100"
SEEDS="0 1"
MODES="all freeze_a"
STEPS=300
PRETRAIN_STEPS=800
TRIALS=250
UNITS="40 48 56 64 72"
DATA_SEED=7
D_MODEL=32
STATE=32
LR=3e-3
VAL_FRACTION=0.2
JOBS=2
OUT=""
KEEP=0
bench_args "--kinds=KINDS --fractions=FRACTIONS --seeds=SEEDS --modes=MODES --steps=STEPS --pretrain_steps=PRETRAIN_STEPS
  --trials=TRIALS --units=UNITS --data_seed=DATA_SEED --d_model=D_MODEL --state=STATE --lr=LR --val_fraction=VAL_FRACTION
  --jobs=JOBS --out=OUT --keep=KEEP:1" "KINDS=s5 SEEDS=0 MODES=all STEPS=200 PRETRAIN_STEPS=400" "$@"
[ -z "$OUT" ] || KEEP=1
read -ra UNIT_LIST <<< "$UNITS"
[ "${#UNIT_LIST[@]}" -ge 2 ] || bench_die "--units needs at least two sessions (pretraining ones, then the new one)"
bench_need_bin train preprocess
OUT="${OUT:-$(mktemp -d /tmp/rt_ssm_transfer.XXXXXX)}"
mkdir -p "$OUT/bin" "$OUT/runs" "$OUT/logs"
[ "$KEEP" = 1 ] || trap 'rm -rf "$OUT"' EXIT
# A snapshot of the programs: a rebuild of build/ during the run does not mix two builds.
cp "$BIN/train" "$BIN/preprocess" "$OUT/bin/"
export TRAIN="$OUT/bin/train"
PRE="$OUT/bin/preprocess"
START=$(date +%s)

echo "== data: ${#UNIT_LIST[@]} synthetic sessions (units $UNITS, $TRIALS trials each, seed $DATA_SEED)"
"$PRE" --generate_neural_demo "$OUT/gen" --groups "${#UNIT_LIST[@]}" --units "${UNIT_LIST[@]}" \
  --trials "$TRIALS" --seed "$DATA_SEED" --force
LAST=$(( ${#UNIT_LIST[@]} - 1 ))
PRETRAIN_FILES=()
for g in $(seq 0 $(( LAST - 1 ))); do PRETRAIN_FILES+=("$OUT/gen/synthetic_reach_$g.h5"); done
rm -rf "$OUT/db_pretrain" "$OUT/db_new"
"$PRE" --kind neural --input_path "${PRETRAIN_FILES[@]}" --output_path "$OUT/db_pretrain" | tail -1
"$PRE" --kind neural --input_path "$OUT/gen/synthetic_reach_$LAST.h5" --output_path "$OUT/db_new" | tail -1
"$PRE" --inspect "$OUT/db_new" > "$OUT/inspect_new.txt"
N_NEW=$(sed -n 's/^entries: \([0-9]*\) trials.*/\1/p' "$OUT/inspect_new.txt")
[ -n "$N_NEW" ] || bench_die "could not read the new session's trial count from preprocess --inspect"
# data/split.h: train = max(floor((1 - val_fraction) n), 1), val_fraction at least 0.1 for SSM runs.
N_TRAIN=$("$BENCH_PY" -c "import math; vf = max(0.1, $VAL_FRACTION); print(max(math.floor((1 - vf) * $N_NEW + 1e-9), 1))")
echo "new session: $N_NEW trials, $N_TRAIN for training at val_fraction $VAL_FRACTION"

COMMON=(--model.d_model "$D_MODEL" --model.state_dim "$STATE" --train.lr "$LR" --train.warmup_steps 50
        --threads 1 --log_every 100)
export COMMON_ARGS="${COMMON[*]}" OUT

# shellcheck disable=SC2317  # run_one is called through xargs
run_one() {  # run_one ID ARGS...: one train run, its output in $OUT/logs/ID.log; a failure is reported, not fatal
  local id="$1"; shift
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086  # COMMON_ARGS holds flags without spaces
  "$TRAIN" "$@" $COMMON_ARGS --out_path "$OUT/runs" --name "$id" > "$OUT/logs/$id.log" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  printf '{"id":"%s","rc":%d,"seconds":%s,"load_after":"%s"}\n' "$id" "$rc" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" "$(cut -d' ' -f1 /proc/loadavg)" > "$OUT/logs/$id.done"
  echo "$id: rc $rc"
}
export -f run_one

echo "== pretraining on sessions 0..$(( LAST - 1 )): $PRETRAIN_STEPS steps per kind ($KINDS)"
: > "$OUT/pretrain_jobs.txt"
for k in $KINDS; do
  "$TRAIN" --config foundational --model.ssm "$k" --db_path "$OUT/db_pretrain" --summary \
    --model.d_model "$D_MODEL" --model.state_dim "$STATE" > "$OUT/logs/summary_$k.txt"
  echo "pretrain_$k --config foundational --model.ssm $k --db_path $OUT/db_pretrain --max_steps $PRETRAIN_STEPS \
--val_every $(( PRETRAIN_STEPS / 4 )) --save_every $PRETRAIN_STEPS --seed 0" >> "$OUT/pretrain_jobs.txt"
done
xargs -P "$JOBS" -L 1 bash -c 'run_one "$@"' _ < "$OUT/pretrain_jobs.txt"

echo "== the new session: transfer ($MODES) and scratch at $FRACTIONS % of $N_TRAIN trials, $STEPS steps, seeds $SEEDS"
: > "$OUT/jobs.txt"
for seed in $SEEDS; do
  for f in $FRACTIONS; do
    n=$(( (f * N_TRAIN + 50) / 100 ))
    [ "$n" -ge 1 ] || n=1
    for k in $KINDS; do
      pre_run=$(find "$OUT/runs" -maxdepth 1 -type d -name "pretrain_${k}_*" | head -1)
      [ -n "$pre_run" ] || bench_die "pretraining of $k left no run directory (see $OUT/logs/pretrain_$k.log)"
      base="--config foundational_transfer --model.ssm $k --db_path $OUT/db_new --data.val_fraction $VAL_FRACTION \
--max_train_trials $n --max_steps $STEPS --val_every $(( STEPS / 3 )) --save_every $STEPS --seed $seed"
      for m in $MODES; do
        echo "ft_${k}_f${f}_n${n}_s${seed}_transfer-$m $base --init_from $pre_run --train.transfer_mode $m" >> "$OUT/jobs.txt"
      done
      echo "ft_${k}_f${f}_n${n}_s${seed}_scratch $base" >> "$OUT/jobs.txt"
    done
  done
done
echo "$(wc -l < "$OUT/jobs.txt") runs, $JOBS at a time"
xargs -P "$JOBS" -L 1 bash -c 'run_one "$@"' _ < "$OUT/jobs.txt"

WALL=$(( $(date +%s) - START ))
"$BENCH_PY" "$ROOT/benchmarks/summarize_ssm_transfer.py" --work "$OUT" --kinds "$KINDS" --fractions "$FRACTIONS" \
  --seeds "$SEEDS" --modes "$MODES" --steps "$STEPS" --pretrain_steps "$PRETRAIN_STEPS" --trials "$TRIALS" \
  --units "$UNITS" --data_seed "$DATA_SEED" --d_model "$D_MODEL" --state "$STATE" --lr "$LR" \
  --val_fraction "$VAL_FRACTION" --n_new "$N_NEW" --n_train "$N_TRAIN" --jobs "$JOBS" --wall_seconds "$WALL" \
  --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" --results_dir "$RESULTS_DIR"
[ "$KEEP" = 1 ] && echo "work folder kept: $OUT"
exit 0
