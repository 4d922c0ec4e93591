#!/usr/bin/env bash
# Training parity with the real RAVE (scripts/bench/rave_parity.py says what and how): builds
# train and preprocess, makes the oracle venv (scripts/oracle/run.sh's), trains the same small v2
# with `rave train` and with `train`, two runs each, and writes
# scripts/bench/results/rave_parity.{json,png}.
#   scripts/bench/rave_parity.sh [--steps N] [--runs N] [--quick]   (2000 steps, 2 runs; --quick 400)
#   WORK=DIR scripts/bench/rave_parity.sh --collect_only   the runs already under DIR (e.g. those of
#                                                      scripts/gpu_check.sh's rave_parity step)
# On this 2-core CPU RAVE's loop takes about 1 s a step: the figure in BENCHMARKS.md was trained
# on a GPU machine (docs/gpu_check.md).
# scripts/bench/results/rave_parity.json is the result BENCHMARKS.md shows (see the report for the
# Markdown rave_parity.py still prints beside it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGETS="train preprocess" "$ROOT/scripts/build.sh"
"$ROOT/scripts/oracle/run.sh" --only none  # makes the venv if needed, writes nothing
VENV="${VENV:-$ROOT/.venv-rave}"
exec "$VENV/bin/python" -W ignore "$ROOT/scripts/bench/rave_parity.py" --bin "${BUILD_DIR:-$ROOT/build}/bin" \
  --work "${WORK:-$ROOT/runs/rave_parity}" --out "$ROOT/scripts/bench/results" "$@"
