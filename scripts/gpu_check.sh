#!/usr/bin/env bash
# Checks a GPU node with the offline bundle (scripts/offline_bundle.sh; docs/offline_gpu.md): the
# CUDA tests, every profiling mode on the GPU, the traces in HTA, and full-size v2 against the
# real RAVE's training step, speed and memory. For a node without network: it needs only the
# bundle, this repository's scripts and configs, and the node's Python with torch. Run from the
# repository root:
#
#   scripts/gpu_check.sh               on the GPU node; results in gpu-check-out/ (OUT)
#   scripts/gpu_check.sh --rehearse    the same steps on a connected CPU machine, against PyPI's
#                                      CUDA torch and the bundle alone, before carrying it; steps
#                                      that need a device skip, anything else that fails fails
#   scripts/gpu_check.sh [--rehearse] --only STEP,STEP,...
#                                      those steps only, in this script's order (a step needs
#                                      the ones it builds on: datasets for the trainings, the
#                                      trainings for profile_report and traces_and_hta,
#                                      python_packages for the Python steps; pack always runs)
#
# Steps: the environment; the bundle's binaries resolve their libraries; datasets; the CUDA tests;
# tiny_rave and s5_maze trained on cuda with every profiling mode, and in bf16 and fp16;
# profile-report on those runs; HTA's breakdowns of the traces; v2's step time and memory at
# 8 x 131072 and 4 x 32768 in fp32 and bf16, ours and the real RAVE's training_step on the same GPU.
# Three long benchmarks run only when named with --only: rave_parity (the same small v2 trained
# 2000 steps by the real RAVE's `rave train` and by ours, three runs each, all at once:
# scripts/bench/rave_parity.py), cpu_vs_rave (bench.py's CPU comparison with the real RAVE on the
# node's idle cores) and ddp (scripts/bench/ddp.sh). Each step is timed and bounded; one failing
# does not stop the others; the exit status is 1 when any step failed.
#
# Environment: OUT (results; default gpu-check-out/), OFFLINE_BUNDLE (default offline-bundle/),
# GPU_PYTHON (the Python with the node's torch; default python3 on the node,
# .venv-gpu-image/bin/python rehearsing), RAVE_STEPS (timed steps per configuration, default 20),
# GPU_CHECK_BUDGET_S (unset: no limit; else every step's limit is cut so that the whole run,
# packing included, ends within that many seconds: a batch job's wall time).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REHEARSE=0
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rehearse) REHEARSE=1 ;;
    --only) ONLY=",${2:?--only needs a comma-separated list of steps},"; shift ;;
    *) echo "gpu_check.sh: unknown argument '$1' (accepted: --rehearse, --only STEP,...)" >&2; exit 2 ;;
  esac
  shift
done
KIT="$(readlink -f "${OFFLINE_BUNDLE:-$ROOT/offline-bundle}")"
OUT="${OUT:-$ROOT/gpu-check-out}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")"
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
: >"$LOG"
STEPS_JSON="$WORK/steps.jsonl"
FAILED=0
STEPS="${RAVE_STEPS:-20}"
BUDGET="${GPU_CHECK_BUDGET_S:-0}"  # the whole run, in seconds (0: no limit); each step gets its share
T0=$SECONDS

