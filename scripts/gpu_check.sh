#!/usr/bin/env bash
# Checks a GPU node with the offline bundle (scripts/offline_bundle.sh; docs/offline_gpu.md): the
# CUDA tests, every profiling mode on the GPU, the traces in HTA, and full-size v2 against the
# real RAVE's training step, speed and memory. For a node without network: it needs only the
# bundle, this repository's scripts and configs, and the node's Python with torch. Run from the
# repository root:
#
#   scripts/gpu_check.sh                       results in gpu-check-out/ (OUT)
#   scripts/gpu_check.sh --only STEP,STEP,...  those steps only, in this script's order (a step
#                                              needs the ones it builds on: datasets for the
#                                              trainings, the trainings for profile_report and
#                                              traces_and_hta, python_packages for the Python
#                                              steps; pack always runs)
#
# Steps: the environment; the bundle's binaries resolve their libraries; datasets; the CUDA tests;
# tiny_rave and s5_maze trained on cuda with every profiling mode, and in bf16 and fp16;
# profile-report on those runs; HTA's breakdowns of the traces; v2's step time and memory at
# 8 x 131072 and 4 x 32768 in fp32 and bf16, ours and the real RAVE's training_step on the same GPU.
# rave_parity runs only when named with --only: the same small v2 trained 2000 steps by the real
# RAVE's `rave train` and by ours, three runs each, all at once (benchmarks/rave_parity.py).
# Each step is timed and bounded; one failing does not stop the others; the exit status is 1 when
# any step failed.
#
# Environment: OUT (results; default gpu-check-out/), OFFLINE_BUNDLE (default offline-bundle/),
# GPU_PYTHON (the Python with the node's torch; default python3), RAVE_STEPS (timed steps per
# configuration, default 20).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --only) ONLY=",${2:?--only needs a comma-separated list of steps},"; shift ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (accepted: --only STEP,...)" >&2; exit 2 ;;
  esac
  shift
done
KIT="$(readlink -f "${OFFLINE_BUNDLE:-$ROOT/offline-bundle}")"
OUT="${OUT:-$ROOT/gpu-check-out}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
: >"$LOG"
STEPS_JSON="$WORK/steps.jsonl"
FAILED=0
STEPS="${RAVE_STEPS:-20}"
T0=$SECONDS

log() { printf '%s\n' "$*" | tee -a "$LOG"; }
# run_step NAME TIMEOUT_S COMMAND...: runs, logs, records {name, status, seconds}.
run_step() {
  local name="$1" limit="$2" start=$SECONDS rc status=ok
  shift 2
  if [ -n "$ONLY" ] && [ "$name" != pack ] && [[ "$ONLY" != *",$name,"* ]]; then return 0; fi
  [ -z "$ONLY" ] && [ "$name" = rave_parity ] && return 0  # a long benchmark: only when named
  log "== $name (t+$((SECONDS - T0)) s, at most $limit s)"
  # A step is a function of this script: `timeout` runs it in a bash that inherits it (export -f).
  timeout --kill-after=10 "$limit" bash -c '"$@"' step "$@" >>"$LOG" 2>&1
  rc=$?
  if [ $rc != 0 ]; then
    status="failed (exit $rc$([ $rc = 124 ] && echo ", over ${limit} s"))"
    FAILED=1
  fi
  log "-- $name: $status in $((SECONDS - start)) s"
  printf '{"step": "%s", "status": "%s", "seconds": %d}\n' "$name" "$status" $((SECONDS - start)) >>"$STEPS_JSON"
}

PY="${GPU_PYTHON:-python3}"
# bin/ and lib/ unpacked into $WORK, and the library path: the bundle's, then the torch and NVIDIA
# wheels' of $PY, then the system's (what the bundle's env.sh sets up on a node).
# shellcheck source=lib/offline_env.sh
. "$ROOT/scripts/lib/offline_env.sh"
rt_offline_env "$KIT" "$WORK" "$PY" || exit 2
BIN="$RT_OFFLINE_BIN"
export OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1
# The bundle's Python packages, over what the node has (RAVE pins pytorch-lightning 1.9).
SITE_KIT="$WORK/site"

env_step() {
  echo "host $(hostname), $(nproc) cores, $(uname -r); $(ldd --version | head -1)"
  "$PY" - <<'EOF'
import torch, sys
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "cudnn", torch.backends.cudnn.version(), "available", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, f"{p.total_memory / 2**30:.1f} GiB", "sm", f"{p.major}.{p.minor}", p.multi_processor_count, "SMs")
EOF
  "$PY" -m pip list 2>/dev/null | grep -i -E "^(numpy|scipy|pandas|torchaudio|setuptools|psutil|narwhals|plotly|pytorch-lightning|torchmetrics) " || true
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  head -3 "$KIT/MANIFEST.txt"
}

