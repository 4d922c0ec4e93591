#!/usr/bin/python3
"""tracing_overhead.sh's runs -> benchmarks/results/tracing.json: each A/B run's per-step
times (WORK/ab_ARM_REP.json, timing_profile.json copies), the in-process runs' traced and
untraced steps (WORK/alt_ARM.json), op_cost_bench's per-operator costs, and the ≤ 10% targets."""
import json
import os
import statistics

import benchlib

LABEL = {"off": "off", "traced": "traced", "shapes": "+ record_shapes", "stack": "+ with_stack",
         "modules": "+ with_modules"}


def main():
    a = benchlib.summary_parser(__doc__, "work arms reps:int steps:int alt_steps:int warmup:int threads workers "
                                "alt_schedule op_cost? op_cost_command?").parse_args()

    def step_times(name):
        with open(os.path.join(a.work, name + ".json")) as f:
            return [[e["step"], e["total_batch_time"]] for e in json.load(f) if e["step"] >= a.warmup]
    arms = a.arms.split()
    raw = {"ab": {arm: [step_times(f"ab_{arm}_{rep}") for rep in range(1, a.reps + 1)] for arm in arms},
           "alternating": {}}
    run_medians = {arm: [statistics.median(t for _, t in steps) for steps in raw["ab"][arm]] for arm in arms}
    b = benchlib.Blocks()
    b.text(f"tiny_rave, {a.steps} steps per run (first {a.warmup} dropped), {a.reps} interleaved repetitions of the "
           "arms (off, traced, + record_shapes, + with_stack), tracing active on every step (wait 0, warm-up 0, "
           f"active = max_steps), train.threads {a.threads}, data.workers {a.workers}; median of per-step "
           "`total_batch_time` (timing_profile.json) per run, then the median over repetitions.")
    base = statistics.median(run_medians["off"]) if "off" in run_medians else None
    rows, derived, targets = [], {}, []
    for arm in arms:
        m = statistics.median(run_medians[arm])
        derived[f"ab_{arm}_ms"] = benchlib.summary([v * 1e3 for v in run_medians[arm]])
        over = "—" if base is None or arm == "off" else f"{(m / base - 1) * 100:+.1f}%"
        rows.append([LABEL.get(arm, arm), f"{m * 1e3:.2f}", " ".join(f"{v * 1e3:.1f}" for v in run_medians[arm]), over])
    b.table(["arm", "median step (ms)", "per-run medians (ms)", "overhead vs off"], rows)
    b.text(f"The same arms measured inside one process: `train --config tiny_rave --max_steps {a.alt_steps}` with the "
           f"schedule `{a.alt_schedule}` (every odd step traced, every even step with no callback installed; steps "
           f"before {a.warmup} dropped); medians of the two step sets of one run:")
    alt_rows = []
    for arm in (x for x in arms if x != "off"):
        steps = raw["alternating"][arm] = step_times(f"alt_{arm}")
        on = statistics.median(t for s, t in steps if s % 2 == 1)
        off = statistics.median(t for s, t in steps if s % 2 == 0)
        over = derived[f"alternating_{arm}_pct"] = (on / off - 1) * 100
        n_on = sum(s % 2 for s, _ in steps)
        alt_rows.append([LABEL.get(arm, arm), f"{off * 1e3:.2f}", f"{on * 1e3:.2f}", f"{len(steps) - n_on} / {n_on}",
                         f"**{over:+.1f}%**"])
        if arm in ("traced", "shapes"):
            label = ("Detailed tracing overhead, tiny_rave (one process, every other step traced)" if arm == "traced"
                     else "… with record_shapes")
            targets.append(benchlib.target(label, "≤ 10 %", "<=", 10.0, [over], fmt="{:+.1f} %",
                                           over="in-process runs"))
    b.table(["arm", "untraced steps (ms)", "traced steps (ms)", "steps (untraced / traced)", "overhead"], alt_rows)
    if a.op_cost:
        with open(a.op_cost) as f:
            costs = raw["op_cost_ns"] = {x["name"]: x["cpu_time"] for x in json.load(f)["benchmarks"]}
        b.text(f"Per-operator cost: `{a.op_cost_command}` (Google Benchmark; `torch::add` of two 8-element tensors, "
               "1 thread, NoGradGuard; CPU ns per op):")
        base_ns = costs.get("BM_AddUntraced")
        b.table(["benchmark", "CPU ns/op", "added by tracing"],
                [[name, f"{ns:.0f}", f"+{ns - base_ns:.0f} ns" if base_ns and name.startswith("BM_AddTraced") else "—"]
                 for name, ns in costs.items()])
    benchlib.write_summary(a, "tracing", "Detailed tracing overhead", b, raw=raw, derived=derived, targets=targets,
                           analysis="docs/perf/tracing.md",
                           commands=[f"build/bin/train --config tiny_rave --max_steps {a.steps} --train.threads "
                                     f"{a.threads} --data.workers {a.workers} --enable_timing_profiling "
                                     "[--enable_profiling --profiling.wait 0 --profiling.warmup 0 --profiling.active "
                                     "STEPS ...]"])


if __name__ == "__main__":
    main()
