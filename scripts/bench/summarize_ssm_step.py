#!/usr/bin/python3
"""ssm_step.sh's runs (one JSON line per run of ssm_step_bench or reference/s5_maze.py, in round
order) -> scripts/bench/results/ssm_step.json: every run's median step time, per arm the median
and spread of the run medians, the native/python ratios round by round, and the ≤ 0.5 target."""
import argparse
import glob
import os
import statistics

import benchlib

IMPLS = ("native_fused", "native_fused_unfused_block", "native_parallel", "python")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--raw", required=True, help="the runs' JSON lines")
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--load_before")
    ap.add_argument("--results_dir")
    a = ap.parse_args()
    rows = benchlib.read_jsonl(a.raw)
    arms = {}
    for r in rows:
        arms.setdefault((r["threads"], r["impl"]), []).append(r["median_ms"])
    checks = {}
    for path in sorted(glob.glob(os.path.join(os.path.dirname(a.raw), "check_*.txt"))):
        with open(path) as f:
            lines = [line.strip() for line in f if line.strip()]
        checks[os.path.basename(path)[6:-4]] = lines[-1] if lines else ""
    b = benchlib.Blocks()
    b.text("Batch 64 × 140 bins × 182 units, one step = zero_grad + forward + MSE + backward + AdamW; "
           f"{a.rounds} interleaved rounds (fused block, python, op-by-op block, parallel scan per thread count) × "
           f"{a.steps} steps after 3 warm-up steps; medians of the per-run medians. Equivalence checked first "
           "(same weights and batch, dropout 0: losses and parameters after 3 steps)"
           + (": " + "; ".join(f"{k}: {v}" for k, v in checks.items()) if checks else "") + ".")
    table, derived, targets = [], {}, []
    for t in sorted({k[0] for k in arms}):
        py = statistics.median(arms[(t, "python")])
        for impl in IMPLS:
            v = arms.get((t, impl))
            if not v:
                continue
            m = statistics.median(v)
            derived[f"{impl}_t{t}_ms"] = benchlib.summary(v)
            ratio = f"**{m / py:.2f}**" if impl == "native_fused" else (f"{m / py:.2f}" if impl != "python" else "1.00")
            table.append([t, impl, f"{m:.1f}", f"{min(v):.1f}–{max(v):.1f}", len(v), ratio])
        fused = arms.get((t, "native_fused"))
        if fused:
            # Round r's native run against round r's python run (they ran one after the other).
            per_round = [n / p for n, p in zip(fused, arms[(t, "python")])]
            derived[f"native_fused_over_python_t{t}"] = statistics.median(fused) / py
            derived[f"native_fused_over_python_t{t}_per_round"] = per_round
            targets.append(benchlib.target(f"s5_maze training step, native/Python, {t} thread(s)", "≤ 0.5", "<=", 0.5,
                                           per_round, value=statistics.median(fused) / py, over="rounds"))
    b.table(["threads", "implementation", "median step (ms)", "spread of run medians (ms)", "runs", "native/python"],
            table)
    env = benchlib.environment(a.load_before)
    rec = benchlib.record("ssm_step", "s5_maze training step, native vs Python", a.command, env, b,
                          raw={"runs": rows, "equivalence": checks}, derived=derived, targets=targets,
                          analysis="docs/perf/ssm_step.md",
                          commands=[f"build/bin/ssm_step_bench --threads T --steps {a.steps} --warmup 3 --scan fused "
                                    "[--unfused_block]",
                                    f"build/bin/ssm_step_bench --threads T --steps {a.steps} --warmup 3 --scan parallel",
                                    f"/usr/bin/python3 scripts/bench/reference/s5_maze.py --threads T --steps {a.steps} "
                                    "--warmup 3"])
    print(benchlib.write_result(rec, a.results_dir))


if __name__ == "__main__":
    main()