libs_step() {  # every bundled binary resolves every library
  local bad=0
  for exe in "$BIN"/*; do
    if ldd "$exe" | grep -q "not found"; then
      echo "$exe: missing libraries:"
      ldd "$exe" | grep "not found"
      bad=1
    fi
  done
  "$BIN/train" --help | head -3
  return $bad
}

data_step() {
  "$BIN/preprocess" --generate_demo "$WORK/audio" --force --demo_seconds 40 --seed 1 &&
    "$BIN/preprocess" --input_path "$WORK/audio" --output_path "$WORK/audio_db" --sampling_rate 44100 \
      --channels 1 --num_signal 131072 --max_db_size 1 &&
    "$BIN/preprocess" --generate_neural_demo "$WORK/h5" --force --groups 1 --units 182 --trials 64 --seed 1 &&
    "$BIN/preprocess" --kind neural --input_path "$WORK/h5" --output_path "$WORK/neural_db" &&
    "$BIN/preprocess" --inspect "$WORK/audio_db"
}

tests_step() {  # the CUDA-bearing tests, by name; none of them may skip
  local rc=0 out
  for t in "test_trainer:GpuDevice.*:GpuMath.*:OutOfMemory.*:MemorySnapshot.*:Precision.*:FusedAdam.CudaParametersFollowTheCpuUpdate" \
    "test_profiling:CudaMemory.*:Cupti*:TraceMemory*:MemoryReporter.*:CudaTrace*" \
    "test_data:Loader.*" "test_models:RaveModel.FftPathsTakeReducedPrecisionSignals"; do
    local exe="${t%%:*}" filter="${t#*:}"
    out="$(cd "$WORK" && "$BIN/$exe" --gtest_filter="$filter" --gtest_brief=0 2>&1)" || rc=1
    echo "$out" | grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Skipped|skip" | head -80
    echo "$out" | grep -A3 "Failure" | head -40
    if echo "$out" | grep -q "^\[  SKIPPED \]"; then
      echo "$exe: a CUDA test skipped on the GPU node"
      rc=1
    fi
  done
  return $rc
}

train_run() {  # train_run NAME CONFIG DB [ARGS...]: one train run into $WORK/runs/NAME_<date>_<id>
  local name="$1" config="$2" db="$3"
  shift 3
  "$BIN/train" --config "$ROOT/configs/$config.toml" --db_path "$db" --out_path "$WORK/runs" --name "$name" \
    --device cuda "$@"
}
last_run() { echo "$WORK/runs/$(cat "$WORK/runs/latest")"; }  # the run train_run made last

profiled_step() {  # every profiling mode at once, then the two reduced precisions
  local config="$1" db="$2"
  train_run "${config}_profiled" "$config" "$db" --max_steps 30 --train.val_every 1000 --train.save_every 1000 \
    --enable_timing_profiling --enable_memory_profiling --enable_profiling --profiling.wait 5 \
    --profiling.warmup 2 --profiling.active 3 --profiling.profile_memory --profiling.record_shapes \
    --profiling.with_stack --profiling.memory_snapshot_step 12 || return 1
  for p in bf16 fp16; do
    train_run "${config}_$p" "$config" "$db" --max_steps 20 --train.val_every 10 --train.save_every 1000 \
      --precision "$p" --enable_timing_profiling --enable_memory_profiling || return 1
  done
}

report_step() {
  local rc=0
  for run in "$WORK"/runs/*/; do
    "$BIN/profile-report" "$run" >"$run/profile_report.txt" 2>&1 || { echo "profile-report $run failed"; rc=1; }
    head -40 "$run/profile_report.txt"
  done
  return $rc
}

packages_step() {
  # --no-deps: acids-rave's declared requirements (scipy 1.10, librosa, GPUtil, ...) are not
  # needed by its training step (scripts/offline_bundle.sh's wheels); rave_gpu_step.py stands in for them.
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE_KIT" \
    "$KIT"/wheels/*.whl || return 1
  # pytorch-lightning 1.9 imports pkg_resources (setuptools < 82) and fsspec: only where missing.
  if ! PYTHONPATH="$SITE_KIT" "$PY" -c 'import pkg_resources, fsspec' 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE_KIT" \
      "$KIT"/wheels/extra/*.whl || return 1
  fi
  PYTHONPATH="$SITE_KIT" "$PY" -c 'import hta, pytorch_lightning, gin, cached_conv, numpy, pandas, lmdb, google.protobuf, absl, tensorboardX, soundfile; print("hta", hta.__file__); print("pytorch_lightning", pytorch_lightning.__version__)'
}

trace_step() {  # each trace's GPU rows (kernels, memcpy, ac2g flows, deviceProperties), and HTA's breakdowns
  local rc=0 run trace
  for run in "$WORK"/runs/*_profiled_*/; do
    trace="$(ls "$run"/profiler_traces/*.pt.trace.json | head -1)"
    "$PY" "$ROOT/benchmarks/gpu_results.py" trace "$trace" >"$run/trace_figures.json" || rc=1
    cat "$run/trace_figures.json"
    echo
    PYTHONPATH="$SITE_KIT" "$PY" "$ROOT/benchmarks/gpu_results.py" hta "$run/profiler_traces" "$run/hta.json" || rc=1
  done
  return $rc
}

