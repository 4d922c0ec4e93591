#!/usr/bin/env bash
# train.retain_freed_memory (util/heap_retention.h) on and off, side by side: examples/s of the
# training loop and minor page faults per step, tiny_rave and s5_maze on 1 thread, and tiny_rave
# on 2 ranks (the data-parallel ratio with and without). Alternating runs, REPS each, medians.
#
#   benchmarks/heap_retention.sh [--quick] [--results_dir DIR]
#
# Page faults: ru_minflt of the train process and its children (getrusage RUSAGE_CHILDREN),
# start-up included, over the steps of every rank. The runs are made by heap_retention.py, which
# writes benchmarks/results/heap_retention.json (bench.py --render_only shows it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
REPS="${REPS:-3}"
STEPS="${STEPS:-150}"
bench_args "" "REPS=1 STEPS=40" "$@"
bench_need_bin train preprocess
unset GLIBC_TUNABLES MALLOC_MMAP_THRESHOLD_ MALLOC_TRIM_THRESHOLD_
WORK="$(mktemp -d /tmp/heap_bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
bench_audio_db "$WORK/adb" 6 --num_signal 8192
bench_neural_db "$WORK/ndb" 182 512

"$BENCH_PY" "$ROOT/benchmarks/heap_retention.py" --bin "$BIN" --work "$WORK" --reps "$REPS" --steps "$STEPS" \
  --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" --results_dir "$RESULTS_DIR"
