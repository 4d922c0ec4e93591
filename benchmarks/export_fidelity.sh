#!/usr/bin/env bash
# What `export --quantize int8` costs in fidelity on a trained model, beside the float32 export:
# the check `export` prints (export/checks/fidelity.h: the written file, loaded back and run as nn~ runs
# it, streaming in 2048-sample blocks, against the float32 C++ model offline; SNR and the
# multi-scale spectral distance it adds, as a share of the model's own reconstruction distance)
# on the run's database and on recorded speech (the eight spoken channel names of alsa-utils,
# the tests' speech fixture).
#   benchmarks/export_fidelity.sh [--run DIR]... [--config v2] [--capacity 32] [--steps 3000]
#                                    [--check_seconds 10] [--threads 2] [--quick] [--results_dir DIR]
# Without --run it trains one here: --config at --capacity on the demo database (preprocess
# --generate_demo, 20 s per file), batch 4 of 131072 samples, --steps steps, --threads threads;
# with --run it measures the given runs (their best checkpoint) and trains nothing. --quick: 200
# steps, 4 s checks. summarize_export_fidelity.py writes benchmarks/results/export_fidelity.json;
# bench.py --render_only shows it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
RUNS=()
CONFIG=v2
CAPACITY=32
STEPS=3000
CHECK_SECONDS=10
THREADS=2
bench_args "--run=RUNS+ --config=CONFIG --capacity=CAPACITY --steps=STEPS --check_seconds=CHECK_SECONDS --threads=THREADS" \
  "STEPS=200 CHECK_SECONDS=4" "$@"
bench_need_bin export train preprocess
SPEECH_PARTS=(Front_Left Front_Center Front_Right Side_Left Side_Right Rear_Left Rear_Center Rear_Right)
files=()
for p in "${SPEECH_PARTS[@]}"; do
  files+=("/usr/share/sounds/alsa/$p.wav")
  [ -f "${files[-1]}" ] || bench_die "${files[-1]} missing: apt-get install alsa-utils (scripts/setup.sh)"
done
WORK="$(mktemp -d /tmp/rt_export_fidelity.XXXXXX)"
SPEECH="$WORK/speech.wav"
sox "${files[@]}" "$SPEECH"

if [ ${#RUNS[@]} -eq 0 ]; then
  echo "== training $CONFIG at capacity $CAPACITY for $STEPS steps on the demo database ($THREADS threads)" >&2
  bench_audio_db "$WORK/db" 20
  "$BIN/train" --config "$CONFIG" --db_path "$WORK/db" --out_path "$WORK/runs" --threads "$THREADS" \
    --override "model.capacity=$CAPACITY" --batch 4 --n_signal 131072 \
    --max_steps "$STEPS" --val_every "$(( STEPS / 4 > 0 ? STEPS / 4 : 1 ))" --seed 1 2>&1 | tee "$WORK/train.log" >&2
  run="$(sed -n 's/^run directory: //p' "$WORK/train.log" | tail -1)"
  [ -n "$run" ] || bench_die "train printed no run directory (log: $WORK/train.log)"
  RUNS=("$run")
fi

RAW="$WORK/fidelity.jsonl"
: > "$RAW"
for run in "${RUNS[@]}"; do
  for audio in db speech; do
    for q in none int8; do
      out="$WORK/check_${audio}_${q}.ts"
      extra=()
      [ "$audio" = speech ] && extra=(--check_audio "$SPEECH")
      echo "== $run: --quantize $q on $audio" >&2
      "$BIN/export" --run "$run" --streaming --force --quantize "$q" --check_seconds "$CHECK_SECONDS" "${extra[@]}" \
        --output "$out" > "$WORK/export_${audio}_${q}.log" 2>&1 \
        || bench_die "export failed (log: $WORK/export_${audio}_${q}.log)"
      cat "$WORK/export_${audio}_${q}.log" >&2
      "$BENCH_PY" - "$run" "$audio" "$q" "$WORK/export_${audio}_${q}.log" "$out" >> "$RAW" <<'EOF'
import json, os, sys
run, audio, quantize, log, out = sys.argv[1:]
print(json.dumps({"run": run, "audio": audio, "quantize": quantize, "log": open(log).read(),
                  "file_bytes": os.path.getsize(out)}))
EOF
      rm -f "$out"
    done
  done
done
"$BENCH_PY" "$(dirname "${BASH_SOURCE[0]}")/summarize_export_fidelity.py" --raw "$RAW" --command "$COMMAND" \
  --config "$CONFIG" --capacity "$CAPACITY" --steps "$STEPS" --trained_here "$([ -f "$WORK/train.log" ] && echo 1 || echo 0)" \
  --load_before "$BENCH_LOAD_BEFORE" --results_dir "$RESULTS_DIR"
echo "raw results: $WORK" >&2
