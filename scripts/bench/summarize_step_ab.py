#!/usr/bin/python3
"""step_ab.sh's runs -> scripts/bench/results/step_ab.json: each repetition's rave_bench step
times of the old and the new build (WORK/{old,new}.REP.json, the load before each in .load), the
median of each run, and new/old."""
import json
import os
import statistics

import benchlib


def main():
    ap = benchlib.summary_parser(__doc__)
    ap.add_argument("--work", required=True)
    ap.add_argument("--reps", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--old", required=True, help="the old build's commit")
    ap.add_argument("--new", required=True, help="the new build's commit")
    a = ap.parse_args()
    raw = {"old": [], "new": []}
    for rep in range(1, a.reps + 1):
        for arm in ("old", "new"):
            with open(os.path.join(a.work, f"{arm}.{rep}.json")) as f:
                data = json.load(f)
            with open(os.path.join(a.work, f"{arm}.{rep}.load")) as f:
                load = benchlib.parse_load(f.read())
            raw[arm].append({"rep": rep, "step_seconds": data["step_seconds"], "load_before": load,
                             "run_median": statistics.median(data["step_seconds"])})
    med = {arm: [r["run_median"] for r in raw[arm]] for arm in raw}
    mo, mn = statistics.median(med["old"]), statistics.median(med["new"])
    b = benchlib.Blocks()
    step = (f"rave_bench step --version v2 --batch 4 --n_signal 32768 --threads 1 --warmup {a.warmup} "
            f"--steps {a.steps}")
    b.text(f"`{step}` (phase-1 forward, losses, backward, Adam), one process per repetition, old and new "
           f"alternating, {a.reps} repetitions each.")
    rows = []
    for arm, sha in (("old", a.old), ("new", a.new)):
        v = med[arm]
        loads = " ".join(f"{r['load_before'][0]:.2f}" for r in raw[arm] if r["load_before"])
        rows.append([f"{arm} `{sha}`", f"**{statistics.median(v):.3f}** ({min(v):.3f}–{max(v):.3f})", loads])
    b.table(["build", "median s/step (min–max over repetitions)", "load before each run"], rows)
    b.text(f"new/old = **{mn / mo:.3f}**.")
    env = benchlib.environment(a.load_before, old=a.old, new=a.new)
    rec = benchlib.record("step_ab", "Refactor guard: RAVE v2 step, old build vs new build", a.command, env, b,
                          raw={"runs": raw},
                          derived={"old": benchlib.summary(med["old"]), "new": benchlib.summary(med["new"]),
                                   "new_over_old": mn / mo},
                          commands=[f"OLD/bin/{step}", f"build/bin/{step}"])
    print(benchlib.write_result(rec, a.results_dir))


if __name__ == "__main__":
    main()
