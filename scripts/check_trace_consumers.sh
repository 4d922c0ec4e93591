#!/usr/bin/env bash
# Opens a real training trace with the consumers' own code: Holistic Trace Analysis's call
# graph with its default settings (scripts/interop/hta_call_graph.py) and TensorBoard's
# PyTorch-profiler plugin's loader (scripts/interop/tb_plugin_views.py: the Overview's
# DataLoader share and the Module view); then a two-rank run's traces in both (HTA per rank, the
# plugin's Distributed view). Fetches nothing: point it at checkouts you have.
#
#   HTA_DIR=<facebookresearch/HolisticTraceAnalysis checkout> \
#   TB_PLUGIN_DIR=<pytorch/kineto checkout at 041e7ce9, the last commit with tb_plugin/>/tb_plugin \
#   scripts/check_trace_consumers.sh [BUILD_DIR]        (default: build; needs bin/train, bin/preprocess)
#
# Either variable may be left out; that consumer is then skipped. Python: Debian's python3 with
# python3-pandas (HTA), python3-absl (the plugin). Keeps its work in $OUT_DIR (default: a new
# temp dir). Exit 0 when every consumer given passes. tests/e2e/trace_consumers_test.cpp runs it.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
PY="${PYTHON:-/usr/bin/python3}"
OUT_DIR="${OUT_DIR:-$(mktemp -d /tmp/trace_consumers.XXXXXX)}"
mkdir -p "$OUT_DIR"
if [[ -z "${HTA_DIR:-}" && -z "${TB_PLUGIN_DIR:-}" ]]; then
  echo "error: set HTA_DIR and/or TB_PLUGIN_DIR (see the header of $0)" >&2
  exit 2
fi
[[ -z "${HTA_DIR:-}" || -d "$HTA_DIR/hta" ]] || { echo "error: HTA_DIR=$HTA_DIR has no hta/ package" >&2; exit 2; }
[[ -z "${TB_PLUGIN_DIR:-}" || -d "$TB_PLUGIN_DIR/torch_tb_profiler" ]] ||
  { echo "error: TB_PLUGIN_DIR=$TB_PLUGIN_DIR has no torch_tb_profiler/ package" >&2; exit 2; }
for bin in train preprocess; do
  [[ -x "$BUILD/bin/$bin" ]] || { echo "error: $BUILD/bin/$bin not found; build it first (cmake --build $BUILD --target train preprocess)" >&2; exit 2; }
done

# A short profiled tiny_rave run with the trainer's defaults for the trace (whole-µs times):
# steps 2-3 traced with shapes, memory and module spans, batches loaded by a worker thread.
if [[ ! -d "$OUT_DIR/db" ]]; then
  "$BUILD/bin/preprocess" --generate_demo "$OUT_DIR/audio" --force --demo_seconds 3 --seed 1 >"$OUT_DIR/preprocess.log" 2>&1
  "$BUILD/bin/preprocess" --input_path "$OUT_DIR/audio" --output_path "$OUT_DIR/db" --num_signal 8192 >>"$OUT_DIR/preprocess.log" 2>&1
fi
rm -rf "$OUT_DIR/runs"
OMP_WAIT_POLICY=PASSIVE "$BUILD/bin/train" --config tiny_rave --db_path "$OUT_DIR/db" --out_path "$OUT_DIR/runs" \
  --name consumers --max_steps 5 --train.threads 1 --train.val_every 1000 --train.save_every 1000 \
  --enable_profiling --profiling.wait 1 --profiling.warmup 1 --profiling.active 2 --profiling.skip_first 0 \
  --profiling.record_shapes --profiling.profile_memory --profiling.with_modules >"$OUT_DIR/train.log" 2>&1
RUN="$(ls -d "$OUT_DIR"/runs/consumers* | head -1)"
TRACES="$RUN/profiler_traces"
echo "trace: $(ls "$TRACES")"

status=0
if [[ -n "${HTA_DIR:-}" ]]; then
  echo "== Holistic Trace Analysis ($HTA_DIR)"
  "$PY" "$ROOT/scripts/interop/hta_call_graph.py" "$HTA_DIR" "$TRACES" 2>"$OUT_DIR/hta.log" || { status=1; tail -20 "$OUT_DIR/hta.log"; }
fi
if [[ -n "${TB_PLUGIN_DIR:-}" ]]; then
  echo "== TensorBoard PyTorch-profiler plugin ($TB_PLUGIN_DIR)"
  "$PY" "$ROOT/scripts/interop/tb_plugin_views.py" "$TB_PLUGIN_DIR" "$TRACES" \
    encoder decoder encoder.encoder.net.0 decoder.net.0 2>"$OUT_DIR/tb_plugin.log" ||
    { status=1; tail -20 "$OUT_DIR/tb_plugin.log"; }
fi
# Two ranks (train --nproc_per_node 2, Gloo): each rank's trace in HTA (the rank taken from
# distributedInfo), and the plugin's Distributed view over both workers.
rm -rf "$OUT_DIR/runs2"
OMP_WAIT_POLICY=PASSIVE "$BUILD/bin/train" --nproc_per_node 2 --config tiny_rave --db_path "$OUT_DIR/db" \
  --out_path "$OUT_DIR/runs2" --name ranks --max_steps 5 --train.threads 1 --train.val_every 1000 \
  --train.save_every 1000 --enable_profiling --profiling.wait 1 --profiling.warmup 1 --profiling.active 2 \
  --profiling.skip_first 0 >"$OUT_DIR/train2.log" 2>&1
TRACES2="$(ls -d "$OUT_DIR"/runs2/ranks*/profiler_traces | head -1)"
echo "two-rank traces: $(ls "$TRACES2" | tr '\n' ' ')"
if [[ -n "${HTA_DIR:-}" ]]; then
  echo "== Holistic Trace Analysis, 2 ranks"
  "$PY" "$ROOT/scripts/interop/hta_call_graph.py" "$HTA_DIR" "$TRACES2" 2>"$OUT_DIR/hta2.log" || { status=1; tail -20 "$OUT_DIR/hta2.log"; }
fi
if [[ -n "${TB_PLUGIN_DIR:-}" ]]; then
  echo "== TensorBoard PyTorch-profiler plugin, Distributed view"
  "$PY" "$ROOT/scripts/interop/tb_plugin_views.py" --distributed "$TB_PLUGIN_DIR" "$TRACES2" 2>"$OUT_DIR/tb_plugin2.log" ||
    { status=1; tail -20 "$OUT_DIR/tb_plugin2.log"; }
  # The plugin drops (and warns about) a collective outside every ProfilerStep.
  if grep -q "not belong to any step" "$OUT_DIR/tb_plugin2.log"; then
    echo "the plugin found a collective outside every step"
    status=1
  fi
fi
echo "work kept in $OUT_DIR"
exit $status
