#!/usr/bin/python3
"""ssm_step.sh's runs (one JSON line per run of ssm_step_bench or tests/oracle/s5_maze.py, in round
order) -> benchmarks/results/ssm_step.json: every run's median step time, per arm the median
and spread of the run medians, the native/python ratios round by round, and the ≤ 0.5 target;
with fssm_step.py's runs (ssm_step.sh --fssm), the ratios to foundational_ssm's own S4D
(PyTorch) and S5 (JAX) and the ≤ 0.3 target against its S4D."""
import glob
import os
import statistics

import benchlib

# The native arms and the Python twin (the first table); fssm_s4d and fssm_s5_jax have their own.
IMPLS = ("native_fused", "native_fused_unfused_block", "native_parallel", "python")
FSSM_TARGET = 0.3


def fssm_section(b, arms, fssm_rows, derived, targets):
    """The native fused step against foundational_ssm's own S4D (PyTorch) and S5 (JAX), round by round."""
    last_run = {r["impl"]: r for r in fssm_rows}  # their versions and commit
    s4d, s5 = last_run.get("fssm_s4d", {}), last_run.get("fssm_s5_jax", {})
    b.text("Against foundational_ssm's own models (github.com/Melina-Jingting/foundational_ssm at "
           f"{(s4d or s5).get('fssm_commit') or 'an untracked checkout'}, imported from the checkout, "
           "benchmarks/fssm_step.py), same batch shape, in the same rounds: its PyTorch S4D decoder "
           "(models/archive/S4DNeuroModel.py as its nlb_train_decoding_torch.py builds it for MC_Maze: 1 layer, "
           "hidden 64, state 64, dropout 0.1, AdamW 5e-4 / 0.01; float32) on torch "
           f"{s4d.get('torch', '?')}, the LibTorch of the native build; its JAX S5 decoder (SSMDecoder with "
           "S5Layer: state 64, 1 block, dropout 0.05) stepped by its own jitted make_step_foundational with "
           f"create_optimizer_and_state's AdamW, on jax {s5.get('jax', '?')} (CPU; at 1 thread pinned to one "
           "CPU with XLA's multi-threaded Eigen off). Ratios are the native fused step over theirs; the target "
           f"(≤ {FSSM_TARGET}) is per round.")
    table = []
    for t in sorted({k[0] for k in arms}):
        native = arms.get((t, "native_fused"))
        if not native:
            continue
        row = [t, f"{statistics.median(native):.1f}"]
        for impl in ("fssm_s4d", "fssm_s5_jax"):
            theirs = arms.get((t, impl))
            if not theirs:
                row += ["", ""]
                continue
            per_round = [n / p for n, p in zip(native, theirs)]
            ratio = statistics.median(native) / statistics.median(theirs)
            derived[f"native_fused_over_{impl}_t{t}"] = ratio
            derived[f"native_fused_over_{impl}_t{t}_per_round"] = per_round
            derived[f"{impl}_t{t}_ms"] = benchlib.summary(theirs)
            row += [benchlib.spread(theirs), benchlib.spread(per_round, "{:.2f}", bold=True, head=f"{ratio:.2f}")]
            if impl == "fssm_s4d":
                targets.append(benchlib.target(
                    f"s5_maze training step, native / foundational_ssm's S4D (PyTorch), {t} thread(s)",
                    f"≤ {FSSM_TARGET}", "<=", FSSM_TARGET, per_round, value=ratio, over="rounds"))
        table.append(row)
    b.table(["threads", "native fused (ms)", "fSSM S4D, PyTorch (ms)", "native / S4D (rounds)",
             "fSSM S5, JAX (ms)", "native / S5 JAX (rounds)"], table)


def main():
    a = benchlib.summary_parser(__doc__, "raw rounds:int steps:int fused_steps:int").parse_args()
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
           f"{a.steps} steps after 3 warm-up steps ({a.fused_steps} for the fused block, whose run then lasts about "
           "as long as the others': a shared host's slow and fast phases weigh alike on both sides of a ratio); "
           "medians of the per-run medians. Equivalence checked first "
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
    fssm_rows = [r for r in rows if r["impl"].startswith("fssm_")]
    if fssm_rows:
        fssm_section(b, arms, fssm_rows, derived, targets)
    timing = f"--threads T --steps {a.steps} --warmup 3"
    benchlib.write_summary(
        a, "ssm_step", "s5_maze training step: native, its Python twin, foundational_ssm", b,
        raw={"runs": rows, "equivalence": checks}, derived=derived, targets=targets, analysis="docs/perf/ssm_step.md",
        commands=[f"build/bin/ssm_step_bench --threads T --steps {a.fused_steps} --warmup 3 --scan fused",
                  f"build/bin/ssm_step_bench {timing} --scan fused --unfused_block",
                  f"build/bin/ssm_step_bench {timing} --scan parallel", f"/usr/bin/python3 tests/oracle/s5_maze.py {timing}"]
        + ([f".venv-fssm-torch/bin/python benchmarks/fssm_step.py --fssm DIR --model s4d {timing}",
            f".venv-fssm-jax/bin/python -W ignore benchmarks/fssm_step.py --fssm DIR --model s5 {timing}"]
           if fssm_rows else []))


if __name__ == "__main__":
    main()
