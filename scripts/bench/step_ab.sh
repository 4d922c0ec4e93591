#!/usr/bin/env bash
# Old build vs new build of the same RAVE training step, interleaved in one run, plus the host
# synchronisations of the real training loop. Guards refactors that must not slow the step.
#
#   scripts/bench/step_ab.sh [--quick] [OLD_REV]      (OLD_REV default: $STEP_AB_OLD or HEAD~1)
#
# - Builds rave_bench of OLD_REV in a detached git worktree under $WORK_ROOT (default /tmp), and
#   the current tree's rave_bench in $BUILD_DIR (default build/), both Release through ccache.
# - A/B: `rave_bench step --version v2 --batch 4 --n_signal 32768 --threads 1`, one process per
#   repetition, old and new alternating (REPS each, STEPS timed steps after WARMUP untimed); the
#   1-minute load average is recorded before every run. Compared: the median over repetitions of
#   each run's median step time.
# - Host syncs: `rave_bench syncs` on tiny_rave and tiny_ssm (demo databases made here).
# Prints a Markdown section and writes it to scripts/bench/step_ab_results.md (folded into
# BENCHMARKS.md by scripts/bench/run.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
REPS="${REPS:-5}"
STEPS="${STEPS:-4}"
# The first steps after construction run up to 2× slower (allocator and oneDNN primitive caches
# warming): measured, a single warm-up step left the median dominated by them.
WARMUP="${WARMUP:-3}"
if [[ "${1:-}" == "--quick" ]]; then REPS="${REPS_QUICK:-3}"; shift; fi
OLD_REV="${1:-${STEP_AB_OLD:-HEAD~1}}"
OLD_SHA="$(git -C "$ROOT" rev-parse --short "$OLD_REV")"
NEW_SHA="$(git -C "$ROOT" rev-parse --short HEAD)"
[[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]] || NEW_SHA="$NEW_SHA+changes"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
WORK_ROOT="${WORK_ROOT:-/tmp}"
OLD_TREE="$WORK_ROOT/step_ab_$OLD_SHA"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
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
declare -A TIMES LOADS
for rep in $(seq 1 "$REPS"); do
  for arm in old new; do
    bin="$OLD_BIN"; [[ $arm == new ]] && bin="$NEW_BIN"
    LOADS[$arm]+="$(cut -d' ' -f1 /proc/loadavg) "
    "$bin" step --version v2 --batch 4 --n_signal 32768 --threads 1 --warmup "$WARMUP" --steps "$STEPS" >"$WORK/$arm.$rep.json"
    t="$(python3 -c 'import json,statistics,sys; print(statistics.median(json.load(open(sys.argv[1]))["step_seconds"]))' "$WORK/$arm.$rep.json")"
    TIMES[$arm]+="$t "
    echo "rep $rep $arm: $t s/step" >&2
  done
done

"$BUILD_DIR/bin/preprocess" --generate_demo "$WORK/audio" --demo_seconds 30 --seed 1 >/dev/null 2>&1
"$BUILD_DIR/bin/preprocess" --input_path "$WORK/audio" --output_path "$WORK/audio_db" --num_signal 16384 >/dev/null 2>&1
"$BUILD_DIR/bin/preprocess" --generate_neural_demo "$WORK/h5" >/dev/null 2>&1
"$BUILD_DIR/bin/preprocess" --kind neural --input_path "$WORK/h5" --output_path "$WORK/neural_db" >/dev/null 2>&1
SYNC_RAVE="$("$NEW_BIN" syncs --config tiny_rave --db "$WORK/audio_db" --steps 20 --log_every 10 2>/dev/null | tail -1)"
SYNC_SSM="$("$NEW_BIN" syncs --config tiny_ssm --db "$WORK/neural_db" --steps 20 --log_every 10 2>/dev/null | tail -1)"

python3 - "$OLD_SHA" "$NEW_SHA" "$REPS" "$STEPS" "${TIMES[old]}" "${TIMES[new]}" "${LOADS[old]}" "${LOADS[new]}" \
  "$SYNC_RAVE" "$SYNC_SSM" "$(uname -m), $(nproc) cores" "$WARMUP" <<'PY' | tee "$ROOT/scripts/bench/step_ab_results.md"
import json, statistics, sys
old_sha, new_sha, reps, steps = sys.argv[1:5]
warmup = sys.argv[12]
old = [float(x) for x in sys.argv[5].split()]
new = [float(x) for x in sys.argv[6].split()]
load_old, load_new = sys.argv[7].split(), sys.argv[8].split()
sync_rave, sync_ssm = json.loads(sys.argv[9]), json.loads(sys.argv[10])
mo, mn = statistics.median(old), statistics.median(new)
spread = lambda v: f"{min(v):.3f}–{max(v):.3f}"
print("## Refactor guard: RAVE v2 step, old build vs new build\n")
print(f"`scripts/bench/step_ab.sh {old_sha}` ({sys.argv[11]}): `rave_bench step --version v2 --batch 4 "
      f"--n_signal 32768 --threads 1 --warmup {warmup} --steps {steps}` (phase-1 forward, losses, backward, Adam), one process "
      f"per repetition, old and new alternating, {reps} repetitions each; `OMP_WAIT_POLICY=PASSIVE`.\n")
print("| build | median s/step (min–max over repetitions) | load before each run |")
print("|---|---|---|")
print(f"| old `{old_sha}` | **{mo:.3f}** ({spread(old)}) | {' '.join(load_old)} |")
print(f"| new `{new_sha}` | **{mn:.3f}** ({spread(new)}) | {' '.join(load_new)} |")
print(f"\nnew/old = **{mn / mo:.3f}**.\n")
print("### Host synchronisations of the training loop\n")
print("`rave_bench syncs` counts `aten::item` and `aten::_local_scalar_dense` on every thread while "
      "`rt::run_training` runs in process. Runs of N and 2N steps with logging only at the end differ "
      "by the syncs of N plain steps; the same pair with `train.log_every = 10` adds N/10 log flushes "
      "(the loop reads the logged 0-d tensors with one host copy per flush, not with `item`).\n")
print("| config | N | syncs in N steps between log steps | syncs in N steps with N/10 log flushes |")
print("|---|---|---|---|")
for name, s in (("tiny_rave", sync_rave), ("tiny_ssm", sync_ssm)):
    print(f"| {name} | {s['n']} | **{s['syncs_in_n_steps_between_log_steps']}** | {s['syncs_in_n_steps_with_logging']} |")
PY
