"""The SSM benchmarks' drivers (bench.py; standard library only): the s5_maze step against its Python
twin and foundational_ssm's models, the SSM kinds, transfer to a new session against scratch."""
import concurrent.futures
import glob
import json
import math
import os
import re
import shutil
import statistics
import time

import benchlib

ROOT, HERE, S = benchlib.ROOT, benchlib.HERE, benchlib.sections()
REF = os.path.join(ROOT, "tests", "oracle", "s5_maze.py")
FSSM_TARGET = 0.3


def ssm_step(ctx):
    """ssm_step_bench's arms against tests/oracle/s5_maze.py on Debian's python3 and, with --fssm DIR
    (a checkout of github.com/Melina-Jingting/foundational_ssm), its S4D and S5 (fssm_step.py in the
    venvs benchmarks/fssm_env.sh makes); equivalence checked first. The fused arm runs 4× the steps
    (fused_steps 0): its run then lasts about as long as the others'."""
    o, bench = ctx.o, os.path.join(ctx.bin, "ssm_step_bench")
    fused_steps, fssm = o.fused_steps or 4 * o.steps, o.fssm and os.path.abspath(o.fssm)
    if fssm:
        if not os.path.isfile(os.path.join(fssm, "src/foundational_ssm/models/archive/s4d.py")):
            raise RuntimeError(f"--fssm {fssm}: not a checkout of github.com/Melina-Jingting/foundational_ssm")
        ctx.run([os.path.join(HERE, "fssm_env.sh")])
    checks = {}
    for arm in ("fused", "fused --unfused_block", "parallel"):
        name = arm.replace(" --", "_")
        ctx.run([bench, "--export", ctx.path(f"check_{name}"), "--scan", *arm.split()])
        lines = ctx.run(["/usr/bin/python3", REF, "--check", ctx.path(f"check_{name}")]).stdout.strip().splitlines()
        checks[name] = lines[-1].strip() if lines else ""
    rows, timing = [], ["--steps", o.steps, "--warmup", 3]
    for _ in range(o.rounds):
        for t in o.threads.split():
            arms = [("native_fused", [bench, "--threads", t, "--steps", fused_steps, "--warmup", 3, "--scan", "fused"]),
                    ("python", ["/usr/bin/python3", REF, "--threads", t, *timing]),
                    ("native_fused_unfused_block", [bench, "--threads", t, *timing, "--scan", "fused", "--unfused_block"]),
                    ("native_parallel", [bench, "--threads", t, *timing, "--scan", "parallel"])]
            if fssm:
                arms += [(None, [os.path.join(ROOT, f".venv-fssm-{v}", "bin", "python"), "-W", "ignore",
                                 os.path.join(HERE, "fssm_step.py"), "--fssm", fssm, "--model", m, "--threads", t,
                                 *timing]) for v, m in (("torch", "s4d"), ("jax", "s5"))]
            for impl, argv in arms:
                rows += [dict(r, impl=impl or r["impl"]) for r in ctx.jsonl(argv)]
    arms = {}
    for r in rows:
        arms.setdefault((r["threads"], r["impl"]), []).append(r["median_ms"])
    b = benchlib.Blocks(S["ssm_step"]["text"])
    b.say("intro", o=o, fused_steps=fused_steps,
          checks=": " + "; ".join(f"{k}: {v}" for k, v in checks.items()) if checks else "")
    table, derived, targets = [], {}, []
    for t in sorted({k[0] for k in arms}):
        py = statistics.median(arms[(t, "python")])
        for impl in ("native_fused", "native_fused_unfused_block", "native_parallel", "python"):
            v = arms.get((t, impl))
            if v:
                m = statistics.median(v)
                derived[f"{impl}_t{t}_ms"] = benchlib.summary(v)
                ratio = f"**{m / py:.2f}**" if impl == "native_fused" else f"{m / py:.2f}" if impl != "python" else "1.00"
                table.append([t, impl, f"{m:.1f}", f"{min(v):.1f}–{max(v):.1f}", len(v), ratio])
        fused = arms[(t, "native_fused")]
        # Round r's native run against round r's python run (they ran one after the other).
        per_round = derived[f"native_fused_over_python_t{t}_per_round"] = [n / p for n, p in zip(fused, arms[(t, "python")])]
        derived[f"native_fused_over_python_t{t}"] = statistics.median(fused) / py
        targets.append(benchlib.target(b.line("target", t=t), "≤ 0.5", "<=", 0.5, per_round, value=statistics.median(fused) / py, over="rounds"))
    b.table("columns", table)
    if fssm:
        fssm_section(b, arms, rows, derived, targets)
    commands = b.lines("commands", o=o, fused_steps=fused_steps) + (b.lines("fssm_commands", o=o) if fssm else [])
    return dict(blocks=b, raw={"runs": rows, "equivalence": checks}, derived=derived, targets=targets,
                commands=commands)


