#!/usr/bin/python3
"""ssm_transfer.sh's runs (its work folder: jobs.txt, logs/<id>.{log,done}, runs/<id>_*/
training_summary.json) -> benchmarks/results/ssm_transfer.json and ssm_transfer.png beside it
(gnuplot, as rave_parity.png): per SSM kind and fraction of the new session's training trials,
the final validation R² of transfer (per transfer mode) and of scratch, per seed, their means and
the paired (same seed) differences."""
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile

import benchlib

VAL_LINE = re.compile(r"^validation @ step (\d+): .*?\bval/r2=(-?[\d.eE+-]+|nan|-?inf)")
EXAMPLES = re.compile(r"(\d+) train / (\d+) validation examples")
TOTAL = re.compile(r"^total params ([\d,]+)", re.M)


def read_run(work, job_id):
    """One run's figures: rc, seconds, final metrics, the validation curve from its log."""
    r = {"id": job_id}
    done = os.path.join(work, "logs", job_id + ".done")
    if os.path.exists(done):
        with open(done) as f:
            d = json.load(f)
        r.update(rc=d["rc"], seconds=d["seconds"], load_after=float(d["load_after"]))
    with open(os.path.join(work, "logs", job_id + ".log"), encoding="utf-8", errors="replace") as f:
        log = f.read()
    r["curve"] = [[int(s), float(v)] for s, v in (VAL_LINE.match(line).groups() for line in log.splitlines()
                                                    if VAL_LINE.match(line))]
    m = EXAMPLES.search(log)
    if m:
        r["train_examples"], r["val_examples"] = int(m.group(1)), int(m.group(2))
    runs = sorted(glob.glob(os.path.join(work, "runs", job_id + "_*", "training_summary.json")))
    if runs:
        with open(runs[-1]) as f:
            s = json.load(f)
        r["status"] = s.get("status")
        r["final_step"] = s.get("last_step", -1) + 1
        r["val_r2"] = s.get("metrics", {}).get("val/r2")
        r["steps_per_second"] = s.get("steps_per_second")
    if r.get("rc", 1) != 0 or r.get("val_r2") is None:
        r["error"] = log[-600:]
    return r


def mean(v):
    return statistics.fmean(v) if v else None


def cell(v, seeds):
    """'0.791' for one seed; '0.791 (0.788–0.795)' (mean, range over seeds) for several."""
    if not v:
        return "failed"
    if len(v) == 1:
        return f"{v[0]:.3f}"
    return f"{mean(v):.3f} ({min(v):.3f}–{max(v):.3f})"


def diff_cell(v):
    if not v:
        return "—"
    if len(v) == 1:
        return f"{v[0]:+.3f}"
    return f"{mean(v):+.3f} ({min(v):+.3f}…{max(v):+.3f})"


def plot(png, work, kinds, fractions, arms, table_data, n_train, title):
    """R² against training trials, one panel per kind, one line per arm (mean, min–max bars)."""
    dat = os.path.join(work, "ssm_transfer_plot.dat")
    index, plots = 0, {k: [] for k in kinds}
    colours = {"scratch": "#7f8c8d", "transfer-all": "#2471a3", "transfer-freeze_a": "#c0392b"}
    with open(dat, "w") as f:
        for k in kinds:
            for arm in arms:
                f.write(f"# {k} {arm}\n")
                for frac in fractions:
                    v = table_data.get((k, frac, arm))
                    if v:
                        n = v["trials"]
                        f.write(f"{n} {mean(v['r2'])} {min(v['r2'])} {max(v['r2'])}\n")
                f.write("\n\n")
                label = arm.replace("_", "\\_")  # gnuplot's enhanced text: _ is a subscript
                plots[k].append(f"'{dat}' index {index} with yerrorlines lw 2 pt 7 ps 0.8 lc rgb "
                                f"'{colours.get(arm, '#000000')}' title '{label}'")
                index += 1
    xt = ", ".join(f"'{round(f * n_train / 100)}' {round(f * n_train / 100)}" for f in fractions)
    script = [f"set terminal pngcairo size {420 * len(kinds) + 60},440 font 'DejaVu Sans,10'",
              f"set output '{png}'", "set logscale x", f"set xtics ({xt})",
              "set xlabel 'training trials of the new session'", "set grid", "set key bottom right",
              f"set multiplot layout 1,{len(kinds)} title '{title}'"]
    lo = min(min(v["r2"]) for v in table_data.values())
    ymin = max(-1.0, min(0.0, round(lo - 0.05, 1)))
    for i, k in enumerate(kinds):
        script += [f"set title 'model.ssm = {k}'", f"set yrange [{ymin}:1]",
                   "set ylabel 'final validation R^2'" if i == 0 else "unset ylabel",
                   f"set xrange [{round(fractions[0] * n_train / 100) * 0.8}:{n_train * 1.25}]",
                   "plot " + ", ".join(plots[k])]
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True, check=True)