log() { printf '%s\n' "$*" | tee -a "$LOG"; }
# run_step NAME TIMEOUT_S COMMAND...: runs, logs, records {name, status, seconds}.
run_step() {
  local name="$1" limit="$2" start=$SECONDS rc
  shift 2
  if [ -n "$ONLY" ] && [ "$name" != pack ] && [[ "$ONLY" != *",$name,"* ]]; then
    return 0
  fi
  # the long benchmarks: only when named
  [ -z "$ONLY" ] && { [ "$name" = rave_parity ] || [ "$name" = cpu_vs_rave ] || [ "$name" = ddp ]; } && return 0
  # Never past the budget: the last 30 s are kept for packing the results.
  if [ "$BUDGET" -gt 0 ]; then
    local left=$((BUDGET - (SECONDS - T0) - 30))
    [ "$name" = pack ] && left=$((left + 30))
    [ $left -lt $limit ] && limit=$left
  fi
  if [ $limit -lt 5 ]; then
    log "-- $name: not run, the ${BUDGET} s budget is spent"
    printf '{"step": "%s", "status": "not run (budget)", "seconds": 0}\n' "$name" >>"$STEPS_JSON"
    FAILED=1
    return 0
  fi
  log "== $name (t+$((SECONDS - T0)) s, at most $limit s)"
  # A step is a function of this script: `timeout` runs it in a bash that inherits it (export -f).
  timeout --kill-after=10 "$limit" bash -c '"$@"' step "$@" >>"$LOG" 2>&1
  rc=$?
  local status=ok
  if [ $rc = 77 ]; then
    status=skipped
  elif [ $rc != 0 ]; then
    status="failed (exit $rc$([ $rc = 124 ] && echo ", over ${limit} s"))"
    FAILED=1
  fi
  log "-- $name: $status in $((SECONDS - start)) s"
  printf '{"step": "%s", "status": "%s", "seconds": %d}\n' "$name" "$status" $((SECONDS - start)) >>"$STEPS_JSON"
  return 0
}
needs_device() {
  if [ $REHEARSE = 1 ]; then
    echo "skipped: needs a CUDA device (rehearsal)"
    return 0
  fi
  return 1
}

if [ $REHEARSE = 1 ]; then
  PY="${GPU_PYTHON:-$ROOT/.venv-gpu-image/bin/python}"
  [ -x "$PY" ] || "$ROOT/scripts/gpu_image_venv.sh" || exit 2
  # The CUDA runtime libraries torch's wheel loads: the local toolkit's, as check_cuda_build.sh.
  export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
  export LD_LIBRARY_PATH="$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # before torch is imported
  DEVICE=cpu
else
  PY="${GPU_PYTHON:-python3}"
  DEVICE=cuda
fi
# bin/ and lib/ unpacked into $WORK, and the library path: the bundle's, then the torch and NVIDIA
# wheels' of $PY, then the system's (what the bundle's env.sh sets up on a node).
# shellcheck source=lib/offline_env.sh
. "$ROOT/scripts/lib/offline_env.sh"
rt_offline_env "$KIT" "$WORK" "$PY" || exit 2
BIN="$RT_OFFLINE_BIN"
KIT_LIB="$RT_OFFLINE_LIB"
TORCH_LIB="$RT_OFFLINE_TORCH_LIB"
SITE="$RT_OFFLINE_SITE"
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