def fssm_section(b, arms, rows, derived, targets):
    """The native fused step against foundational_ssm's own S4D (PyTorch) and S5 (JAX), round by round."""
    last = {r["impl"]: r for r in rows if r["impl"].startswith("fssm_")}  # their versions and commit
    s4d, s5 = last.get("fssm_s4d", {}), last.get("fssm_s5_jax", {})
    b.say("fssm", commit=(s4d or s5).get("fssm_commit") or "an untracked checkout", torch=s4d.get("torch", "?"),
          jax=s5.get("jax", "?"), goal=FSSM_TARGET)
    table = []
    for t in sorted({k[0] for k in arms}):
        native = arms[(t, "native_fused")]
        row = [t, f"{statistics.median(native):.1f}"]
        for impl in ("fssm_s4d", "fssm_s5_jax"):
            theirs = arms.get((t, impl))
            if not theirs:
                row += ["", ""]
                continue
            per_round = [n / p for n, p in zip(native, theirs)]
            ratio = statistics.median(native) / statistics.median(theirs)
            derived.update({f"native_fused_over_{impl}_t{t}": ratio, f"native_fused_over_{impl}_t{t}_per_round": per_round,
                            f"{impl}_t{t}_ms": benchlib.summary(theirs)})
            row += [benchlib.spread(theirs), benchlib.spread(per_round, "{:.2f}", bold=True, head=f"{ratio:.2f}")]
            if impl == "fssm_s4d":
                targets.append(benchlib.target(
                    b.line("fssm_target", t=t), f"≤ {FSSM_TARGET}", "<=", FSSM_TARGET, per_round, value=ratio, over="rounds"))
        table.append(row)
    b.table("fssm_columns", table)


def parse_summary(text):
    """Parameter counts of a `train --summary` of s5_maze."""
    find = lambda rx: re.search(rx, text, re.M).groups()  # noqa: E731
    count = lambda rx: int(find(rx)[0].replace(",", ""))  # noqa: E731
    layer, layer_params = find(r"^[ ]+ssm \((\w+)\)[ ]+params ([\d,]+)")
    return {"header": text.splitlines()[0].strip(), "layer_class": layer, "layer_params": int(layer_params.replace(",", "")),
            "block_params": count(r"^[ ]+0 \(\w+\)[ ]+params ([\d,]+)"), "model_params": count(r"^total params ([\d,]+)"),
            "no_decay_params": count(r"^SSM parameters \(.*\): ([\d,]+)")}


def ssm_kinds(ctx):
    """model.ssm = s5 | s4d | lru on the s5_maze shape: `train --summary`'s parameter counts and
    ssm_step_bench --ssm KIND's step, the kinds interleaved, one process per run."""
    o, kinds = ctx.o, ctx.o.kinds.split()
    db = ctx.neural_db("db182", 182, 8)
    params = {k: parse_summary(ctx.run([os.path.join(ctx.bin, "train"), "--config", "s5_maze", "--model.ssm", k,
                                        "--summary", "--db_path", db]).stdout) for k in kinds}
    rows = [r for _ in range(o.rounds) for t in o.threads.split() for k in kinds for r in ctx.jsonl(
        [os.path.join(ctx.bin, "ssm_step_bench"), "--threads", t, "--steps", o.steps, "--warmup", 3, "--scan", "fused",
         "--ssm", k])]
    b = benchlib.Blocks(S["ssm_kinds"]["text"]).say("intro")
    b.table("params_columns", [[k, p["layer_class"], f"{p['layer_params']:,}", f"{p['no_decay_params']:,}", f"{p['block_params']:,}",
              f"{p['model_params']:,}"] for k, p in params.items()])
    table, derived = benchlib.ratio_rows(benchlib.grouped(rows, "threads", "ssm"), kinds, "s5")
    b.say("step", o=o).table("columns", table)
    return dict(blocks=b, raw={"runs": rows}, derived=dict(derived, params=params), )


VAL_LINE = re.compile(r"^validation @ step (\d+): .*?\bval/r2=(-?[\d.eE+-]+|nan|-?inf)")


