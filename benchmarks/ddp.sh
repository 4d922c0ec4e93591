#!/usr/bin/env bash
# Data-parallel training on this machine: 2 ranks × 1 thread vs 1 rank × 1 thread, native
# (`train --nproc_per_node 2`, the build against torch 2.11.0's LibTorch: build-cuda/, run on
# the CPU) and Python (benchmarks/ddp_bench.py on that same torch: torch's
# DistributedDataParallel over Gloo; tiny_rave is the real RAVE's own training_step, acids-rave
# 2.3.1, wrapped as PyTorch Lightning 1.9's DDP strategy wraps it; s5_maze the SSM reference
# tests/oracle/s5_maze.py), same models and per-rank batches; Python's 2 ranks without
# DDP, meeting once per step (what lock-stepping alone costs here); plus the communication share
# and the overlap of all-reduce with backward from a traced RAVE v2 run.
#
#   benchmarks/ddp.sh [--quick] [--results_dir DIR]
#
# benchmarks/rave_cpu_env.sh (run first) builds build-cuda/bin/{train,preprocess} and makes
# .venv-rave-cpu/. Environment: BUILD_DIR (default build-cuda; its bin/ has train and
# preprocess), RAVE_PYTHON (default .venv-rave-cpu/bin/python), CUDA_LIB (default
# /usr/local/cuda/lib64, put before LD_LIBRARY_PATH: libtorch_cuda.so links the toolkit's
# libraries; empty leaves LD_LIBRARY_PATH alone), REPS, RAVE_STEPS, SSM_STEPS, PY_STEPS, WORKERS,
# SETUP=0 (rave_cpu_env.sh already ran: bench.py's run of it).
#
# Throughput: examples per second of the whole job over the training loop (no validation, no
# checkpoints), from training_summary.json (total_steps · batch · world_size /
# total_training_time_seconds); and of the training step alone, the loader's wait taken out
# (step_examples_per_second, summed over ranks), which is what the Python side on synthetic
# input measures. 1-rank and 2-rank runs alternate, REPS each; a 2/1 ratio is the median of
# the REPS ratios of runs made one after the other (so that the host's drift over the minutes
# of the benchmark cancels), printed with their range. Three more 2-rank arms alternate with
# them: passive waits, every all-reduce on Gloo's ring (small_all_reduce_kib 0), and Gloo's
# event loop under the default scheduling policy (gloo_loop normal).
# summarize_ddp.py reads every run and writes benchmarks/results/ddp.json (bench.py
# --render_only shows it).
set -euo pipefail
BUILD_DIR="${BUILD_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build-cuda}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
# The tree the figures come from, taken before anything (the results file among it) is written.
COMMIT="$(git -C "$ROOT" describe --always --dirty --abbrev=7)"
SUMMARIZE="$ROOT/benchmarks/summarize_ddp.py"
SETUP="${SETUP:-1}"
RAVE_PYTHON="${RAVE_PYTHON:-$ROOT/.venv-rave-cpu/bin/python}"
CUDA_LIB="${CUDA_LIB-/usr/local/cuda/lib64}"
REPS="${REPS:-5}"
RAVE_STEPS="${RAVE_STEPS:-300}"
SSM_STEPS="${SSM_STEPS:-200}"
PY_STEPS="${PY_STEPS:-20}"
# Loader threads per rank. 0: each rank loads on its training thread, so "1 rank × 1 thread"
# really uses one core (with 1, a single rank's loader already runs on the second core, and the
# one-rank baseline gains from a core the comparison means to leave idle).
WORKERS="${WORKERS:-0}"
bench_args "" "REPS=1 RAVE_STEPS=30 SSM_STEPS=20 PY_STEPS=8" "$@"
# build-cuda/bin/{train,preprocess} and the venv with the real RAVE (idempotent); the setup
# scripts (scripts/setup.sh) through check_cuda_build.sh.
[[ "$SETUP" == 1 ]] && "$ROOT/benchmarks/rave_cpu_env.sh" >&2
[[ -n "$CUDA_LIB" ]] && export LD_LIBRARY_PATH="$CUDA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
WORK="$(mktemp -d /tmp/ddp_bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

bench_audio_db "$WORK/adb" 6 --num_signal 8192
bench_audio_db "$WORK/adb32" 6 --num_signal 32768
bench_neural_db "$WORK/ndb" 182 512

# native CONFIG DB STEPS NPROC [TRAIN ARGS…] → examples/s of the job
native() {
  local cfg="$1" db="$2" steps="$3" nproc="$4" out
  shift 4
  out="$(mktemp -d "$WORK/runs.XXXXXX")"
  local launch=()
  [[ "$nproc" -gt 1 ]] && launch=(--nproc_per_node "$nproc")
  "$BIN/train" "${launch[@]}" --device cpu --config "$cfg" --db_path "$db" --out_path "$out" --threads 1 --max_steps "$steps" \
    --val_every 1000000 --save_every 1000000 --log_every "$steps" --workers "$WORKERS" "$@" >"$out.log" 2>&1 ||
    { echo "ddp.sh: train --config $cfg ($nproc rank(s)) failed; the end of its output:" >&2; tail -20 "$out.log" >&2; exit 1; }
  "$BENCH_PY" "$SUMMARIZE" run_summary "$out"
}

