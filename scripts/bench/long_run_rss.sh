#!/usr/bin/env bash
# A long tiny_ssm run with a timing entry and a log line every step: does the process's memory
# stay flat, and do the profile files stay within their bound (profiling.profile_part_mb ×
# profiling.profile_parts)? Samples VmRSS from /proc while it trains; reports RSS after the first
# STEPS/100 steps against RSS at the end, and the profile's files and bytes.
#
#   scripts/bench/long_run_rss.sh [STEPS]        (default 1000000; PART_MB, PARTS to override the bound;
#                                                 MEMORY=1 adds --enable_memory_profiling)
#
# Writes scripts/bench/long_run_rss_results.md (folded into BENCHMARKS.md by hand).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/bin"
STEPS="${1:-1000000}"
PART_MB="${PART_MB:-64}"
PARTS="${PARTS:-8}"
MEMORY="${MEMORY:-0}"
# The tree the figures come from, taken before tee truncates the results file (which would
# make every run read as -dirty).
REV="$(git -C "$ROOT" describe --always --dirty)"
WORK="$(mktemp -d /tmp/long_run.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
"$BIN/preprocess" --generate_neural_demo "$WORK/h5" --groups 1 --units 32 --trials 64 --seed 1 >/dev/null
"$BIN/preprocess" --kind neural --input_path "$WORK/h5" --output_path "$WORK/ndb" >/dev/null

/usr/bin/python3 - "$BIN" "$WORK" "$STEPS" "$PART_MB" "$PARTS" "$MEMORY" "$REV" <<'PY' | tee "$ROOT/scripts/bench/long_run_rss_results.md"
import glob, os, subprocess, sys, time
bin_dir, work, steps, part_mb, parts, memory, rev = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1", sys.argv[7]
argv = [os.path.join(bin_dir, "train"), "--config", "tiny_ssm", "--db_path", os.path.join(work, "ndb"),
        "--out_path", os.path.join(work, "runs"), "--threads", "1", "--workers", "0", "--batch", "8",
        "--max_steps", str(steps), "--log_every", "1", "--enable_timing_profiling",
        "--val_every", str(steps), "--save_every", str(steps),
        "--profiling.profile_part_mb", str(part_mb), "--profiling.profile_parts", str(parts)]
if memory:
    argv.append("--enable_memory_profiling")
log = open(os.path.join(work, "train.log"), "w")
t0 = time.time()
p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

def rss_kib():
    try:
        for line in open(f"/proc/{p.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except FileNotFoundError:
        return None

def last_step():
    try:
        with open(os.path.join(work, "train.log"), "rb") as f:
            f.seek(max(0, os.path.getsize(f.name) - 4096))
            tail = f.read().decode(errors="replace").splitlines()
        for line in reversed(tail):
            if line.startswith("step "):
                return int(line.split()[1].split("/")[0])
    except (OSError, ValueError, IndexError):
        pass
    return 0

samples = []  # (step, rss KiB)
while p.poll() is None:
    time.sleep(5)
    r = rss_kib()
    if r is not None:
        samples.append((last_step(), r))
rc = p.wait()
wall = time.time() - t0
run = glob.glob(os.path.join(work, "runs", "*", "training_summary.json"))[0].rsplit("/", 1)[0]
profiles = {kind: sorted(glob.glob(os.path.join(run, f"{kind}_profile*.json")))
            for kind in (("timing", "memory") if memory else ("timing",))}
early = [s for s in samples if s[0] >= steps // 100] or samples
start, end = early[0], samples[-1]
peak = max(r for _, r in samples)
what = "timing and memory profiles" if memory else "timing profile"
print(f"## Long run: RSS and profile size ({steps:,} tiny_ssm steps, --log_every 1, {what})\n")
env = f"PART_MB={part_mb} PARTS={parts} " + ("MEMORY=1 " if memory else "")
print(f"`{env}scripts/bench/long_run_rss.sh {steps}` at {rev}; exit {rc}; {wall/60:.1f} min wall, "
      f"{steps / wall:.0f} steps/s; bound profiling.profile_part_mb = {part_mb} × profiling.profile_parts = {parts}.\n")
print("| | step | RSS |")
print("|---|---:|---:|")
print(f"| start (first sample past step {steps // 100:,}) | {start[0]:,} | {start[1]/1024:.1f} MiB |")
print(f"| end (last sample) | {end[0]:,} | {end[1]/1024:.1f} MiB |")
print(f"| peak of {len(samples)} samples | | {peak/1024:.1f} MiB |")
print(f"\nRSS change start → end: {(end[1]-start[1]):+,} KiB over {end[0]-start[0]:,} steps "
      f"({(end[1]-start[1]) / max(1, end[0]-start[0]) * 1000:+.1f} KiB per 1,000 steps).\n")
for kind, files in profiles.items():
    total = sum(os.path.getsize(f) for f in files)
    print(f"{kind.capitalize()} profile files: {len(files)} ({', '.join(os.path.basename(f) for f in files)}), "
          f"{total/2**20:.1f} MiB in all (bound {part_mb * parts} MiB).\n")
PY