def transfer_run(ctx, train, job_id, args):
    """One train run of ssm_transfer (a failure is reported, not fatal): rc, seconds, the final
    validation R² and the validation curve."""
    t0 = time.time()
    log = ctx.path("logs", job_id + ".log")
    p = ctx.run([train, *args, "--out_path", ctx.path("runs"), "--name", job_id], log_to=log, check=False)
    r = {"id": job_id, "rc": p.returncode, "seconds": round(time.time() - t0, 2), "load_after": benchlib.load_avg()[0],
         "curve": [[int(m.group(1)), float(m.group(2))] for m in map(VAL_LINE.match, p.stdout.splitlines()) if m]}
    m = re.search(r"(\d+) train / (\d+) validation examples", p.stdout)
    if m:
        r["train_examples"], r["val_examples"] = int(m.group(1)), int(m.group(2))
    for path in sorted(glob.glob(ctx.path("runs", job_id + "_*", "training_summary.json")))[-1:]:
        s = json.load(open(path))
        r.update(status=s.get("status"), final_step=s.get("last_step", -1) + 1, val_r2=s.get("metrics", {}).get("val/r2"),
                 steps_per_second=s.get("steps_per_second"))
    if r["rc"] != 0 or r.get("val_r2") is None:
        r["error"] = p.stdout[-600:]
    return r