libs_step() {
  # Every library resolves, and (rehearsing) only to the bundle, the torch / NVIDIA wheels or glibc.
  local bad=0
  for exe in "$BIN"/*; do
    if ldd "$exe" | grep -q "not found"; then
      echo "$exe: missing libraries:"
      ldd "$exe" | grep "not found"
      bad=1
    fi
    if [ $REHEARSE = 1 ]; then
      local outside
      outside="$(ldd "$exe" | awk '$3 ~ /^\// {print $1, $3}' | grep -v -E "^(libc|libm|libdl|librt|libpthread|libresolv|libutil|libstdc\+\+|libgcc_s|ld-linux[^ ]*)\.so" |
        grep -v -F -e "$KIT_LIB/" -e "$TORCH_LIB/" -e "$SITE/nvidia/" -e "$CUDA_HOME/" || true)"
      if [ -n "$outside" ]; then
        echo "$exe: loads libraries from outside the bundle, torch and CUDA:"
        echo "$outside"
        bad=1
      fi
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

tests_step() {
  # The CUDA-bearing tests, by name; on the device none of them may skip.
  local rc=0 out
  for t in "test_trainer:GpuDevice.*:GpuMath.*:OutOfMemory.*:MemorySnapshot.*:Precision.*:FusedAdam.CudaParametersFollowTheCpuUpdate" \
    "test_profiling:CudaMemory.*:Cupti*:TraceMemory*:MemoryReporter.*:CudaTrace*" \
    "test_data:Loader.*" "test_models:RaveModel.FftPathsTakeReducedPrecisionSignals"; do
    local exe="${t%%:*}" filter="${t#*:}"
    out="$(cd "$WORK" && "$BIN/$exe" --gtest_filter="$filter" --gtest_brief=0 2>&1)" || rc=1
    echo "$out" | grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Skipped|skip" | head -80
    echo "$out" | grep -A3 "Failure" | head -40
    if [ $REHEARSE = 0 ] && echo "$out" | grep -q "^\[  SKIPPED \]"; then
      echo "$exe: a CUDA test skipped on the GPU machine"
      rc=1
    fi
  done
  return $rc
}

train_run() {  # train_run NAME CONFIG DB [ARGS...]: one train run into $WORK/runs/NAME_<date>_<id>
  local name="$1" config="$2" db="$3"
  shift 3
  "$BIN/train" --config "$ROOT/configs/$config.toml" --db_path "$db" --out_path "$WORK/runs" --name "$name" \
    --device "$DEVICE" "$@"
}
last_run() { echo "$WORK/runs/$(cat "$WORK/runs/latest")"; }  # the run train_run made last

profiled_step() {  # every profiling mode at once, then the two reduced precisions
  local config="$1" db="$2" memory_snapshot=()
  [ $REHEARSE = 0 ] && memory_snapshot=(--profiling.memory_snapshot_step 12)
  train_run "${config}_profiled" "$config" "$db" --max_steps 30 --train.val_every 1000 --train.save_every 1000 \
    --enable_timing_profiling --enable_memory_profiling --enable_profiling --profiling.wait 5 \
    --profiling.warmup 2 --profiling.active 3 --profiling.profile_memory --profiling.record_shapes \
    --profiling.with_stack "${memory_snapshot[@]}" || return 1
  local precisions=(bf16)
  [ $REHEARSE = 0 ] && precisions=(bf16 fp16)
  for p in "${precisions[@]}"; do
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
  # needed by its training step (scripts/bench/rave_gpu_wheels.sh); rave_gpu_step.py stands in for them.
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE_KIT" \
    "$KIT"/wheels/*.whl || return 1
  # pytorch-lightning 1.9 imports pkg_resources (setuptools < 82) and fsspec: only where missing.
  if ! PYTHONPATH="$SITE_KIT" "$PY" -c 'import pkg_resources, fsspec' 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE_KIT" \
      "$KIT"/wheels/extra/*.whl || return 1
  fi
  PYTHONPATH="$SITE_KIT" "$PY" -c 'import hta, pytorch_lightning, gin, cached_conv, numpy, pandas, lmdb, google.protobuf, absl, tensorboardX, soundfile; print("hta", hta.__file__); print("pytorch_lightning", pytorch_lightning.__version__)'
}

trace_step() {
  local rc=0
  for run in "$WORK"/runs/*_profiled_*/; do
    local trace
    trace="$(ls "$run"/profiler_traces/*.pt.trace.json | head -1)"
    local require=()
    [ $REHEARSE = 0 ] && require=(--require-gpu)  # kernels, memcpy, ac2g flows, deviceProperties
    "$PY" "$ROOT/scripts/bench/gpu_figures.py" trace "$trace" "${require[@]}" >"$run/trace_figures.json" || rc=1
    cat "$run/trace_figures.json"
    echo
    # HTA's temporal and idle-time breakdowns are over GPU time: a CPU trace has none.
    local cpu=()
    [ $REHEARSE = 1 ] && cpu=(--cpu-trace)
    PYTHONPATH="$SITE_KIT" "$PY" "$ROOT/scripts/bench/gpu_figures.py" hta "$run/profiler_traces" "$run/hta.json" "${cpu[@]}" || rc=1
  done
  return $rc
}

