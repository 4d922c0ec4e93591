#!/usr/bin/env bash
# Our streaming export of RAVE v2 (full size) against RAVE's own, as nn~ runs them: `forward` on
# consecutive blocks under inference mode, both files in the same process, interleaved, on the
# same CPU and the same LibTorch; under two LibTorch builds: 1.13 (Debian's /usr/bin/python3, the
# one our build links) and 2.11 (.venv-rave-cpu's PyPI torch, what nn~ ships).
#   benchmarks/export_bench.sh [--rounds 3] [--seconds 10] [--threads "1 2"] [--blocks "2048 4096"]
#                                 [--quick] [--results_dir DIR]
# The two files, both of a random full-size v2 (the speed does not depend on the weights):
#   ours        build/bin/export_bench --keep: RaveOptions::preset(v2) exported with --streaming
#               (float32, the default), and with --quantize int8 (ours_int8);
#   RAVE's own  benchmarks/rave_own_export.py in .venv-rave-cpu (benchmarks/rave_cpu_env.sh):
#               acids-rave 2.3.1's scripts/export.py path, cached_conv.use_cached_conv(True), v2.gin,
#               weight norm removed, its VariationalScriptedRAVE scripted and saved (torch 2.11),
#               keeping as many latent dimensions as ours.
# Then per round, one process per LibTorch (their order alternating): benchmarks/export_race.py
# on both files for every thread count and block size, plus the weight-read floor (one pass
# summing every weight). --quick: 2 rounds of 4 s. summarize_export.py writes ms per block,
# realtime factor, ours ÷ RAVE's own and the floor to benchmarks/results/export.json;
# bench.py --render_only shows it. RAVE_PY and DEBIAN_PY override the two Pythons.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
ROUNDS=3
SECONDS_TIMED=10
THREADS="1 2"
BLOCKS="2048 4096"
bench_args "--rounds=ROUNDS --seconds=SECONDS_TIMED --threads=THREADS --blocks=BLOCKS" "ROUNDS=2 SECONDS_TIMED=4" "$@"
bench_need_bin export_bench
HERE="$ROOT/benchmarks"
DEBIAN_PY="${DEBIAN_PY:-/usr/bin/python3}"   # python3-torch: LibTorch 1.13, OpenBLAS
RAVE_PY="${RAVE_PY:-$ROOT/.venv-rave-cpu/bin/python}"   # torch 2.11 (PyPI, MKL) and acids-rave 2.3.1
[[ -x "$RAVE_PY" ]] || bench_die "$RAVE_PY not found: benchmarks/rave_cpu_env.sh makes .venv-rave-cpu"
"$RAVE_PY" -c "import nn_tilde" 2>/dev/null \
  || bench_die "$RAVE_PY has no nn_tilde (RAVE's export.py imports it): rerun benchmarks/rave_cpu_env.sh"
"$DEBIAN_PY" -c "import torch" 2>/dev/null || bench_die "$DEBIAN_PY has no torch (apt-get install python3-torch)"
WORK="$(mktemp -d /tmp/rt_export_bench.XXXXXX)"
OURS="$WORK/ours_streaming.ts"
OURS_INT8="$WORK/ours_int8_streaming.ts"
RAVE="$WORK/rave_own_streaming.ts"
trap 'rm -f "$OURS" "$OURS_INT8" "$RAVE"' EXIT   # 140 MiB each; the JSON lines stay in $WORK

echo "== the files (random full-size v2)" >&2
"$BIN/export_bench" --version v2 --block 2048 --threads 1 --seconds 1 --keep "$OURS" > "$WORK/ours_export.json"
"$BIN/export_bench" --version v2 --block 2048 --threads 1 --seconds 1 --quantize int8 --keep "$OURS_INT8" \
  > "$WORK/ours_int8_export.json"
"$RAVE_PY" -W ignore "$HERE/rave_own_export.py" --out "$RAVE" --match "$OURS" > "$WORK/rave_own_export.json"
cat "$WORK/rave_own_export.json" >&2

echo "== $ROUNDS rounds × $SECONDS_TIMED s per file, threads: $THREADS, blocks: $BLOCKS" >&2
RAW="$WORK/race.jsonl"
: > "$RAW"
PYS=("$DEBIAN_PY" "$RAVE_PY")
for r in $(seq 1 "$ROUNDS"); do
  order=(0 1)
  (( r % 2 )) || order=(1 0)
  for i in "${order[@]}"; do
    "${PYS[$i]}" -W ignore "$HERE/export_race.py" --file ours="$OURS" --file ours_int8="$OURS_INT8" --file rave="$RAVE" --threads "$THREADS" \
      --blocks "$BLOCKS" --rounds 1 --first_round "$r" --seconds "$SECONDS_TIMED" >> "$RAW"
  done
done
"$BENCH_PY" "$HERE/summarize_export.py" --raw "$RAW" --ours_export "$WORK/ours_export.json" \
  --rave_export "$WORK/rave_own_export.json" --command "$COMMAND" --rounds "$ROUNDS" --seconds "$SECONDS_TIMED" \
  --load_before "$BENCH_LOAD_BEFORE" --results_dir "$RESULTS_DIR"
echo "raw results: $WORK"
