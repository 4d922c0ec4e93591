#!/usr/bin/env bash
# The interactive profiling example (the RAVE guide's examples/profiling_example.py).
# Pick a preset from the menu; the script builds what is missing (scripts/build.sh, the demo
# database), shows the exact `train` command, runs it, walks through every output file (what it
# is, what to look for, how to open it) and runs profile-report on the run.
#
#   scripts/profiling_example.sh                      interactive menu (needs a terminal)
#   scripts/profiling_example.sh --preset basic --yes unattended (tests, CI)
#
# Options:
#   --preset NAME|N  1 basic, 2 detailed, 3 full, 4 ssm, 5 sweep
#   --yes            run without asking for confirmation
#   --out DIR        where databases and runs go: DIR and DIR/runs (default: $PROFILING_EXAMPLE_OUT,
#                    else databases in datasets/profiling and runs in runs/, as the README uses)
#   --steps N        training steps per run (default: the preset's)
#   --threads N      torch threads for train (default: the config's train.threads)
#   --no-plots       skip profile-report --plots
#   -h, --help
# Environment: BUILD_DIR (default build/: reused when it already holds the binaries),
#   PROFILING_EXAMPLE_OUT (same as --out).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
BIN="$BUILD_DIR/bin"
OUT="${PROFILING_EXAMPLE_OUT:-}"
PRESET=""
YES=0
STEPS=""
THREADS=""
PLOTS=1
PRESETS=(basic detailed full ssm sweep)

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "profiling_example.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --preset) [ $# -ge 2 ] || die "--preset needs a value (${PRESETS[*]} or 1-5)"; PRESET="$2"; shift 2 ;;
    --preset=*) PRESET="${1#--preset=}"; shift ;;
    --yes|-y) YES=1; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a directory"; OUT="$2"; shift 2 ;;
    --out=*) OUT="${1#--out=}"; shift ;;
    --steps) [ $# -ge 2 ] || die "--steps needs a number"; STEPS="$2"; shift 2 ;;
    --threads) [ $# -ge 2 ] || die "--threads needs a number"; THREADS="$2"; shift 2 ;;
    --no-plots) PLOTS=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (accepted: --preset NAME, --yes, --out DIR, --steps N, --threads N, --no-plots, --help)" ;;
  esac
done
if [ -n "$STEPS" ] && ! [[ "$STEPS" =~ ^[1-9][0-9]*$ ]]; then die "--steps must be a positive integer, got '$STEPS'"; fi
if [[ -n "$THREADS" ]] && ! [[ "$THREADS" =~ ^[1-9][0-9]*$ ]]; then die "--threads must be a positive integer, got '$THREADS'"; fi

INTERACTIVE=0
if [ -t 0 ] && [ -t 1 ]; then INTERACTIVE=1; fi
if [ "$INTERACTIVE" -eq 0 ] && { [ -z "$PRESET" ] || [ "$YES" -eq 0 ]; }; then
  die "no terminal to ask on: run unattended with --preset NAME --yes (NAME: ${PRESETS[*]})"
fi

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
[ "$INTERACTIVE" -eq 1 ] || say() { printf '\n== %s\n' "$*"; }

# Prints a command as a copy-pasteable line, then runs it.
run_shown() {
  printf '\n$'
  printf ' %q' "$@"
  printf '\n'
  "$@"
}

confirm() {
  [ "$YES" -eq 1 ] && return 0
  local answer
  read -r -p "$1 [Y/n] " answer || return 1
  case "$answer" in ""|y|Y|yes|Yes) return 0 ;; *) return 1 ;; esac
}

resolve_preset() {
  case "$1" in
    1|basic) echo basic ;;
    2|detailed) echo detailed ;;
    3|full) echo full ;;
    4|ssm) echo ssm ;;
    5|sweep|batch_sweep) echo sweep ;;
    *) return 1 ;;
  esac
}

menu() {
  cat <<'EOF'

Profiling example: choose a preset (each run takes well under a minute on 2 cores)
  1) basic     timing + memory profiles (RAVE guide "Basic Profiling"): the quick check
  2) detailed  operator trace of 3 steps after 10 warm-up steps ("Detailed PyTorch Profiling")
  3) full      timing + memory + trace with shapes, memory events, modules and call stacks
  4) ssm       the SSM decoder (tiny_ssm) on a synthetic neural dataset, timing + memory + trace
  5) sweep     the same model at batch 2, 4 and 8, compared with profile-report --compare
  q) quit
EOF
  local choice
  while true; do
    read -r -p "Preset [1-5, q]: " choice || exit 1
    [ "$choice" = q ] && exit 0
    if PRESET="$(resolve_preset "$choice")"; then return 0; fi
    echo "  '$choice' is not a preset: type 1-5 or a name (${PRESETS[*]}), q to quit"
  done
}

if [ -z "$PRESET" ]; then
  menu
