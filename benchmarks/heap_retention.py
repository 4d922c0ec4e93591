#!/usr/bin/python3
"""The runs of benchmarks/heap_retention.sh: `train` with train.retain_freed_memory false and
true, alternating, REPS each, on the demo databases the script made (WORK/adb, WORK/ndb); writes
benchmarks/results/heap_retention.json with every run's examples/s and page faults per step."""
import os
import resource
import statistics
import subprocess
import tempfile

import benchlib

ROWS = (("tiny_rave", "adb", 1), ("s5_maze", "ndb", 1), ("tiny_rave", "adb", 2))


def run(a, cfg, db, nproc, retain):
    out = tempfile.mkdtemp(dir=a.work)
    argv = [os.path.join(a.bin, "train")] + (["--nproc_per_node", str(nproc)] if nproc > 1 else []) + [
        "--config", cfg, "--db_path", os.path.join(a.work, db), "--out_path", out, "--threads", "1", "--workers", "0",
        "--max_steps", str(a.steps), "--val_every", "1000000", "--save_every", "1000000", "--log_every", str(a.steps),
        "--train.retain_freed_memory", "true" if retain else "false"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before
    s, eps = benchlib.job_examples_per_second(out)
    return {"examples_per_second": eps, "page_faults_per_step": faults / (a.steps * nproc), "heap": s.get("heap", "")}


def main():
    a = benchlib.summary_parser(__doc__, "bin work reps:int steps:int").parse_args()
    res = {}
    for _ in range(a.reps):
        for cfg, db, n in ROWS:
            for retain in (False, True):
                res.setdefault(f"{cfg}/{n}/{'retained' if retain else 'defaults'}", []).append(run(a, cfg, db, n, retain))

    def med(key, field):
        return statistics.median(x[field] for x in res[key])

    b = benchlib.Blocks()
    b.text("`train` with `--train.retain_freed_memory false` (glibc's malloc defaults) and `true` (the default: "
           "M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 1 GiB; util/heap_retention.h), "
           f"{a.steps} steps, 1 intra-op thread per rank, `--workers 0`, alternating, median of {a.reps}. Page "
           "faults: minor faults of the train processes per step and rank, start-up included.")
    rows, derived = [], {}
    for cfg, _, n in ROWS:
        d, k = f"{cfg}/{n}/defaults", f"{cfg}/{n}/retained"
        ratio = med(k, "examples_per_second") / med(d, "examples_per_second")
        derived[f"{cfg}/{n}/retained_over_defaults"] = ratio
        rows.append([f"{cfg}, {n} rank{'s' if n > 1 else ''}", f"{med(d, 'examples_per_second'):.0f}",
                     f"{med(d, 'page_faults_per_step'):,.0f}", f"{med(k, 'examples_per_second'):.0f}",
                     f"{med(k, 'page_faults_per_step'):,.0f}", f"**{ratio:.2f}×**"])
    b.table(["run", "glibc defaults: ex/s", "page faults / step", "retained: ex/s", "page faults / step",
             "retained / defaults"], rows)
    two_d = med("tiny_rave/2/defaults", "examples_per_second") / med("tiny_rave/1/defaults", "examples_per_second")
    two_k = med("tiny_rave/2/retained", "examples_per_second") / med("tiny_rave/1/retained", "examples_per_second")
    b.text(f"tiny_rave 2 ranks / 1 rank: {two_d:.2f}× with glibc's defaults, {two_k:.2f}× with freed memory retained.")
    benchlib.write_summary(a, "heap_retention", "Freed memory kept for reuse (train.retain_freed_memory)", b,
                           raw={"runs": res}, derived=derived,
                           commands=["build/bin/train [--nproc_per_node 2] --config CONFIG --db_path DB --threads 1 "
                                     f"--workers 0 --max_steps {a.steps} --train.retain_freed_memory {{false,true}}"])


if __name__ == "__main__":
    main()
