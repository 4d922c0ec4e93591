#!/usr/bin/python3
"""step_ab.sh's runs -> benchmarks/results/step_ab.json: each repetition's rave_bench step
times of the old and the new build (WORK/{old,new}.REP.json, the load before each in .load), the
median of each run, and new/old."""
import json
import os
import statistics

import benchlib


def main():
    a = benchlib.summary_parser(__doc__, "work reps:int steps:int warmup:int old new").parse_args()
    raw = {"old": [], "new": []}
    for rep in range(1, a.reps + 1):
        for arm in raw:
            with open(os.path.join(a.work, f"{arm}.{rep}.json")) as f:
                times = json.load(f)["step_seconds"]
            with open(os.path.join(a.work, f"{arm}.{rep}.load")) as f:
                load = benchlib.parse_load(f.read())
            raw[arm].append({"rep": rep, "step_seconds": times, "load_before": load,
                             "run_median": statistics.median(times)})
    med = {arm: [r["run_median"] for r in raw[arm]] for arm in raw}
    ratio = statistics.median(med["new"]) / statistics.median(med["old"])
    step = (f"rave_bench step --version v2 --batch 4 --n_signal 32768 --threads 1 --warmup {a.warmup} "
            f"--steps {a.steps}")
    b = benchlib.Blocks()
    b.text(f"`{step}` (phase-1 forward, losses, backward, Adam), one process per repetition, old and new "
           f"alternating, {a.reps} repetitions each.")
    b.table(["build", "median s/step (min–max over repetitions)", "load before each run"],
            [[f"{arm} `{sha}`", benchlib.spread(med[arm], "{:.3f}", bold=True),
              " ".join(f"{r['load_before'][0]:.2f}" for r in raw[arm] if r["load_before"])]
             for arm, sha in (("old", a.old), ("new", a.new))])
    b.text(f"new/old = **{ratio:.3f}**.")
    benchlib.write_summary(a, "step_ab", "Refactor guard: RAVE v2 step, old build vs new build", b,
                           env=benchlib.environment(a.load_before, old=a.old, new=a.new), raw={"runs": raw},
                           derived={"old": benchlib.summary(med["old"]), "new": benchlib.summary(med["new"]),
                                    "new_over_old": ratio},
                           commands=[f"OLD/bin/{step}", f"build/bin/{step}"])


if __name__ == "__main__":
    main()
