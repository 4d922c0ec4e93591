#!/usr/bin/env bash
# train.retain_freed_memory (util/heap_retention.h) on and off, side by side: examples/s of the
# training loop and minor page faults per step, tiny_rave and s5_maze on 1 thread, and tiny_rave
# on 2 ranks (the data-parallel ratio with and without). Alternating runs, REPS each, medians.
#
#   scripts/bench/heap_retention.sh [--quick]
#
# Page faults: ru_minflt of the train process and its children (getrusage RUSAGE_CHILDREN),
# start-up included, over the steps of every rank. Writes scripts/bench/heap_retention_results.md
# (folded into BENCHMARKS.md).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/bin"
REPS="${REPS:-3}"
STEPS="${STEPS:-150}"
if [[ "${1:-}" == "--quick" ]]; then REPS=1; STEPS=40; fi
export OMP_WAIT_POLICY=PASSIVE
unset GLIBC_TUNABLES MALLOC_MMAP_THRESHOLD_ MALLOC_TRIM_THRESHOLD_
WORK="$(mktemp -d /tmp/heap_bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
"$BIN/preprocess" --generate_demo "$WORK/audio" --demo_seconds 6 --seed 1 >/dev/null
"$BIN/preprocess" --input_path "$WORK/audio" --output_path "$WORK/adb" --num_signal 8192 >/dev/null 2>&1
"$BIN/preprocess" --generate_neural_demo "$WORK/h5" --groups 1 --units 182 --trials 512 --seed 1 >/dev/null
"$BIN/preprocess" --kind neural --input_path "$WORK/h5" --output_path "$WORK/ndb" >/dev/null

/usr/bin/python3 - "$BIN" "$WORK" "$REPS" "$STEPS" "$(git -C "$ROOT" rev-parse --short HEAD)" <<'PY' | tee "$ROOT/scripts/bench/heap_retention_results.md"
import glob, json, os, resource, statistics, subprocess, sys, tempfile
bin_dir, work, reps, steps, sha = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def run(cfg, db, nproc, retain):
    out = tempfile.mkdtemp(dir=work)
    argv = [os.path.join(bin_dir, "train")] + (["--nproc_per_node", str(nproc)] if nproc > 1 else []) + [
        "--config", cfg, "--db_path", os.path.join(work, db), "--out_path", out, "--threads", "1", "--workers", "0",
        "--max_steps", str(steps), "--val_every", "1000000", "--save_every", "1000000", "--log_every", str(steps),
        "--train.retain_freed_memory", "true" if retain else "false"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before
    s = json.load(open(glob.glob(out + "/*/training_summary.json")[0]))
    eps = s["total_steps"] * s["batch"] * s["world_size"] / s["total_training_time_seconds"]
    return eps, faults / (steps * nproc), s.get("heap", "")

rows = [("tiny_rave", "adb", 1), ("s5_maze", "ndb", 1), ("tiny_rave", "adb", 2)]
res = {}
for r in range(reps):
    for cfg, db, n in rows:
        for retain in (False, True):
            res.setdefault((cfg, n, retain), []).append(run(cfg, db, n, retain))
med = lambda k, i: statistics.median(x[i] for x in res[k])
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print("## Freed memory kept for reuse (train.retain_freed_memory)\n")
print(f"`scripts/bench/heap_retention.sh` (commit {sha}; CPU: {cpu}, {os.cpu_count()} cores): `train` with "
      f"`--train.retain_freed_memory false` (glibc's malloc defaults) and `true` (the default: M_MMAP_THRESHOLD 32 MiB, "
      f"M_TRIM_THRESHOLD 1 GiB; util/heap_retention.h), {steps} steps, 1 intra-op thread per rank, `--workers 0`, "
      f"alternating, median of {reps}. Page faults: minor faults of the train processes per step and rank, start-up "
      f"included.\n")
print("| run | glibc defaults: ex/s | page faults / step | retained: ex/s | page faults / step | retained / defaults |")
print("|---|---|---|---|---|---|")
one = {}
for cfg, db, n in rows:
    d, k = (cfg, n, False), (cfg, n, True)
    label = f"{cfg}, {n} rank{'s' if n > 1 else ''}"
    print(f"| {label} | {med(d, 0):.0f} | {med(d, 1):,.0f} | {med(k, 0):.0f} | {med(k, 1):,.0f} | "
          f"**{med(k, 0) / med(d, 0):.2f}×** |")
    if n == 1:
        one[cfg] = (med(d, 0), med(k, 0))
t = one.get("tiny_rave")
if t:
    print(f"\ntiny_rave 2 ranks / 1 rank: {med(('tiny_rave', 2, False), 0) / t[0]:.2f}× with glibc's defaults, "
          f"{med(('tiny_rave', 2, True), 0) / t[1]:.2f}× with freed memory retained.")
PY