else
  PRESET_IN="$PRESET"
  PRESET="$(resolve_preset "$PRESET_IN")" || die "unknown preset '$PRESET_IN' (accepted: ${PRESETS[*]} or 1-5)"
fi
# Databases under OUT, runs under RUNS_DIR: by default the README's places (both gitignored).
if [ -n "$OUT" ]; then RUNS_DIR="$OUT/runs"; else OUT="$ROOT/datasets/profiling"; RUNS_DIR="$ROOT/runs"; fi
echo "preset: $PRESET; databases under $OUT, runs under $RUNS_DIR"

# --- build and data ---------------------------------------------------------------------------
need_build=0
for b in train preprocess profile-report; do [ -x "$BIN/$b" ] || need_build=1; done
if [ "$need_build" -eq 1 ]; then
  # Only what the example runs: the whole tree (tests, benchmarks) takes many times longer.
  say "building train, preprocess and profile-report into $BUILD_DIR (scripts/build.sh)"
  BUILD_DIR="$BUILD_DIR" TARGETS="train preprocess profile-report" "$ROOT/scripts/build.sh"
fi
mkdir -p "$OUT" "$RUNS_DIR"
OUT="$(cd "$OUT" && pwd)"
RUNS_DIR="$(cd "$RUNS_DIR" && pwd)"

audio_db() {
  DB="$OUT/db"
  if [ ! -f "$DB/metadata.yaml" ]; then
    say "building the demo audio database $DB"
    run_shown "$BIN/preprocess" --generate_demo "$OUT/audio" --force --demo_seconds 30 --seed 1
    run_shown "$BIN/preprocess" --input_path "$OUT/audio" --output_path "$DB" --num_signal 16384 --max_db_size 1
  fi
}

neural_db() {
  DB="$OUT/neural_db"
  [ -f "$DB/metadata.yaml" ] || [ -f "$DB/data.mdb" ] && return 0
  say "building the synthetic neural database $DB"
  run_shown "$BIN/preprocess" --generate_neural_demo "$OUT/neural" --force --groups 1 --seed 1
  run_shown "$BIN/preprocess" --kind neural --input_path "$OUT/neural" --output_path "$DB"
}