def main():
    # ssm_transfer.sh passes all of these; --from_result takes them from an earlier result instead.
    ap = benchlib.summary_parser(__doc__, "work? kinds? fractions? seeds? modes? units? lr? steps:int? pretrain_steps:int? "
                                 "trials:int? data_seed:int? d_model:int? state:int? n_new:int? n_train:int? jobs:int? "
                                 "wall_seconds:int? val_fraction:float?", command_required=False)
    ap.add_argument("--from_result", help="rebuild the section (text, tables, plot) from this result's raw "
                                          "figures, keeping its date, command and environment (no work folder)")
    a = ap.parse_args()
    earlier = None
    if a.from_result:
        with open(a.from_result, encoding="utf-8") as f:
            earlier = json.load(f)
        for key, value in earlier["raw"]["settings"].items():
            setattr(a, key, value)
        a.command = earlier["command"]
    kinds, seeds, modes = a.kinds.split(), a.seeds.split(), a.modes.split()
    fractions = [int(f) for f in a.fractions.split()]
    arms = [f"transfer-{m}" for m in modes] + ["scratch"]
    n_sessions = len(a.units.split())

    if earlier:
        params, pretrain, runs = earlier["raw"]["params"], earlier["raw"]["pretrain"], earlier["raw"]["runs"]
        a.work = tempfile.mkdtemp(prefix="ssm_transfer_plot.")
    else:
        pretrain, params = {}, {}
        for k in kinds:
            pretrain[k] = read_run(a.work, f"pretrain_{k}")
            with open(os.path.join(a.work, "logs", f"summary_{k}.txt"), encoding="utf-8") as f:
                m = TOTAL.search(f.read())
            params[k] = int(m.group(1).replace(",", "")) if m else None
        runs = []
        with open(os.path.join(a.work, "jobs.txt")) as f:
            for line in f:
                job_id = line.split()[0]
                m = re.fullmatch(r"ft_(\w+?)_f(\d+)_n(\d+)_s(\d+)_(.+)", job_id)
                r = read_run(a.work, job_id)
                r.update(kind=m.group(1), fraction=int(m.group(2)), trials=int(m.group(3)), seed=int(m.group(4)),
                         arm=m.group(5))
                runs.append(r)
    failed = [r["id"] for r in runs + list(pretrain.values()) if r.get("error")]

    data = {}
    for r in runs:
        if r.get("val_r2") is None:
            continue
        d = data.setdefault((r["kind"], r["fraction"], r["arm"]), {"trials": r["trials"], "r2": [], "by_seed": {}})
        d["r2"].append(r["val_r2"])
        d["by_seed"][r["seed"]] = r["val_r2"]

    def paired(k, frac, arm):
        t, s = data.get((k, frac, arm)), data.get((k, frac, "scratch"))
        if not t or not s:
            return []
        return [t["by_seed"][x] - s["by_seed"][x] for x in sorted(t["by_seed"]) if x in s["by_seed"]]

    b = benchlib.Blocks()
    b.text(f"Data: `preprocess --generate_neural_demo --groups {n_sessions} --units {a.units} --trials {a.trials} "
           f"--seed {a.data_seed}`, synthetic reaching sessions that share the task (latent dynamics and "
           "behaviour readout come from the seed) but not the neurons (each session's units and tuning are "
           f"drawn anew). Sessions 0–{n_sessions - 2} are one pretraining database; session {n_sessions - 1} "
           f"({a.units.split()[-1]} units, {a.n_new} trials) is the new one: its validation split "
           f"(data.val_fraction {a.val_fraction}: {a.n_new - a.n_train} trials, the same for every run) scores "
           f"every run, and runs train on the first 10–100 % of its {a.n_train} training trials "
           "(`--max_train_trials N`).")
    b.text(f"Model: `--config foundational` (4 blocks) at `--model.d_model {a.d_model} --model.state_dim {a.state}`"
           f", lr {a.lr} (cosine, 50 warm-up steps), batch 64, `--threads 1`, {a.jobs} runs at a time. Pretraining: "
           f"{a.pretrain_steps} steps on the pretraining database, once per kind; its best checkpoint (validated "
           "on sessions 0–" f"{n_sessions - 2}) is what `--init_from` copies. New session: {a.steps} steps for every "
           "run, transfer = `--config foundational_transfer --init_from PRETRAIN_RUN --train.transfer_mode MODE` "
           "(blocks and decoder copied, read-in and session context new), scratch = the same command without "
           "`--init_from`. The figure is the **final** validation R² (`val/r2` of training_summary.json's "
           f"\"metrics\", at step {a.steps}; no early stopping on the validation set), per train.seed "
           f"({', '.join(seeds)}): the mean over seeds"
           + (" with the range in brackets; differences are transfer − scratch, paired by seed." if len(seeds) > 1
              else "; differences are transfer − scratch."))
    b.table(["kind", "model params (pretraining)", "pretraining val R² (final)", "pretraining s"],
            [[k, f"{params[k]:,}" if params[k] else "—",
              f"{pretrain[k]['val_r2']:.3f}" if pretrain[k].get("val_r2") is not None else "failed",
              f"{pretrain[k].get('seconds', 0):.0f}"] for k in kinds])
    cols = ["kind", "% of trials", "trials"] + [f"{arm} R²" for arm in arms] + \
        [f"{arm} − scratch" for arm in arms if arm != "scratch"]
    rows, derived = [], {"pretrain_val_r2": {k: pretrain[k].get("val_r2") for k in kinds}, "cells": []}
    for k in kinds:
        for frac in fractions:
            anyd = next((data[(k, frac, arm)] for arm in arms if (k, frac, arm) in data), None)
            trials = anyd["trials"] if anyd else round(frac * a.n_train / 100)
            row = [k, frac, trials]
            for arm in arms:
                d = data.get((k, frac, arm))
                row.append(cell(d["r2"] if d else [], seeds))
                derived["cells"].append({"kind": k, "fraction": frac, "trials": trials, "arm": arm,
                                         "r2": benchlib.summary(d["r2"]) if d else None,
                                         "mean": mean(d["r2"]) if d else None})
            for arm in arms[:-1]:
                p = paired(k, frac, arm)
                row.append(diff_cell(p))
                derived["cells"].append({"kind": k, "fraction": frac, "trials": trials, "arm": arm + " - scratch",
                                         "paired_differences": p, "mean": mean(p)})
            rows.append(row)
    b.table(cols, rows)

    # What the figures show, in words made from the figures.
    lo_f, hi_f = fractions[0], fractions[-1]
    main_arm = arms[0]
    d_lo = {k: mean(paired(k, lo_f, main_arm)) for k in kinds}
    d_hi = {k: mean(paired(k, hi_f, main_arm)) for k in kinds}
    neg = [(k, f, arm) for k in kinds for f in fractions for arm in arms[:-1]
           if paired(k, f, arm) and mean(paired(k, f, arm)) < 0]

    def rng(d):
        v = [x for x in d.values() if x is not None]
        return f"{round(min(v), 3) + 0.0:+.3f} to {round(max(v), 3) + 0.0:+.3f}" if v else "—"

    # The last stretch of each run's validation curve at the largest fraction (how flat it ended).
    def last_gain(k, arm):
        v = [r["curve"][-1][1] - r["curve"][-2][1] for r in runs
             if r["kind"] == k and r["fraction"] == hi_f and r["arm"] == arm and len(r.get("curve", [])) >= 2]
        return mean(v)
    gain_s = {k: last_gain(k, "scratch") for k in kinds}
    gain_t = {k: last_gain(k, main_arm) for k in kinds}
    every = a.steps // 3
    b.text(f"Reading: at {lo_f} % of the trials ({round(lo_f * a.n_train / 100)}), {main_arm} minus scratch is "
           f"{rng(d_lo)} R² across the kinds; at {hi_f} % it is {rng(d_hi)}. "
           + ("Scratch is ahead (mean over seeds) in: " + ", ".join(f"{k} {f} % ({arm})" for k, f, arm in neg) + "."
              if neg else "Transfer is ahead (mean over seeds) in every cell.")
           + f" Every run has the same {a.steps} steps on the new session and transfer had {a.pretrain_steps} "
           f"pretraining steps before them; under the cosine schedule the curves flatten at the end (at {hi_f} % "
           f"scratch's R² changed by {rng(gain_s)} over its last {every} steps, {main_arm}'s by {rng(gain_t)}), "
           f"but whether scratch closes the gap at {hi_f} % with a longer schedule (e.g. {a.pretrain_steps + a.steps} "
           "steps, the same total) is not measured here."
           + (f" Failed runs: {', '.join(failed)}." if failed else ""))
    directory = benchlib.results_dir(a.results_dir)
    os.makedirs(directory, exist_ok=True)
    png = os.path.join(directory, "ssm_transfer.png")
    if shutil.which("gnuplot") and data:
        plot(png, a.work, kinds, fractions, arms, data, a.n_train,
             f"new session ({a.units.split()[-1]} units): final validation R^2, transfer vs scratch, "
             f"{a.steps} steps")
        b.text(f"![transfer vs scratch]({os.path.relpath(png, benchlib.ROOT)})")
    b.text(f"Whole benchmark: {a.wall_seconds / 60:.0f} min wall ({len(runs) + len(kinds)} training runs).")
    env = earlier["environment"] if earlier else benchlib.environment(a.load_before)
    raw = {"settings": {k: getattr(a, k) for k in ("kinds", "fractions", "seeds", "modes", "steps", "pretrain_steps",
                                                     "trials", "units", "data_seed", "d_model", "state", "lr",
                                                     "val_fraction", "n_new", "n_train", "jobs", "wall_seconds")},
           "params": params, "pretrain": pretrain, "runs": runs}
    common = (f"--model.d_model {a.d_model} --model.state_dim {a.state} --train.lr {a.lr} --train.warmup_steps 50 "
              "--threads 1")
    benchlib.write_summary(
        a, "ssm_transfer", "Why pretrain: SSM transfer to a new session vs training from scratch", b, env=env,
        raw=raw, derived=derived,
        commands=[f"build/bin/preprocess --generate_neural_demo GEN --groups {n_sessions} --units {a.units} "
                  f"--trials {a.trials} --seed {a.data_seed}",
                  f"build/bin/train --config foundational --model.ssm KIND --db_path DB_PRETRAIN --max_steps "
                  f"{a.pretrain_steps} --val_every {a.pretrain_steps // 4} --seed 0 {common}",
                  f"build/bin/train --config foundational_transfer --model.ssm KIND --db_path DB_NEW "
                  f"--data.val_fraction {a.val_fraction} --max_train_trials N --max_steps {a.steps} --val_every "
                  f"{a.steps // 3} --seed SEED {common} [--init_from PRETRAIN_RUN --train.transfer_mode MODE]"])
    if earlier:
        shutil.rmtree(a.work, ignore_errors=True)
    if failed:
        print("summarize_ssm_transfer: failed runs: " + ", ".join(failed))


if __name__ == "__main__":
    main()
