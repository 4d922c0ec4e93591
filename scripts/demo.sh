#!/usr/bin/env bash
# Fresh machine → dependencies, Release build, the built-in demo dataset, and the main job:
# a profiled tiny RAVE training run on it, on the GPU where the machine has one (the LibTorch is
# chosen as scripts/lib/libtorch.sh says: RT_LIBTORCH=debian|pypi|python|/path overrides). The
# dataset lands in datasets/demo and the run in runs/ (train's default; both gitignored), where
# the README's commands look
# (profile-report runs/latest, scripts/tensorboard.sh runs/).
#   scripts/demo.sh [--steps N] [--config NAME]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STEPS=300
CONFIG=tiny_rave
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS="$2"; shift 2 ;;
    --config) CONFIG="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown argument '$1' (accepted: --steps N, --config NAME)" >&2; exit 2 ;;
  esac
done

"$ROOT/scripts/setup.sh"
# Only what the demo runs, and first what the training needs: a fresh machine reaches the first
# training step without compiling a test suite (scripts/test.sh builds those) or the other tools,
# which are built after the run (profile-report reads it; export, evaluate and generate are there
# for the README's next commands).
TARGETS="${TARGETS:-train preprocess}" "$ROOT/scripts/build.sh"
BIN="${BUILD_DIR:-$ROOT/build}/bin"
# OpenMP threads that spin while waiting collapse when anything else wants the cores; passive
# waiting costs little when idle.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
DATASETS="$ROOT/datasets"
RUNS="$ROOT/runs"
mkdir -p "$DATASETS" "$RUNS"

if [ ! -f "$DATASETS/demo/metadata.yaml" ]; then
  echo "== generating demo audio (real WAV/FLAC/OGG/AIFF files) in $DATASETS/demo_audio"
  "$BIN/preprocess" --generate_demo "$DATASETS/demo_audio" --force --demo_seconds 240 --seed 1
  echo "== building the LMDB dataset $DATASETS/demo"
  "$BIN/preprocess" --input_path "$DATASETS/demo_audio" --output_path "$DATASETS/demo" --sampling_rate 44100 \
    --channels 1 --num_signal 16384 --max_db_size 1
fi
echo "== inspecting $DATASETS/demo"
"$BIN/preprocess" --inspect "$DATASETS/demo"

# Where it trains: train.device = auto takes the GPU when the LibTorch has CUDA and a GPU answers.
# shellcheck source=lib/libtorch.sh
. "$ROOT/scripts/lib/libtorch.sh"
rt_libtorch_choose >/dev/null
rt_libtorch_locate >/dev/null
if [ "$RT_LT_CUDA" != None ] && driver="$(rt_nvidia_driver)"; then
  where="on the GPU ($driver; torch $RT_LT_VERSION, CUDA $RT_LT_CUDA)"
elif [ "$RT_LT_CUDA" != None ]; then
  where="on the CPU: torch $RT_LT_VERSION has CUDA $RT_LT_CUDA but this machine has no NVIDIA driver"
else
  where="on the CPU (torch $RT_LT_VERSION, a CPU-only LibTorch)"
fi
echo "== training $CONFIG for $STEPS steps with timing and memory profiling, $where"
"$BIN/train" --config "$CONFIG" --db_path "$DATASETS/demo" --out_path "$RUNS" --name demo \
  --max_steps "$STEPS" --enable_timing_profiling --enable_memory_profiling

# The README's other commands, built while the run above is already on disk: every
# build/bin/... line of the README works after this script (tests/e2e/readme_paths_test.cpp).
TARGETS="${AFTER_TARGETS:-profile-report export evaluate generate}" "$ROOT/scripts/build.sh"
RUN="$(cd "$RUNS" && readlink -f "$(cat latest)")"  # latest: a file naming the newest run
echo "== run directory: $RUN"
ls -l "$RUN"
if [ -x "$BIN/profile-report" ]; then
  "$BIN/profile-report" "$RUN"
fi
echo "TensorBoard (scalars, audio, and the PyTorch Profiler tab): scripts/tensorboard.sh runs/"
echo "  (the first call makes a Python venv with tensorboard and torch-tb-profiler: Debian's pip refuses"
echo "   system-wide installs, and Debian has no tensorboard package)"