def ssm_transfer(ctx):
    """Pretrained on synthetic sessions 0..N-2, transferred to session N-1 per transfer mode, against
    scratch, per fraction of its trials, kind and seed ([ssm_transfer.text]); runs go `jobs` at a
    time, on copies of the programs (a rebuild of build/ meanwhile does not mix two builds)."""
    o, t_start = ctx.o, time.time()
    units = o.units.split()
    if len(units) < 2:
        raise RuntimeError("--units needs at least two sessions (pretraining ones, then the new one)")
    os.makedirs(ctx.path("bin"))
    os.makedirs(ctx.path("logs"))
    train, pre = (shutil.copy(os.path.join(ctx.bin, p), ctx.path("bin")) for p in ("train", "preprocess"))
    ctx.run([pre, "--generate_neural_demo", ctx.path("gen"), "--groups", len(units), "--units", *units, "--trials",
             o.trials, "--seed", o.data_seed, "--force"])
    last = len(units) - 1
    ctx.run([pre, "--kind", "neural", "--input_path", *[ctx.path("gen", f"synthetic_reach_{g}.h5") for g in range(last)],
             "--output_path", ctx.path("db_pretrain")])
    ctx.run([pre, "--kind", "neural", "--input_path", ctx.path("gen", f"synthetic_reach_{last}.h5"), "--output_path",
             ctx.path("db_new")])
    n_new = int(re.search(r"^entries: (\d+) trials", ctx.run([pre, "--inspect", ctx.path("db_new")]).stdout, re.M).group(1))
    # data/split.h: train = max(floor((1 - val_fraction) n), 1), val_fraction at least 0.1 for SSM runs.
    n_train = max(math.floor((1 - max(0.1, o.val_fraction)) * n_new + 1e-9), 1)
    common = ["--model.d_model", o.d_model, "--model.state_dim", o.state, "--train.lr", o.lr, "--train.warmup_steps", 50,
              "--threads", 1, "--log_every", 100]
    kinds, seeds, fractions = o.kinds.split(), o.seeds.split(), [int(f) for f in o.fractions.split()]
    arms = [f"transfer-{m}" for m in o.modes.split()] + ["scratch"]
    pool = concurrent.futures.ThreadPoolExecutor(o.jobs)
    params = {k: (lambda m: int(m.group(1).replace(",", "")) if m else None)(re.search(r"^total params ([\d,]+)", ctx.run(
        [train, "--config", "foundational", "--model.ssm", k, "--db_path", ctx.path("db_pretrain"), "--summary",
         "--model.d_model", o.d_model, "--model.state_dim", o.state]).stdout, re.M)) for k in kinds}
    pretrain = dict(zip(kinds, pool.map(lambda k: transfer_run(ctx, train, f"pretrain_{k}", [
        "--config", "foundational", "--model.ssm", k, "--db_path", ctx.path("db_pretrain"), "--max_steps",
        o.pretrain_steps, "--val_every", o.pretrain_steps // 4, "--save_every", o.pretrain_steps, "--seed", 0, *common]),
        kinds)))
    jobs = []
    for seed in seeds:
        for f in fractions:
            n = max(1, (f * n_train + 50) // 100)
            for k in kinds:
                pre_run = (glob.glob(ctx.path("runs", f"pretrain_{k}_*")) or [None])[0]
                if not pre_run:
                    raise RuntimeError(f"pretraining of {k} left no run directory: {pretrain[k].get('error')}")
                base = ["--config", "foundational_transfer", "--model.ssm", k, "--db_path", ctx.path("db_new"),
                        "--data.val_fraction", o.val_fraction, "--max_train_trials", n, "--max_steps", o.steps,
                        "--val_every", o.steps // 3, "--save_every", o.steps, "--seed", seed, *common]
                for arm in arms:
                    extra = ["--init_from", pre_run, "--train.transfer_mode", arm[9:]] if arm != "scratch" else []
                    jobs.append((dict(kind=k, fraction=f, trials=n, seed=int(seed), arm=arm),
                                 f"ft_{k}_f{f}_n{n}_s{seed}_{arm}", base + extra))
    runs = [dict(r, **meta) for (meta, _, _), r in zip(jobs, pool.map(lambda j: transfer_run(ctx, train, j[1], j[2]), jobs))]
    settings = {k: getattr(o, k) for k in ("kinds", "fractions", "seeds", "modes", "steps", "pretrain_steps", "trials",
                                           "units", "data_seed", "d_model", "state", "lr", "val_fraction", "jobs")}
    settings.update(n_new=n_new, n_train=n_train, wall_seconds=int(time.time() - t_start))
    return transfer_section(ctx, settings, params, pretrain, runs)


def mean(v):
    return statistics.fmean(v) if v else None


def transfer_section(ctx, a, params, pretrain, runs):
    """ssm_transfer's section from its figures (a: its settings), and ssm_transfer.png beside the result."""
    a = type("Settings", (), a)
    kinds, seeds, fractions = a.kinds.split(), a.seeds.split(), [int(f) for f in a.fractions.split()]
    arms, n_sessions = [f"transfer-{m}" for m in a.modes.split()] + ["scratch"], len(a.units.split())
    failed = [r["id"] for r in runs + list(pretrain.values()) if r.get("error")]
    data = {}
    for r in runs:
        if r.get("val_r2") is not None:
            d = data.setdefault((r["kind"], r["fraction"], r["arm"]), {"trials": r["trials"], "r2": [], "by_seed": {}})
            d["r2"].append(r["val_r2"])
            d["by_seed"][r["seed"]] = r["val_r2"]

    def paired(k, frac, arm):
        t, s = data.get((k, frac, arm)), data.get((k, frac, "scratch"))
        return [t["by_seed"][x] - s["by_seed"][x] for x in sorted(t["by_seed"]) if x in s["by_seed"]] if t and s else []
    cell = lambda v: ("failed" if not v else f"{v[0]:.3f}" if len(v) == 1  # noqa: E731
                      else f"{mean(v):.3f} ({min(v):.3f}–{max(v):.3f})")
    diff_cell = lambda v: ("—" if not v else f"{v[0]:+.3f}" if len(v) == 1  # noqa: E731
                           else f"{mean(v):+.3f} ({min(v):+.3f}…{max(v):+.3f})")
    b = benchlib.Blocks(S["ssm_transfer"]["text"])
    b.say("data", a=a, n=n_sessions, last=n_sessions - 2, new=n_sessions - 1, units=a.units.split()[-1],
          val=a.n_new - a.n_train)
    b.say("model", a=a, last=n_sessions - 2, seeds=", ".join(seeds),
          tail=b.line("seeds_tail" if len(seeds) > 1 else "seed_tail"))
    b.table("pretrain_columns", [[k, f"{params[k]:,}" if params[k] else "—",
              f"{pretrain[k]['val_r2']:.3f}" if pretrain[k].get("val_r2") is not None else "failed",
              f"{pretrain[k].get('seconds', 0):.0f}"] for k in kinds])
    rows, derived = [], {"pretrain_val_r2": {k: pretrain[k].get("val_r2") for k in kinds}, "cells": []}
    for k in kinds:
        for frac in fractions:
            anyd = next((data[(k, frac, arm)] for arm in arms if (k, frac, arm) in data), None)
            trials = anyd["trials"] if anyd else round(frac * a.n_train / 100)
            row = [k, frac, trials]
            for arm in arms:
                d = data.get((k, frac, arm))
                row.append(cell(d["r2"] if d else []))
                derived["cells"].append({"kind": k, "fraction": frac, "trials": trials, "arm": arm,
                                         "r2": benchlib.summary(d["r2"]) if d else None, "mean": mean(d["r2"]) if d else None})
            for arm in arms[:-1]:
                p = paired(k, frac, arm)
                row.append(diff_cell(p))
                derived["cells"].append({"kind": k, "fraction": frac, "trials": trials, "arm": arm + " - scratch",
                                         "paired_differences": p, "mean": mean(p)})
            rows.append(row)
    b.table(["kind", "% of trials", "trials"] + [f"{arm} R²" for arm in arms] + [f"{arm} − scratch" for arm in arms[:-1]],
            rows)
    # What the figures show, in words made from the figures.
    lo_f, hi_f, main_arm = fractions[0], fractions[-1], arms[0]
    neg = [(k, f, arm) for k in kinds for f in fractions for arm in arms[:-1]
           if paired(k, f, arm) and mean(paired(k, f, arm)) < 0]

    def rng(d):
        v = [x for x in d.values() if x is not None]
        return f"{round(min(v), 3) + 0.0:+.3f} to {round(max(v), 3) + 0.0:+.3f}" if v else "—"

    def last_gain(k, arm):  # the last stretch of each run's validation curve at the largest fraction
        return mean([r["curve"][-1][1] - r["curve"][-2][1] for r in runs
                     if r["kind"] == k and r["fraction"] == hi_f and r["arm"] == arm and len(r.get("curve", [])) >= 2])
    b.say("reading", a=a, lo=lo_f, hi=hi_f, lo_trials=round(lo_f * a.n_train / 100), arm=main_arm,
          lo_range=rng({k: mean(paired(k, lo_f, main_arm)) for k in kinds}),
          hi_range=rng({k: mean(paired(k, hi_f, main_arm)) for k in kinds}),
          ahead=("Scratch is ahead (mean over seeds) in: " + ", ".join(f"{k} {f} % ({arm})" for k, f, arm in neg) + "."
                 if neg else "Transfer is ahead (mean over seeds) in every cell."),
          scratch_gain=rng({k: last_gain(k, "scratch") for k in kinds}), stretch=a.steps // 3,
          arm_gain=rng({k: last_gain(k, main_arm) for k in kinds}), total=a.pretrain_steps + a.steps,
          failed=f" Failed runs: {', '.join(failed)}." if failed else "")
    png = os.path.join(ctx.results_dir, "ssm_transfer.png")
    if shutil.which("gnuplot") and data:
        plot(png, ctx.path("plot.dat"), kinds, fractions, arms, data, a.n_train,
             f"new session ({a.units.split()[-1]} units): final validation R^2, transfer vs scratch, {a.steps} steps")
        b.text(f"![transfer vs scratch]({os.path.relpath(png, ROOT)})")
    b.text(f"Whole benchmark: {a.wall_seconds / 60:.0f} min wall ({len(runs) + len(kinds)} training runs).")
    settings = {k: v for k, v in vars(a).items() if not k.startswith("_")}
    return dict(blocks=b, raw={"settings": settings, "params": params, "pretrain": pretrain, "runs": runs}, derived=derived,
                commands=b.lines("commands", a=a, n=n_sessions, val_every=a.steps // 3,
                                 pretrain_val_every=a.pretrain_steps // 4))


def plot(png, dat, kinds, fractions, arms, data, n_train, title):
    """R² against training trials, one panel per kind, one line per arm (mean, min–max bars; gnuplot)."""
    colours = {"scratch": "#7f8c8d", "transfer-all": "#2471a3", "transfer-freeze_a": "#c0392b"}
    series = [(f"{k} {arm}", [[v["trials"], mean(v["r2"]), min(v["r2"]), max(v["r2"])] for v in
                              (data.get((k, frac, arm)) for frac in fractions) if v]) for k in kinds for arm in arms]
    xt = ", ".join(f"'{round(f * n_train / 100)}' {round(f * n_train / 100)}" for f in fractions)
    script = ["set logscale x", f"set xtics ({xt})", "set xlabel 'training trials of the new session'", "set grid",
              "set key bottom right", f"set multiplot layout 1,{len(kinds)} title '{title}'"]
    ymin = max(-1.0, min(0.0, round(min(min(v["r2"]) for v in data.values()) - 0.05, 1)))
    for i, k in enumerate(kinds):
        plots = [f"'{dat}' index {i * len(arms) + j} with yerrorlines lw 2 pt 7 ps 0.8 lc rgb "
                 f"'{colours.get(arm, '#000000')}' title '{arm.replace('_', chr(92) + '_')}'" for j, arm in enumerate(arms)]
        script += [f"set title 'model.ssm = {k}'", f"set yrange [{ymin}:1]",
                   "set ylabel 'final validation R^2'" if i == 0 else "unset ylabel",
                   f"set xrange [{round(fractions[0] * n_train / 100) * 0.8}:{n_train * 1.25}]", "plot " + ", ".join(plots)]
    benchlib.gnuplot(png, dat, series, script + ["unset multiplot"], f"{420 * len(kinds) + 60},440")
