"""Training parity with the real RAVE: the same small v2 (tiny_rave's network through --override
bindings on RAVE's v2.gin, phase 1 ending half way) trained by RAVE's own `rave train` (acids-rave
2.3.1 through rave_train.py) and by our `train`, on the same database, steps, batch and configuration,
--runs runs per trainer (RAVE's train.py seeds nothing; ours take --seed 1, 2, ...), one intra-op
thread each, all at once; their validation spectral distances go into rave_parity.png and the result
rave_parity.json (--results_dir).

  rave_parity.py --bin build/bin --work DIR [--results_dir DIR] [--steps 2000]     (rave_parity.sh)
  rave_parity.py --bin BIN --work DIR --device cuda --train_only --replace-unused-imports
                                                  (training only, scripts/gpu_check.sh's rave_parity step)
  rave_parity.py --bin build/bin --work DIR [--results_dir DIR] --collect_only     (the runs under DIR)
  rave_parity.py --from_json benchmarks/results/rave_parity.json [--results_dir DIR]  (the result again)

Training writes parity_meta.json under --work (device, versions, steps, wall time), which the
collection reads.
"""
import datetime
import glob
import json
import os
import subprocess
import sys
import time

import benchlib

HERE = benchlib.HERE

RAW_KEYS = ("trained_by", "steps", "phase_1_duration", "runs_per_trainer", "val_every", "config", "curves", "wall_s",
            "device", "torch", "oracle")
DERIVED_KEYS = ("final_validation", "final_is_mean_of_validations_from_step", "ratio_of_mean_finals", "rave_spread",
                "ours_spread", "gap_of_means", "within_spread")
CONFIG = "tiny_rave (v2 network, capacity 8, 16 bands, ratios 2·2·2), batch 4, n_signal 8192"

# tiny_rave's network and schedule as gin bindings on RAVE's v2.gin ({phase_1}, {beta}: the schedule's).
RAVE_OVERRIDES = ("N_BAND=16", "CAPACITY=8", "LATENT_SIZE=8", "RATIOS=[2, 2, 2]", "DILATIONS=[[1, 3], [1, 3], [1, 3]]",
                  "discriminator.ConvNet.capacity=4", "discriminator.ConvNet.n_layers=2",
                  "discriminator.MultiPeriodDiscriminator.periods=[2, 3]",
                  "discriminator.MultiScaleDiscriminator.n_discriminators=2",
                  "core.MultiScaleSTFT.scales=[512, 256, 128, 64]", "PHASE_1_DURATION={phase_1}",
                  "BetaWarmupCallback.warmup_len={beta}", "BetaWarmupCallback.target_value=0.01")