# Our side of the speed comparison: full-size v2, as `train --config v2` runs it on the GPU.
ours_step() {
  # Data loading off the GPU's critical path, as RAVE's loader workers keep it (16 cores there).
  local configs=("8 131072" "4 32768") n=$((STEPS + 5)) skip=5 workers=(--data.workers 8)
  if [ $REHEARSE = 1 ]; then configs=("2 8192"); n=4; skip=1; workers=(); fi
  local rc=0
  for c in "${configs[@]}"; do
    read -r batch n_signal <<<"$c"
    for p in fp32 bf16; do
      for phase in 1 2; do
        local name="v2_b${batch}_n${n_signal}_${p}_phase$phase" config=v2
        [ $REHEARSE = 1 ] && config=tiny_rave
        local phase_args=()
        [ $phase = 2 ] && phase_args=(--train.phase_1_duration 0)
        # At full size v2's receptive-field crop (27116 / 26428 samples) leaves nothing of 32768
        # samples, in RAVE as here: both run those without it (rave_gpu_step.py's :nocrop).
        [ "$n_signal" -le 65536 ] && [ $REHEARSE = 0 ] && phase_args+=(--train.valid_signal_crop false)
        train_run "$name" "$config" "$WORK/audio_db" --max_steps "$n" --train.batch "$batch" "${workers[@]}" \
          --data.n_signal "$n_signal" --precision "$p" --train.val_every 100000 --train.save_every 100000 \
          --enable_timing_profiling --enable_memory_profiling --profiling.memory_every 1 --train.log_every 1000 \
          "${phase_args[@]}" >"$WORK/$name.log" 2>&1 || { tail -20 "$WORK/$name.log"; rc=1; continue; }
        "$PY" "$ROOT/scripts/bench/gpu_figures.py" step "$(last_run)" --skip "$skip" >"$WORK/$name.json" || rc=1
        cat "$WORK/$name.json" | tee -a "$WORK/ours.jsonl"
      done
    done
  done
  return $rc
}

rave_step() {
  local args=(--out "$WORK/rave_step.json" --steps "$STEPS" --replace-unused-imports)
  [ $REHEARSE = 1 ] && args=(--out "$WORK/rave_step.json" --device cpu --tiny --steps 2 --replace-unused-imports)
  PYTHONPATH="$SITE_KIT" "$PY" "$ROOT/scripts/bench/rave_gpu_step.py" "${args[@]}"
}

# Training parity with the real RAVE (scripts/bench/rave_parity.py): training here, the curves
# and the figure later, where TensorBoard's reader is (rave_parity.sh --collect_only).
parity_step() {
  local steps=2000 val=200 runs=3
  [ $REHEARSE = 1 ] && { steps=20; val=10; runs=1; }
  PYTHONPATH="$SITE_KIT" "$PY" "$ROOT/scripts/bench/rave_parity.py" --bin "$BIN" --work "$WORK/parity" \
    --device "$DEVICE" --steps $steps --val_every $val --runs $runs --train_only --replace-unused-imports \
    --trained_by "scripts/gpu_check.sh --only $(echo "$ONLY" | sed 's/^,//; s/,$//')"
}

# The CPU comparison with the real RAVE (bench.py's "Native vs the real RAVE" and whole-run
# sections) on this machine's idle cores: the bundle's rave_bench and train against RAVE's own
# training_step and `rave train`, on the node's torch. Only with --only: it takes several minutes.
cpu_step() {
  # CPU_BENCH_SIZING: bench.py's sizing flags instead of these (more repetitions, or fewer).
  local sizing=(${CPU_BENCH_SIZING:---reps 2 --steps 2 --whole_steps 10})
  [ $REHEARSE = 1 ] && sizing=(--quick --reps 1 --steps 1 --whole_steps 2)
  # exec: run_step's timeout signals this shell, which must be bench.py itself for its SIGTERM
  # handler to write the sections it finished.
  BENCH_HOST_LABEL="the GPU machine's idle cores, scripts/gpu_check.sh --only ...,cpu_vs_rave" \
    PYTHONPATH="$SITE_KIT" exec "$PY" "$ROOT/scripts/bench/bench.py" --only rave,whole "${sizing[@]}" --build "$WORK" \
    --cuda_build "$WORK" --cuda_lib "" --rave_python "$PY" --results_dir "$WORK/cpu_bench" --md "$WORK/cpu_bench.md"
}

