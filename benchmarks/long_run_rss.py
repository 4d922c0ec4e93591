#!/usr/bin/python3
"""The run of benchmarks/long_run_rss.sh: one long tiny_ssm `train` with --log_every 1 and the
timing (and memory) profile, its VmRSS sampled every 5 s from /proc; writes
benchmarks/results/long_run_rss.json with every sample, the profile files and their sizes."""
import glob
import os
import subprocess
import time

import benchlib


def main():
    a = benchlib.summary_parser(__doc__, "bin work steps:int part_mb:int parts:int memory? rev?").parse_args()
    memory = a.memory == "1"
    steps = a.steps
    argv = [os.path.join(a.bin, "train"), "--config", "tiny_ssm", "--db_path", os.path.join(a.work, "ndb"),
            "--out_path", os.path.join(a.work, "runs"), "--threads", "1", "--workers", "0", "--batch", "8",
            "--max_steps", str(steps), "--log_every", "1", "--enable_timing_profiling",
            "--val_every", str(steps), "--save_every", str(steps),
            "--profiling.profile_part_mb", str(a.part_mb), "--profiling.profile_parts", str(a.parts)]
    if memory:
        argv.append("--enable_memory_profiling")
    log_path = os.path.join(a.work, "train.log")
    t0 = time.time()
    with open(log_path, "w") as log:
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

        def rss_kib():
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            return int(line.split()[1])
            except FileNotFoundError:
                return None
            return None

        def last_step():
            try:
                with open(log_path, "rb") as f:
                    f.seek(max(0, os.path.getsize(log_path) - 4096))
                    tail = f.read().decode(errors="replace").splitlines()
                for line in reversed(tail):
                    if line.startswith("step "):
                        return int(line.split()[1].split("/")[0])
            except (OSError, ValueError, IndexError):
                pass
            return 0

        samples = []  # [step, rss KiB]
        while p.poll() is None:
            time.sleep(5)
            r = rss_kib()
            if r is not None:
                samples.append([last_step(), r])
        rc = p.wait()
    wall = time.time() - t0
    run = os.path.dirname(glob.glob(os.path.join(a.work, "runs", "*", "training_summary.json"))[0])
    profiles = {kind: sorted(glob.glob(os.path.join(run, f"{kind}_profile*.json")))
                for kind in (("timing", "memory") if memory else ("timing",))}
    early = [s for s in samples if s[0] >= steps // 100] or samples
    start, end = early[0], samples[-1]
    peak = max(r for _, r in samples)
    b = benchlib.Blocks()
    b.text(f"{steps:,} tiny_ssm steps with `--log_every 1` and the "
           f"{'timing and memory profiles' if memory else 'timing profile'}, at {a.rev}; exit {rc}; "
           f"{wall / 60:.1f} min wall, {steps / wall:.0f} steps/s; bound profiling.profile_part_mb = {a.part_mb} × "
           f"profiling.profile_parts = {a.parts}.")
    b.table(["", "step", "RSS"], [
        [f"start (first sample past step {steps // 100:,})", f"{start[0]:,}", f"{start[1] / 1024:.1f} MiB"],
        ["end (last sample)", f"{end[0]:,}", f"{end[1] / 1024:.1f} MiB"],
        [f"peak of {len(samples)} samples", "", f"{peak / 1024:.1f} MiB"]])
    b.text(f"RSS change start → end: {(end[1] - start[1]):+,} KiB over {end[0] - start[0]:,} steps "
           f"({(end[1] - start[1]) / max(1, end[0] - start[0]) * 1000:+.1f} KiB per 1,000 steps).")
    files = {}
    for kind, paths in profiles.items():
        total = sum(os.path.getsize(f) for f in paths)
        files[kind] = {os.path.basename(f): os.path.getsize(f) for f in paths}
        b.text(f"{kind.capitalize()} profile files: {len(paths)} ({', '.join(os.path.basename(f) for f in paths)}), "
               f"{total / 2**20:.1f} MiB in all (bound {a.part_mb * a.parts} MiB).")
    benchlib.write_summary(a, "long_run_rss", "Long run: RSS and profile size", b,
                           env=benchlib.environment(a.load_before, git=a.rev),
                           raw={"rss_samples_step_kib": samples, "profile_files_bytes": files, "exit": rc,
                                "wall_seconds": wall},
                           derived={"rss_start_kib": start[1], "rss_end_kib": end[1], "rss_peak_kib": peak},
                           commands=[" ".join(argv).replace(a.work, "$WORK").replace(a.bin, "build/bin")])


if __name__ == "__main__":
    main()
