#!/usr/bin/env bash
# Old build vs new build of the same RAVE training step, interleaved in one run. Guards refactors
# that must not slow the step (that the loop makes no host synchronisation between log steps is
# a test: tests/e2e/host_sync_test.cpp).
#
#   benchmarks/step_ab.sh [--quick] [--results_dir DIR] [OLD_REV]   (OLD_REV default: $STEP_AB_OLD or HEAD~1)
#
# - Builds rave_bench of OLD_REV in a detached git worktree under $WORK_ROOT (default /tmp), and
#   the current tree's rave_bench in $BUILD_DIR (default build/), both Release through ccache.
# - A/B: `rave_bench step --version v2 --batch 4 --n_signal 32768 --threads 1`, one process per
#   repetition, old and new alternating (REPS each, STEPS timed steps after WARMUP untimed); the
#   1-minute load average is recorded before every run. Compared: the median over repetitions of
#   each run's median step time.
# Writes benchmarks/results/step_ab.json (summarize_step_ab.py: every run's step times, the
# loads); bench.py --render_only shows it. --results_dir DIR writes it there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMMAND="$(bench_command "$@")"
REPS="${REPS:-5}"
STEPS="${STEPS:-4}"
# The first steps after construction are slower (allocator and oneDNN primitive caches warming).
WARMUP="${WARMUP:-3}"
OLD_REV="${STEP_AB_OLD:-HEAD~1}"
bench_args "ARG..." "REPS=${REPS_QUICK:-3}" "$@"
[ ${#BENCH_ARGS[@]} -eq 0 ] || OLD_REV="${BENCH_ARGS[-1]}"
OLD_SHA="$(git -C "$ROOT" rev-parse --short "$OLD_REV")"
NEW_SHA="$(git -C "$ROOT" rev-parse --short HEAD)"
[[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]] || NEW_SHA="$NEW_SHA+changes"
WORK_ROOT="${WORK_ROOT:-/tmp}"
OLD_TREE="$WORK_ROOT/step_ab_$OLD_SHA"
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"

build_bench() {  # build_bench SOURCE_DIR BUILD_DIR TARGET...
  local src="$1" dir="$2"
  shift 2
  cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$dir" -j "${JOBS:-2}" --target "$@" >/dev/null
}
if [[ ! -d "$OLD_TREE" ]]; then git -C "$ROOT" worktree add --detach "$OLD_TREE" "$OLD_SHA" >/dev/null; fi
echo "step_ab: building rave_bench at $OLD_SHA ($OLD_TREE/build) and at $NEW_SHA ($BUILD_DIR)" >&2
build_bench "$OLD_TREE" "$OLD_TREE/build" rave_bench
build_bench "$ROOT" "$BUILD_DIR" rave_bench preprocess
OLD_BIN="$OLD_TREE/build/bin/rave_bench"
NEW_BIN="$BUILD_DIR/bin/rave_bench"

WORK="$(mktemp -d "$WORK_ROOT/step_ab.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
for rep in $(seq 1 "$REPS"); do
  for arm in old new; do
    bin="$OLD_BIN"; [[ $arm == new ]] && bin="$NEW_BIN"
    bench_load > "$WORK/$arm.$rep.load"
    "$bin" step --version v2 --batch 4 --n_signal 32768 --threads 1 --warmup "$WARMUP" --steps "$STEPS" >"$WORK/$arm.$rep.json"
    echo "rep $rep $arm done" >&2
  done
done

"$BENCH_PY" "$ROOT/benchmarks/summarize_step_ab.py" --work "$WORK" --reps "$REPS" --steps "$STEPS" \
  --warmup "$WARMUP" --old "$OLD_SHA" --new "$NEW_SHA" --command "$COMMAND" --load_before "$BENCH_LOAD_BEFORE" \
  --results_dir "$RESULTS_DIR"