# The data-parallel benchmark (scripts/bench/ddp.sh: 2 ranks × 1 thread against 1, native and
# the real RAVE under torch's DDP) on this machine's idle cores, with fewer repetitions.
ddp_step() {
  local sizing=(REPS=2 RAVE_STEPS=100 SSM_STEPS=100 PY_STEPS=10) quick=()
  [ $REHEARSE = 1 ] && { sizing=(); quick=(--quick); }
  env "${sizing[@]}" BUILD_DIR="$WORK" RAVE_PYTHON="$PY" HOST_PY="$PY" PYTHONPATH="$SITE_KIT" CUDA_LIB="" SETUP=0 \
    COMMIT="${TREE_COMMIT:-bundle of $(sed -n '1s/.* from //p' "$KIT/MANIFEST.txt")}" HOST="the GPU machine's CPU ($(nproc) cores)" \
    bash "$ROOT/scripts/bench/ddp.sh" "${quick[@]}" --results_dir "$WORK/ddp" || return 1
}

pack_step() {
  # The log, the step list, our figures, RAVE's, and one archive of the runs (profiles, traces,
  # summaries, TensorBoard events, reports; checkpoints left out): a few files to copy back.
  cp "$STEPS_JSON" "$OUT/steps.jsonl"
  [ -f "$WORK/ours.jsonl" ] && cp "$WORK/ours.jsonl" "$OUT/ours_step.jsonl"
  [ -f "$WORK/rave_step.json" ] && cp "$WORK/rave_step.json" "$OUT/rave_step.json"
  [ -d "$WORK/cpu_bench" ] && cp -r "$WORK/cpu_bench" "$OUT/"
  [ -f "$WORK/cpu_bench.md" ] && cp "$WORK/cpu_bench.md" "$OUT/"
  [ -d "$WORK/ddp" ] && cp -r "$WORK/ddp" "$OUT/"
  [ -d "$WORK/runs" ] && tar -C "$WORK" --exclude='*.ckpt' --exclude='*.ckpt.*' -czf "$OUT/runs.tar.gz" runs
  # The parity runs without their database and checkpoints: logs, events, summaries, parity_meta.json.
  [ -d "$WORK/parity" ] && tar -C "$WORK" --exclude=parity/db --exclude=parity/audio --exclude='*.ckpt' \
    --exclude='*.ckpt.*' -czf "$OUT/parity.tar.gz" parity
  ls -l "$OUT"
}

export -f env_step libs_step data_step tests_step train_run last_run profiled_step report_step packages_step trace_step \
  ours_step rave_step parity_step cpu_step ddp_step pack_step
export ROOT REHEARSE ONLY KIT WORK PY DEVICE BIN KIT_LIB TORCH_LIB SITE SITE_KIT STEPS STEPS_JSON OUT LOG
run_step environment 60 env_step
run_step libraries 60 libs_step
run_step datasets 120 data_step
if [ $REHEARSE = 1 ]; then
  run_step cuda_tests 300 tests_step
else
  run_step cuda_tests 150 tests_step
fi
run_step tiny_rave 150 profiled_step tiny_rave "$WORK/audio_db"
run_step s5_maze 120 profiled_step s5_maze "$WORK/neural_db"
run_step profile_report 60 report_step
run_step python_packages 60 packages_step
run_step traces_and_hta 120 trace_step
run_step v2_ours 240 ours_step
run_step v2_rave 240 rave_step
run_step rave_parity 480 parity_step
run_step cpu_vs_rave 480 cpu_step
run_step ddp 480 ddp_step
run_step pack 60 pack_step
log "gpu_check: $([ $FAILED = 0 ] && echo passed || echo FAILED) in $((SECONDS - T0)) s$([ $REHEARSE = 1 ] && echo ' (rehearsal)')"
cat "$STEPS_JSON"
rm -rf "$WORK"
exit $FAILED