# --- the walk-through -------------------------------------------------------------------------
explain() {
  local run="$1" f name
  say "what the run wrote: $run"
  for f in "$run"/* "$run"/profiler_traces/*; do
    [ -e "$f" ] || continue
    name="${f#"$run"/}"
    case "$name" in
      config.toml)
        echo "* $name: the fully resolved configuration, overrides applied."
        echo "    Rerun exactly this: $BIN/train --config $f" ;;
      training_summary.json)
        echo "* $name: the whole run in one object: total_training_time_seconds, steps_per_second,"
        echo "    samples_per_second, status, first/last loss and, with timing on, the accumulated timers."
        echo "    Look for: status \"completed\"; steps_per_second against your target. Open: any editor, jq ." ;;
      timing_profile.json)
        echo "* $name: one entry per step: total_batch_time, samples_per_second and the phase times"
        echo "    (data_time, forward_time, loss_time, backward_time, optimizer_time)."
        echo "    Look for: a large data_time share (data-bound), slow first steps (warm-up), spikes."
        echo "    Open: jq, or profile-report (below) for the statistics; step_time_plot.png plots it." ;;
      memory_profile.json)
        echo "* $name: every profiling.memory_every steps: cpu_memory_percent, gpu_memory_allocated_gb /"
        echo "    reserved_gb, memory.<device>.bytes_in_use / peak_bytes_in_use (JAX guide), rss_bytes."
        echo "    Look for: bytes_in_use or rss_bytes that keep rising (a leak); on GPU reserved >> allocated"
        echo "    (fragmentation). memory_plot.png plots it." ;;
      profile_step_*_stacks.txt)
        echo "* $name: collapsed call stacks 'frame;frame;frame <self us>' of the traced operators."
        echo "    Open: https://www.speedscope.app (drop the file), or flamegraph.pl $name > flame.svg."
        echo "    Look for: the widest frames: the native code where operator time goes." ;;
      profile_step_*.json)
        echo "* $name: the Chrome trace under the RAVE guide's name (N = first recorded step)."
        echo "    Open: chrome://tracing (Load) or https://ui.perfetto.dev (Open trace file). WASD to move." ;;
      profiler_traces)
        echo "* $name/: the same trace(s) as <host>_<pid>.<ns>.pt.trace.json, the layout TensorBoard's PyTorch"
        echo "    profiler plugin (torch-tb-profiler) discovers: tensorboard --logdir $f" ;;
      profiler_traces/*.pt.trace.json*)
        echo "* $name: Kineto-format trace: ProfilerStep#N spans, phase annotations (forward, backward, ...),"
        echo "    cpu_op operators (and GPU kernels on CUDA). Open in Perfetto, chrome://tracing, TensorBoard."
        echo "    Look for: gaps between operators (waiting), the longest operators, data loading inside steps." ;;
      events.out.tfevents.*)
        echo "* $name: TensorBoard scalars: losses, train/step_time, train/samples_per_second,"
        echo "    profiling/<timer>_avg_time/_total_time/_count, memory/*. Open: scripts/tensorboard.sh $RUNS_DIR" ;;
      checkpoints)
        echo "* $name/: last.ckpt, best.ckpt and step_<N>.ckpt; resume with --ckpt last." ;;
      memory_plot.png|step_time_plot.png)
        echo "* $name: written by profile-report --plots; open in any image viewer." ;;
      *.gp|*.dat) ;;
      *) echo "* $name" ;;
    esac
  done
}

report() {
  local run="$1"
  local plots=()
  if [ "$PLOTS" -eq 1 ]; then
    if command -v gnuplot >/dev/null 2>&1; then plots=(--plots); else
      echo "(gnuplot not found: no plots; scripts/setup.sh installs gnuplot-nox)"
    fi
  fi
  say "profile-report on the run"
  run_shown "$BIN/profile-report" "$run" "${plots[@]}"
}

# Runs train with the given arguments after showing the command; sets RUN to the run directory.
train_run() {
  say "training: the exact command"
  printf '$'
  printf ' %q' "$BIN/train" "$@"
  printf '\n'
  confirm "Run it?" || { echo "not run"; exit 0; }
  "$BIN/train" "$@"
  RUN="$(cd "$RUNS_DIR" && cd "$(cat latest)" && pwd -P)"  # latest: a file naming the newest run
}

COMMON=(--out_path "$RUNS_DIR")
[[ -n "$THREADS" ]] && COMMON+=(--threads "$THREADS")
case "$PRESET" in
  basic)
    audio_db
    train_run --config tiny_rave --db_path "$DB" "${COMMON[@]}" --name basic --max_steps "${STEPS:-60}" \
      --enable_timing_profiling --enable_memory_profiling --profiling.memory_every 5
    explain "$RUN"; report "$RUN"
    echo; echo "Next: if data loading or memory looks wrong, try preset 2 (detailed) to see operators." ;;
  detailed)
    audio_db
    train_run --config tiny_rave --db_path "$DB" "${COMMON[@]}" --name detailed --max_steps "${STEPS:-20}" \
      --enable_profiling --profile_steps 3 --profiling.skip_first 10 --profiling.record_shapes true
    explain "$RUN"; report "$RUN" ;;
  full)
    audio_db
    train_run --config tiny_rave --db_path "$DB" "${COMMON[@]}" --name full --max_steps "${STEPS:-30}" \
      --enable_timing_profiling --enable_memory_profiling --profiling.memory_every 2 \
      --enable_profiling --profile_steps 3 --profiling.skip_first 10 --profiling.record_shapes true \
      --profiling.profile_memory true --profiling.with_stack true --profiling.with_modules true
    explain "$RUN"; report "$RUN" ;;
  ssm)
    neural_db
    train_run --config tiny_ssm --db_path "$DB" "${COMMON[@]}" --name ssm --max_steps "${STEPS:-60}" \
      --enable_timing_profiling --enable_memory_profiling --profiling.memory_every 5 \
      --enable_profiling --profile_steps 3 --profiling.skip_first 20
    explain "$RUN"; report "$RUN" ;;
  sweep)
    # JAX guide "Profile Representative Workloads" / "Inefficient Batch Size": same model, several
    # batch sizes, compare throughput and memory.
    audio_db
    RUNS=()
    for batch in 2 4 8; do
      train_run --config tiny_rave --db_path "$DB" "${COMMON[@]}" --name "batch_$batch" --batch "$batch" \
        --max_steps "${STEPS:-30}" --enable_timing_profiling --enable_memory_profiling --profiling.memory_every 5
      RUNS+=("$RUN")
    done
    explain "${RUNS[0]}"
    say "batch 2 vs batch 4"
    run_shown "$BIN/profile-report" "${RUNS[0]}" --compare "${RUNS[1]}"
    say "batch 2 vs batch 8"
    plots=()
    if [ "$PLOTS" -eq 1 ] && command -v gnuplot >/dev/null 2>&1; then plots=(--plots "$OUT/sweep_plots" --force); fi
    run_shown "$BIN/profile-report" "${RUNS[0]}" --compare "${RUNS[2]}" "${plots[@]}"
    echo; echo "Read examples/s (B/A above 1 = the larger batch trains more examples per second) against"
    echo "peak memory: pick the largest batch whose memory fits with headroom." ;;
esac

say "done"
echo "TensorBoard: scripts/tensorboard.sh $RUNS_DIR   (scalars and the PyTorch Profiler tab; the first call"
echo "  makes a Python venv with tensorboard and torch-tb-profiler)"
