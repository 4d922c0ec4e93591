#!/usr/bin/env bash
# Runs every benchmark: each writes benchmarks/results/<name>.json, and BENCHMARKS.md is
# rendered from those files (benchmarks/bench.py --render_only renders it alone).
#   benchmarks/run.sh [--quick]
# Builds Release (JOBS=1 by default: the machine is shared), then hands over to benchmarks/bench.py, which interleaves A/B runs and records the load
# before each. --quick uses fewer repetitions and steps.
# bench.py runs every benchmark its descriptions list (bench_*.py), each writing its own result
# file, and skips, with a note, those whose builds or venvs are missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
QUICK=()
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=(--quick) ;;
    -h|--help) sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$arg' (accepted: --quick)" >&2; exit 2 ;;
  esac
done
PY=/usr/bin/python3  # Debian's python3-torch: the same LibTorch as the native build
"$ROOT/benchmarks/deps.sh"  # the build's dependencies and the benchmarks' (idempotent)
if ! command -v ffmpeg >/dev/null && [[ $(id -u) == 0 ]] && [[ -z "${BENCH_NO_APT:-}" ]]; then
  # Optional: the preprocess-vs-ffmpeg row is skipped (with a note) when this fails.
  echo "run.sh: ffmpeg absent; trying apt-get install ffmpeg (set BENCH_NO_APT=1 to skip)"
  timeout 300 apt-get install -y -q ffmpeg >/dev/null 2>&1 || echo "run.sh: could not install ffmpeg; skipping it"
fi
# Release, configured as scripts/build.sh does; only the benchmark programs are built (a full
# build with every test suite takes far longer). BENCH_FULL_BUILD=1 runs scripts/build.sh itself.
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
if [[ -n "${BENCH_FULL_BUILD:-}" ]]; then
  JOBS="${JOBS:-1}" BUILD_TYPE=Release BUILD_DIR="$BUILD_DIR" "$ROOT/scripts/build.sh"
else
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j "${JOBS:-1}" --target rave_bench loader_bench ssm_step_bench export_bench preprocess train
  # Google Benchmark per-op costs (built when libbenchmark-dev is present, as setup.sh installs).
  cmake --build "$BUILD_DIR" -j "${JOBS:-1}" --target op_cost_bench >/dev/null 2>&1 || true
fi
# The comparisons with the real RAVE: build-cuda/ and .venv-rave-cpu/ (same LibTorch on both sides);
# bench.py notes those sections as not run when this fails.
"$ROOT/benchmarks/rave_cpu_env.sh" || echo "run.sh: benchmarks/rave_cpu_env.sh failed; the sections timing the real RAVE are skipped"
cd "$ROOT"
exec "$PY" "$ROOT/benchmarks/bench.py" --build "$BUILD_DIR" "${QUICK[@]}"