def scalars(event_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(event_dir, size_guidance={"scalars": 0})
    acc.Reload()
    if tag not in acc.Tags()["scalars"]:
        raise SystemExit(f"rave_parity: no '{tag}' scalar in {event_dir} (has {acc.Tags()['scalars']})")
    return [(int(e.step), float(e.value)) for e in acc.Scalars(tag)]


def train(a, db, phase_1, beta_warmup):
    """Every run at once (the comparison is of what they learn, not of their speed); parity_meta.json."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    started, jobs = time.time(), []
    for r in range(1, a.runs + 1):
        out = {k: os.path.join(a.work, f"{k}_{r}") for k in ("rave", "ours")}
        common = ["--db_path", db, "--name", f"parity{r}", "--max_steps", a.steps, "--val_every", a.val_every,
                  "--n_signal", 8192, "--batch", 4, "--workers", 0, "--save_every", 10 * a.steps]
        cmds = {"rave": [sys.executable, "-W", "ignore", os.path.join(HERE, "rave_train.py"),
                         *(["--replace-unused-imports"] if a.replace_unused_imports else []), "--", "--config", "v2",
                         *common, "--out_path", out["rave"], "--gpu", -1 if a.device == "cpu" else 0, "--channels", 1,
                         "--noprogress",
                         *[x for o in RAVE_OVERRIDES for x in ("--override", o.format(phase_1=phase_1, beta=beta_warmup))]],
                "ours": [os.path.join(a.bin, "train"), "--config", "tiny_rave", "--threads", 1, *common, "--out_path",
                         out["ours"], "--seed", r, "--train.phase_1_duration", phase_1, "--train.beta_warmup_steps",
                         beta_warmup, "--log_every", 100, "--device", a.device]}
        for k, cmd in cmds.items():
            print("+", " ".join(map(str, cmd)), file=sys.stderr)
            with open(out[k] + ".log", "w") as f:
                jobs.append((subprocess.Popen([str(x) for x in cmd], stdout=f, stderr=subprocess.STDOUT, env=env),
                             out[k] + ".log"))
    for p, log in jobs:
        if p.wait() != 0:
            raise SystemExit(f"rave_parity: {log} ended with exit status {p.returncode}:\n" + open(log).read()[-3000:])
    import torch
    from importlib.metadata import version
    device = (torch.cuda.get_device_name(0) if a.device == "cuda"
              else f"CPU ({os.cpu_count()} cores), one intra-op thread per run")
    return {"trained_by": a.trained_by, "date": benchlib.now(), "device": device, "steps": a.steps,
            "runs_per_trainer": a.runs, "val_every": a.val_every, "wall_s": time.time() - started,
            "torch": torch.__version__, "oracle": "acids-rave " + version("acids-rave")}


def main():
    a = benchlib.options(__doc__, {"bin": None, "work": None, "results_dir": None, "device": "cpu", "val_every": 200,
                                   "trained_by": "benchmarks/rave_parity.sh", "replace_unused_imports": False,
                                   "train_only": False, "steps": 2000, "runs": 2, "quick": False,
                                   "collect_only": False, "from_json": None})
    if a.from_json:
        with open(a.from_json, encoding="utf-8") as f:
            old = json.load(f)
        return write(dict(old["raw"], **old["derived"]), old["date"], a.results_dir, a.work or "/tmp")
    if not (a.bin and a.work):
        raise SystemExit("rave_parity: --bin and --work are needed unless --from_json")
    meta_path = os.path.join(a.work, "parity_meta.json")
    if a.collect_only:  # the runs say how long they were and how many there are
        with open(meta_path) as f:
            meta = json.load(f)
        a.steps, a.runs = meta["steps"], meta["runs_per_trainer"]
    else:
        a.steps = 400 if a.quick else a.steps
        os.makedirs(a.work, exist_ok=True)
        db = os.path.join(a.work, "db")
        if not os.path.exists(os.path.join(db, "metadata.yaml")):
            benchlib.demo_audio_db(a.bin, db, 240, "--sampling_rate", 44100, "--channels", 1, "--num_signal", 16384,
                                   "--max_db_size", 1)
        meta = train(a, db, a.steps // 2, 100)
        benchlib.emit(meta, meta_path, indent=1)
        if a.train_only:
            return benchlib.emit(meta)
    curves = {}
    for r in range(1, a.runs + 1):
        events = sorted(glob.glob(os.path.join(a.work, f"rave_{r}", "**", "events.out.tfevents.*"), recursive=True))
        curves[f"rave_{r}"] = scalars(os.path.dirname(events[-1]), "validation")
        curves[f"ours_{r}"] = scalars(benchlib.latest_run(os.path.join(a.work, f"ours_{r}")), "validation")
    d = {"trained_by": meta["trained_by"], "steps": a.steps, "phase_1_duration": a.steps // 2, "runs_per_trainer": a.runs,
         "val_every": meta["val_every"], "config": CONFIG, "curves": curves, "wall_s": meta["wall_s"],
         "device": meta["device"], "torch": meta["torch"], "oracle": meta["oracle"]}
    d.update(compare(d))
    # When the training ended (runs trained before the date was recorded: the file's time).
    date = meta.get("date") or datetime.datetime.fromtimestamp(os.path.getmtime(meta_path)).isoformat(
        timespec="seconds")
    write(d, date, a.results_dir, a.work)


def compare(d):
    """The final distance of every run and the comparison of the two trainers. RAVE validates every
    val_every batches within each epoch (Lightning's val_check_interval restarts with the epoch: steps
    199, 399, 599, 830, ... on this database), ours every val_every steps: their last points fall on
    different steps, so a run's final distance is the mean of its validations over the last 30 % of
    the steps (phase 2, settled)."""
    late_from = int(0.7 * d["steps"])
    finals = {}
    for name, points in d["curves"].items():
        late = [v for s, v in points if s >= late_from]
        finals[name] = sum(late) / len(late)
    rave_runs = [finals[f"rave_{r}"] for r in range(1, d["runs_per_trainer"] + 1)]
    ours_runs = [finals[f"ours_{r}"] for r in range(1, d["runs_per_trainer"] + 1)]
    out = {"final_validation": finals, "final_is_mean_of_validations_from_step": late_from,
           "ratio_of_mean_finals": (sum(ours_runs) / len(ours_runs)) / (sum(rave_runs) / len(rave_runs)),
           "rave_spread": max(rave_runs) - min(rave_runs), "ours_spread": max(ours_runs) - min(ours_runs),
           "gap_of_means": abs(sum(ours_runs) / len(ours_runs) - sum(rave_runs) / len(rave_runs))}
    out["within_spread"] = out["gap_of_means"] <= max(out["rave_spread"], out["ours_spread"])
    return out


def plot(d, png, work):
    """Every run's validation curve, through gnuplot (profile-report's plotter too)."""
    os.makedirs(work, exist_ok=True)
    dat, styles = os.path.join(work, "curves.dat"), {"rave": "lc rgb '#c0392b'", "ours": "lc rgb '#2471a3'"}
    plots = ", ".join(f"'{dat}' index {i} with linespoints {styles[n.split('_')[0]]} dt {1 + i % 2} "
                      f"title '{'RAVE 2.3.1 (rave train)' if n.startswith('rave') else 'ours (train)'} run {n[-1]}'"
                      for i, n in enumerate(d["curves"]))
    phase_1 = d["phase_1_duration"]
    benchlib.gnuplot(png, dat, d["curves"].items(), [
        "set xlabel 'step'", "set ylabel 'validation (fullband spectral distance)'", "set grid",
        f"set arrow from {phase_1}, graph 0 to {phase_1}, graph 1 nohead dt 3",
        f"set label 'phase 2' at {phase_1}, graph 0.95 offset 1,0",
        f"set title 'tiny v2, batch 4 x 8192, {d['steps']} steps: validation over training'", f"plot {plots}"], "900,520")


def result(d, date, png):
    """The result: figures in raw and derived, the section's text and table in blocks."""
    late_from, curves, finals = d["final_is_mean_of_validations_from_step"], d["curves"], d["final_validation"]
    runs = d["runs_per_trainer"]
    section = benchlib.sections()["rave_parity"]
    b = benchlib.Blocks(section["text"]).say("trained_by", by=d["trained_by"])
    b.say("setup", d=d, runs=runs, seeds=", ".join(str(r) for r in range(1, runs + 1)))
    b.text(f"![validation curves]({os.path.relpath(png, benchlib.ROOT)})").say("final", d=d, late_from=late_from)
    b.table(["run", f"validations from step {late_from}", "final (their mean)", "last validation"],
            [[k, ", ".join(str(s) for s, _ in curves[k] if s >= late_from), f"{v:.4f}",
              f"{curves[k][-1][1]:.4f} (step {curves[k][-1][0]})"] for k, v in sorted(finals.items())])
    b.say("gap", d=d, within="within the spread." if d["within_spread"] else "**outside** the spread.",
          minutes=d["wall_s"] / 60)
    spread = max(d["rave_spread"], d["ours_spread"])
    targets = [] if not spread else [benchlib.target(
        b.line("target", d=d, runs=runs), "≤ 1 (gap within the spread)", "<=", 1.0,
        [d["gap_of_means"] / spread], fmt="{:.3f}", over="comparison",
        note=f"ours / RAVE {d['ratio_of_mean_finals']:.3f}; gap {d['gap_of_means']:.3f}; spread "
             f"{d['rave_spread']:.3f} RAVE, {d['ours_spread']:.3f} ours")]
    env = {"date": date, "device": d["device"], "torch": d["torch"], "oracle": d["oracle"]}
    return benchlib.record(section["name"], section["title"], d["trained_by"], env, b,
                           raw={k: d[k] for k in RAW_KEYS}, derived={k: d[k] for k in DERIVED_KEYS}, targets=targets)


def write(d, date, results_dir, work):
    """rave_parity.png and rave_parity.json into results_dir (benchlib.results_dir's default)."""
    directory = benchlib.results_dir(results_dir)
    os.makedirs(directory, exist_ok=True)
    png = os.path.join(directory, "rave_parity.png")
    plot(d, png, work)
    r = result(d, date, png)
    print(benchlib.write_result(r, directory))
    benchlib.emit(r["derived"])


if __name__ == "__main__":
    main()