# Two independent one-rank jobs at once (no communication at all): their summed examples/s is
# the most 2 ranks can reach on this host, whatever the collectives cost (cores shared with the
# system, memory bandwidth, caches, turbo).
pair() {
  local a b
  a="$(mktemp "$WORK/pair.XXXXXX")"
  b="$(mktemp "$WORK/pair.XXXXXX")"
  native "$@" >"$a" & native "$@" >"$b"
  wait
  "$BENCH_PY" "$SUMMARIZE" pair "$a" "$b"
}

# Rows: tiny_rave, s5_maze (SyncBatchNorm, the default) and s5_maze_local
# (train.distributed.batch_norm = local; Python: per-rank BatchNorm, DDP's default).
# Every run's summary goes to $RES/ROW.ARM (one JSON line per run) for summarize_ddp.py.
RES="$WORK/results"
mkdir -p "$RES"
for row in tiny_rave s5_maze s5_maze_local; do
  cfg="${row%_local}" db="$WORK/adb" steps="$RAVE_STEPS" extra=() pyextra=()
  [[ "$cfg" == s5_maze ]] && { db="$WORK/ndb"; steps="$SSM_STEPS"; }
  [[ "$row" == *_local ]] && { extra=(--train.distributed.batch_norm local); pyextra=(--sync_bn 0); }
  for ((r = 0; r < REPS; ++r)); do
    native "$cfg" "$db" "$steps" 1 >>"$RES/$row.one"
    native "$cfg" "$db" "$steps" 2 "${extra[@]}" >>"$RES/$row.two"
    native "$cfg" "$db" "$steps" 2 "${extra[@]}" --train.distributed.wait passive >>"$RES/$row.pas"
    native "$cfg" "$db" "$steps" 2 "${extra[@]}" --train.distributed.small_all_reduce_kib 0 >>"$RES/$row.ring"
    native "$cfg" "$db" "$steps" 2 "${extra[@]}" --train.distributed.gloo_loop normal >>"$RES/$row.loop"
    [[ "$row" != *_local ]] && pair "$cfg" "$db" "$steps" 1 >>"$RES/$row.ind"
  done
  py=("$RAVE_PYTHON" "$ROOT/benchmarks/ddp_bench.py" --model "$cfg" --steps "$PY_STEPS" --warmup 3 --threads 1)
  for ((r = 0; r < REPS; ++r)); do
    "${py[@]}" --world 1 >>"$RES/$row.py1"
    "${py[@]}" --world 2 "${pyextra[@]}" >>"$RES/$row.py2"
    # The same 2 ranks without DDP, meeting once per step in a 1-element all-reduce: what
    # lock-stepping alone costs on this host (BatchNorm local has no other lock-step).
    [[ "$row" != *_local ]] && "${py[@]}" --world 2 --lockstep_only 1 >>"$RES/$row.lockstep"
  done
done
cp "$RES/s5_maze.ind" "$RES/s5_maze_local.ind"

# Bucket caps (train.distributed.first_bucket_mb / bucket_mb) on tiny_rave, 2 ranks: DDP's
# defaults (one bucket: its ~0.2 MiB of gradients fit in the first) against smaller caps
# (more all-reduces, started earlier in backward). Alternating, REPS each.
BUCKETS=("1 25" "0.03 0.06" "0.01 0.02")
for ((r = 0; r < REPS; ++r)); do
  for caps in "${BUCKETS[@]}"; do
    read -r first rest <<<"$caps"
    native tiny_rave "$WORK/adb" "$RAVE_STEPS" 2 --train.distributed.first_bucket_mb "$first" \
      --train.distributed.bucket_mb "$rest" >>"$RES/bucket.${first}_${rest}"
  done
done

# Where a 2-rank step's time goes, tiny_rave: rank 0's trace of steps 31-50 (60-step runs) for
# one process, and for 2 ranks with passive and with active waits.
OPS="$WORK/ops"
for arm in one passive active; do
  launch=(--nproc_per_node 2 --train.distributed.wait "$arm")
  [[ "$arm" == one ]] && launch=()
  "$BIN/train" "${launch[@]}" --device cpu --config tiny_rave --db_path "$WORK/adb" --out_path "$OPS/$arm" --threads 1 \
    --max_steps 60 --val_every 1000000 --save_every 1000000 --log_every 60 --workers "$WORKERS" --enable_profiling \
    --profile_steps 20 --profiling.skip_first 30 --profiling.warmup 1 >/dev/null 2>&1
done

# Overlap: RAVE v2 (16 M generator parameters: many 25 MiB buckets) on 2 ranks, steps 3-4 traced.
# Without the receptive-field crop: at full size it cuts ~27000 samples each side, nothing left
# of 32768 (train refuses it, as RAVE fails there); the gradients' buckets are the same.
V2OUT="$WORK/v2"
"$BIN/train" --nproc_per_node 2 --device cpu --config v2 --db_path "$WORK/adb32" --out_path "$V2OUT" --threads 1 --batch 1 \
  --n_signal 32768 --train.valid_signal_crop false --max_steps 5 --val_every 1000000 --save_every 1000000 --log_every 5 --enable_profiling \
  --profile_steps 2 --profiling.skip_first 2 --profiling.warmup 1 >/dev/null 2>&1

"$BENCH_PY" "$SUMMARIZE" report --results "$RES" --v2 "$V2OUT" --ops "$OPS" --reps "$REPS" \
  --rave_steps "$RAVE_STEPS" --ssm_steps "$SSM_STEPS" --py_steps "$PY_STEPS" --commit "$COMMIT" --workers "$WORKERS" \
  --buckets "${BUCKETS[*]// /_}" --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" --results_dir "$RESULTS_DIR"
