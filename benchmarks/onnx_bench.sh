#!/usr/bin/env bash
# Our ONNX export of RAVE v2 (full size) against RAVE's own ONNX export, under ONNX Runtime on
# one thread: time per block at 2048 and 4096 samples, the realtime factor at host buffers of
# 128-2048 samples at 48 kHz, and the output difference (benchmarks/onnx_race.py says how).
#   benchmarks/onnx_bench.sh [--rounds 3] [--seconds 10] [--quick] [--results_dir DIR]
# The files, of one random full-size v2 (the same weights in both):
#   ours        build/bin/export_bench --onnx_dir: the forward graphs export --format onnx writes
#               (float32 streaming and offline; streaming with --quantize int8);
#   RAVE's own  benchmarks/rave_own_onnx.py in .venv-rave-cpu (benchmarks/rave_cpu_env.sh):
#               acids-rave 2.3.1's scripts/export_onnx.py steps on those weights, torch 2.11.
# Timed in .venv-onnx (scripts/onnx_venv.sh: ONNX Runtime 1.17.3). --quick: 2 rounds of 4 s.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
ROUNDS=3
SECONDS_TIMED=10
bench_args "--rounds=ROUNDS --seconds=SECONDS_TIMED" "ROUNDS=2 SECONDS_TIMED=4" "$@"
bench_need_bin export_bench
HERE="$ROOT/benchmarks"
RAVE_PY="${RAVE_PY:-$ROOT/.venv-rave-cpu/bin/python}"
[[ -x "$RAVE_PY" ]] || bench_die "$RAVE_PY not found: benchmarks/rave_cpu_env.sh makes .venv-rave-cpu"
"$ROOT/scripts/onnx_venv.sh"
WORK="$(mktemp -d /tmp/rt_onnx_bench.XXXXXX)"
trap 'rm -f "$WORK"/*.onnx "$WORK"/weights.bin' EXIT   # 130 MiB each; the records stay in $WORK
echo "== the files (random full-size v2, the same weights)" >&2
"$BIN/export_bench" --version v2 --onnx_dir "$WORK" > "$WORK/ours_int8.json"
"$RAVE_PY" -W ignore "$HERE/rave_own_onnx.py" --weights "$WORK/weights" --out "$WORK/rave.onnx" > "$WORK/rave.json"
cat "$WORK/rave.json" >&2
echo "== $ROUNDS rounds × $SECONDS_TIMED s per file and block" >&2
"$ROOT/.venv-onnx/bin/python" "$HERE/onnx_race.py" --dir "$WORK" --rounds "$ROUNDS" --seconds "$SECONDS_TIMED" \
  --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" --results_dir "$RESULTS_DIR"
echo "records: $WORK"