# Our side of the speed comparison: full-size v2, as `train --config v2` runs it on the GPU.
ours_step() {
  # Data loading off the GPU's critical path, as RAVE's loader workers keep it.
  local rc=0 batch n_signal name phase_args
  for c in "8 131072" "4 32768"; do
    read -r batch n_signal <<<"$c"
    for p in fp32 bf16; do
      for phase in 1 2; do
        name="v2_b${batch}_n${n_signal}_${p}_phase$phase" phase_args=()
        [ $phase = 2 ] && phase_args=(--train.phase_1_duration 0)
        # At full size v2's receptive-field crop (27116 / 26428 samples) leaves nothing of 32768
        # samples, in RAVE as here: both run those without it (rave_gpu_step.py's :nocrop).
        [ "$n_signal" -le 65536 ] && phase_args+=(--train.valid_signal_crop false)
        train_run "$name" v2 "$WORK/audio_db" --max_steps $((STEPS + 5)) --train.batch "$batch" --data.workers 8 \
          --data.n_signal "$n_signal" --precision "$p" --train.val_every 100000 --train.save_every 100000 \
          --enable_timing_profiling --enable_memory_profiling --profiling.memory_every 1 --train.log_every 1000 \
          "${phase_args[@]}" >"$WORK/$name.log" 2>&1 || { tail -20 "$WORK/$name.log"; rc=1; continue; }
        "$PY" "$ROOT/benchmarks/gpu_results.py" step "$(last_run)" --skip 5 >"$WORK/$name.json" || rc=1
        tee -a "$WORK/ours.jsonl" <"$WORK/$name.json"
      done
    done
  done
  return $rc
}

rave_step() {
  PYTHONPATH="$SITE_KIT" "$PY" "$ROOT/benchmarks/rave_gpu_step.py" --out "$WORK/rave_step.json" --steps "$STEPS" \
    --replace-unused-imports
}

# Training parity with the real RAVE (benchmarks/rave_parity.py): training here, the curves
# and the figure later, where TensorBoard's reader is (rave_parity.sh --collect_only).
parity_step() {
  PYTHONPATH="$SITE_KIT" "$PY" "$ROOT/benchmarks/rave_parity.py" --bin "$BIN" --work "$WORK/parity" \
    --device cuda --steps 2000 --val_every 200 --runs 3 --train_only --replace-unused-imports \
    --trained_by "scripts/gpu_check.sh --only $(echo "$ONLY" | sed 's/^,//; s/,$//')"
}

pack_step() {
  # The log, the step list, our figures, RAVE's, and one archive of the runs (profiles, traces,
  # summaries, TensorBoard events, reports; checkpoints left out): a few files to copy back.
  cp "$STEPS_JSON" "$OUT/steps.jsonl"
  [ -f "$WORK/ours.jsonl" ] && cp "$WORK/ours.jsonl" "$OUT/ours_step.jsonl"
  [ -f "$WORK/rave_step.json" ] && cp "$WORK/rave_step.json" "$OUT/rave_step.json"
  [ -d "$WORK/runs" ] && tar -C "$WORK" --exclude='*.ckpt' --exclude='*.ckpt.*' -czf "$OUT/runs.tar.gz" runs
  # The parity runs without their database and checkpoints: logs, events, summaries, parity_meta.json.
  [ -d "$WORK/parity" ] && tar -C "$WORK" --exclude='parity/db*' --exclude='*.ckpt' --exclude='*.ckpt.*' \
    -czf "$OUT/parity.tar.gz" parity
  ls -l "$OUT"
}

export -f env_step libs_step data_step tests_step train_run last_run profiled_step report_step packages_step trace_step \
  ours_step rave_step parity_step pack_step
export ROOT ONLY KIT WORK PY BIN SITE_KIT STEPS STEPS_JSON OUT LOG
run_step environment 60 env_step
run_step libraries 60 libs_step
run_step datasets 120 data_step
run_step cuda_tests 150 tests_step
run_step tiny_rave 150 profiled_step tiny_rave "$WORK/audio_db"
run_step s5_maze 120 profiled_step s5_maze "$WORK/neural_db"
run_step profile_report 60 report_step
run_step python_packages 60 packages_step
run_step traces_and_hta 120 trace_step
run_step v2_ours 240 ours_step
run_step v2_rave 240 rave_step
run_step rave_parity 480 parity_step
run_step pack 60 pack_step
log "gpu_check: $([ $FAILED = 0 ] && echo passed || echo FAILED) in $((SECONDS - T0)) s"
cat "$STEPS_JSON"
exit $FAILED
