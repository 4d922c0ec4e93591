#!/usr/bin/env bash
# Training parity with the real RAVE (benchmarks/rave_parity.py says what and how): builds
# train and preprocess, makes the oracle venv (tests/oracle/run.sh's), trains the same small v2
# with `rave train` and with `train`, two runs each, and writes
# benchmarks/results/rave_parity.{json,png} (bench.py --render_only shows the result).
#   benchmarks/rave_parity.sh [--steps N] [--runs N] [--quick] [--results_dir DIR]
#                                (2000 steps, 2 runs; --quick 400)
#   WORK=DIR benchmarks/rave_parity.sh --collect_only   the runs already under DIR (e.g. those of
#                                                      scripts/gpu_check.sh's rave_parity step)
# RAVE's Lightning loop is slow on a 2-core CPU: the result in benchmarks/results was trained
# on a GPU machine (docs/offline_gpu.md).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for arg in "$@"; do
  [[ "$arg" == -h || "$arg" == --help ]] && { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
done
BIN="${BUILD_DIR:-$ROOT/build}/bin"
TARGETS="train preprocess" "$ROOT/scripts/build.sh"
"$ROOT/tests/oracle/run.sh" --only none  # makes the venv if needed, writes nothing
VENV="${VENV:-$ROOT/.venv-rave}"
# --results_dir among "$@" comes later and wins.
exec "$VENV/bin/python" -W ignore "$ROOT/benchmarks/rave_parity.py" --bin "$BIN" \
  --work "${WORK:-$ROOT/runs/rave_parity}" --results_dir "${BENCH_RESULTS_DIR:-$ROOT/benchmarks/results}" "$@"
