"""The RAVE benchmarks of bench.py: descriptions and drivers (standard library only).

The comparisons with RAVE time the real RAVE (acids-rave 2.3.1): its own `training_step`
(rave_gpu_step.py --device cpu) and its own `rave train` (rave_train.py), in the venv
benchmarks/rave_cpu_env.sh makes, on torch 2.11.0's LibTorch; the native side is built against
that same LibTorch (--cuda_build, scripts/check_cuda_build.sh's build-cuda/, which runs on the
CPU). The other sections time the main build (Debian's LibTorch 1.13). Also here: the refactor
guard (old build against new), every RAVE configuration at full size, and training parity.
"""
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import time

import benchlib

HERE = benchlib.HERE
RAVE_STEP, RAVE_TRAIN = os.path.join(HERE, "rave_gpu_step.py"), os.path.join(HERE, "rave_train.py")
VENV_NOTE = "build-cuda/ and .venv-rave-cpu/ (the real RAVE on torch 2.11) are made by benchmarks/rave_cpu_env.sh"


def stats(values):
    """benchlib.summary plus the quartiles and the spread in % of the median."""
    s = benchlib.summary(values)
    if s is None:
        return None
    v = sorted(values)
    s.update(q1=v[len(v) // 4], q3=v[(3 * len(v)) // 4] if len(v) > 1 else v[0],
             spread_pct=100.0 * (s["max"] - s["min"]) / s["median"] if s["median"] else 0.0)
    return s


def fmt_s(st, unit="s", scale=1.0):
    if st is None:
        return "–"
    return f"{st['median'] * scale:.3f} {unit} ({st['min'] * scale:.3f}–{st['max'] * scale:.3f}, n={st['n']})"


def loads_range(loads):
    loads = [x for x in loads if x is not None]
    return f"{min(loads):.1f}–{max(loads):.1f}" if loads else "—"


def per_rep_medians(times, reps):
    """The median of each repetition's steps (times: every repetition's steps, in order)."""
    steps = len(times) // reps
    return [statistics.median(times[i * steps:(i + 1) * steps]) for i in range(reps)]


def strip(o):
    return {k: o[k] for k in ("stats", "command", "loads", "times")}


def host():
    return {"cpu": benchlib.cpu_model(), "nproc": os.cpu_count()}


def native(ctx, *args):
    return [os.path.join(ctx.bin, "rave_bench"), *args]


def interleave(ctx, variants, reps, key="step_seconds", times=None):
    """variants: {name: argv}. Rep 1 of every variant, then rep 2, ...; per variant every step time
    (data[key], or times(name, data)), the loads, the command and the runs."""
    out = {name: {"times": [], "loads": [], "command": None, "runs": []} for name in variants}
    for r in range(reps):
        for name, argv in variants.items():
            data, cmd, load = ctx.json(argv)
            o, t = out[name], times(name, data) if times else data[key]
            o["times"].extend(t)
            o["loads"].append(load[0] if load else None)
            o["command"] = cmd
            o["runs"].append(data)
            print(f"  {name} rep {r + 1}/{reps}: median {statistics.median(t):.3f}s", flush=True)
    for o in out.values():
        o["stats"] = stats(o["times"])
    return out


def rave_step_seconds(name, data):
    """Per-step seconds of a variant: rave_bench's step_seconds, or rave_gpu_step.py's step_ms."""
    if name == "native":
        return data["step_seconds"]
    rec = data["results"][0]
    if rec.get("status") in ("error", "oom"):
        raise RuntimeError(f"rave_gpu_step.py: {rec['error']}")
    return [t / 1e3 for t in rec["phases"][0]["step_ms"]]


def rave_cpu_step(ctx):
    """The native phase-1 step (rave_bench step, torch 2.11's LibTorch) against the real RAVE's own
    training_step (rave_gpu_step.py: its gin config, Lightning's per-batch calls, its optimizer
    step) on the same LibTorch, interleaved, at 1 and 2 threads. 4 × 32768 at full size is below
    v2's and v3's receptive-field crop (27116 samples each side), so both run without it."""
    o, nvr = ctx.o, {}
    for v in o.versions.split(","):
        for threads in (1, 2):
            variants = {"native": native(ctx, "step", "--version", v, "--batch", 4, "--n_signal", 32768, "--threads",
                                         threads, "--steps", o.steps, "--warmup", 1),
                        "rave": [ctx.a.rave_python, "-W", "ignore", RAVE_STEP, "--device", "cpu", "--config", v,
                                 "--threads", threads, "--configs", "b4x32768:fp32:nocrop", "--phase", 1, "--steps",
                                 o.steps, "--warmup", 1, "--replace-unused-imports", "--out", "-"]}
            r = interleave(ctx, variants, o.reps, times=rave_step_seconds)
            phases = {ph: statistics.median(p[ph] for run in r["native"]["runs"] for p in run["phases"])
                      for ph in ("forward", "loss", "backward", "optimizer")}
            env = r["rave"]["runs"][-1]["env"]
            nvr[f"{v}_t{threads}"] = {
                "version": v, "threads": threads, "native": strip(r["native"]), "rave": strip(r["rave"]),
                "ratio_native_over_rave": r["native"]["stats"]["median"] / r["rave"]["stats"]["median"],
                "native_phase_medians": phases,
                "rave_env": {k: env.get(k) for k in ("torch", "acids-rave", "pytorch-lightning", "torchaudio", "numpy",
                                                     "replaced_imports", "pqmf_prototype", "threads")},
                "rave_parameters": r["rave"]["runs"][-1]["results"][0].get("parameters"),
                "native_gemm": r["native"]["runs"][-1].get("gemm"), "host": host()}
    ctx.shared["v2_medians"] = {t: nvr[f"v2_t{t}"]["native"]["stats"]["median"] for t in (1, 2) if f"v2_t{t}" in nvr}
    e0 = next(iter(nvr.values()))
    re_ = e0["rave_env"]
    b = benchlib.Blocks()
    b.text("The Python side is RAVE itself: acids-rave " + str(re_.get("acids-rave")) + " with pytorch-lightning "
           + str(re_.get("pytorch-lightning")) + ", torchaudio " + str(re_.get("torchaudio")) + " and numpy "
           + str(re_.get("numpy")) + ", its model built from its own gin file, stepped through its own "
           "`training_step` with Lightning's per-batch callbacks (`benchmarks/rave_gpu_step.py --device cpu`; "
           "stand-ins for " + (", ".join(re_.get("replaced_imports") or []) or "nothing") + ", which the step "
           "never calls; PQMF prototype: " + str(re_.get("pqmf_prototype")) + "). Both sides run torch "
           + str(re_.get("torch")) + "'s LibTorch on the CPU: the native one is `build-cuda/` "
           "(`scripts/check_cuda_build.sh`), whose binaries load that wheel's libraries"
           + ("; its own products (the convolutions' forward and backward) call "
              + str(e0["native_gemm"]) + ", as train does (models/common/row_linear.h: the wheel's "
              "LibTorch keeps its oneDNN's symbols hidden and hands its own products to MKL)"
              if e0.get("native_gemm") else "") + ". "
           "`benchmarks/rave_cpu_env.sh` makes the venv. That the two compute the same step is "
           "the business of the golden tests (`tests/models/rave_oracle_test.cpp`, docs/rave_fidelity.md).")
    b.text("Phase-1 training step (forward + losses + backward + Adam), batch 4 × 32768, without the "
           "receptive-field crop (at full size it needs more than 32768 samples):")
    rows, targets, derived = [], [], {}
    for k, e in nvr.items():
        ph, reps = e["native_phase_medians"], len(e["native"]["loads"])
        per_rep = [n / r for n, r in zip(per_rep_medians(e["native"]["times"], reps),
                                         per_rep_medians(e["rave"]["times"], reps))]
        derived[k] = {"ratio_native_over_rave": e["ratio_native_over_rave"], "per_repetition": per_rep}
        rows.append([e["version"], e["threads"], fmt_s(e["native"]["stats"]), fmt_s(e["rave"]["stats"]),
                     f"**{e['ratio_native_over_rave']:.3f}**",
                     f"{ph['forward']:.2f} / {ph['loss']:.2f} / {ph['backward']:.2f} / {ph['optimizer']:.2f}",
                     loads_range(e["native"]["loads"] + e["rave"]["loads"])])
        # The goal: 0.6 of RAVE's own step, v2 and v3, 1 and 2 threads, in every repetition.
        targets.append(benchlib.target(
            f"RAVE {e['version']} phase-1 step on the CPU, ours / the real RAVE's training_step, {e['threads']} thread(s)",
            "≤ 0.6", "<=", 0.6, per_rep, value=e["ratio_native_over_rave"], fmt="{:.3f}", over="repetitions"))
    b.table(["model", "threads", "native s/step", "RAVE s/step", "native/RAVE",
             "native phases (fwd / loss / bwd / adam, s)", "load (1-min avg)"], rows)
    b.text("Commands (per repetition, interleaved): " + "; ".join(
        f"{k}: `{e['native']['command']}` ↔ `{e['rave']['command']}`" for k, e in nvr.items()) + ".")
    return dict(blocks=b, raw=nvr, derived=derived, targets=targets, env={"host": e0.get("host")},
                commands=[c for e in nvr.values() for c in (e["native"]["command"], e["rave"]["command"])])


def whole_run(ctx):
    """Native `train` (its loader with the default 2 workers, and with 0 workers = loading on the
    training thread) against the real RAVE's `rave train` (its Lightning loop and DataLoader with
    2 workers, rave_train.py --step_times), v2 at batch 4 × 32768 without the crop, 2 threads, on
    the same database and LibTorch, interleaved. Per-step times include the wait for data on both
    sides: the native one from the timing profile, RAVE's from on_train_batch_end to the next
    on_train_batch_start."""
    db = ctx.audio_db("run_db", 20, "--num_signal", 65536, seed=2)
    steps, reps = ctx.o.whole_steps, ctx.o.reps
    wr = {"steps": steps, "reps": reps, "host": host(), **{n: {"times": [], "data": [], "loads": []}
                                                           for n in ("native", "native_w0", "rave")}}
    env = {"OMP_NUM_THREADS": "2"}  # RAVE's train.py leaves torch's thread count as it finds it
    for r in range(reps):
        for workers, name in ((2, "native"), (0, "native_w0")):
            out = ctx.path(f"runs_{name}_{r}")
            argv = [os.path.join(ctx.bin, "train"), "--device", "cpu", "--config", "v2", "--db_path", db, "--out_path",
                    out, "--n_signal", "32768", "--batch", "4", "--max_steps", str(steps + 1), "--threads", "2",
                    "--data.workers", str(workers), "--train.valid_signal_crop", "false", "--enable_timing_profiling",
                    "--log_every", "1", "--val_every", "1000000", "--save_every", "1000000"]
            load = benchlib.load_avg()
            ctx.run(argv, env=env)
            with open(os.path.join(benchlib.latest_run(out), "timing_profile.json")) as f:
                entries = json.load(f)[1:]  # the first step is warm-up
            wr[name]["times"] += [e["total_batch_time"] for e in entries]
            wr[name]["data"] += [e["data_time"] for e in entries]
            wr[name]["loads"].append(load[0] if load else None)
            wr[name]["command"] = ctx.rel(argv)
        times_json = ctx.path(f"rave_step_times_{r}.json")
        # max_steps + 2: the callback times a batch up to the next one's start, and the first is warm-up.
        argv = [ctx.a.rave_python, "-W", "ignore", RAVE_TRAIN, "--replace-unused-imports", "--step_times", times_json,
                "--", "--config", "v2", "--db_path", db, "--name", "bench", "--out_path", ctx.path(f"runs_rave_{r}"),
                "--n_signal", "32768", "--batch", "4", "--workers", "2", "--gpu", "-1", "--channels", "1",
                "--max_steps", str(steps + 2), "--val_every", "1000000", "--save_every", "1000000", "--noprogress",
                "--override", "RAVE.valid_signal_crop=False"]
        load = benchlib.load_avg()
        p = ctx.run(argv, env=env)
        with open(times_json) as f:
            d = json.load(f)
        wr["rave"]["times"] += d["step_seconds"][1:]
        wr["rave"]["data"] += d["data_seconds"][1:]
        wr["rave"]["loads"].append(load[0] if load else None)
        wr["rave"]["command"] = "OMP_NUM_THREADS=2 " + ctx.rel(argv)
        wr["rave"]["version"] = p.stdout.splitlines()[0] if p.stdout else ""
    for n in ("native", "native_w0", "rave"):
        e = wr[n]
        e.update(stats=stats(e["times"]), data_stats=stats(e["data"]), data_fraction=sum(e["data"]) / sum(e["times"]),
                 mean_examples_per_second=4 * len(e["times"]) / sum(e["times"]))
        e["examples_per_second"] = 4 / e["stats"]["median"]
    wr["ratio_native_over_rave"] = wr["native"]["stats"]["median"] / wr["rave"]["stats"]["median"]
    b = benchlib.Blocks()
    b.text("Whole run including data loading (v2, batch 4 × 32768 without the crop, 2 threads, "
           f"{wr['reps']} interleaved repetitions × {wr['steps']} steps after one warm-up step), on the same "
           "database (written by our `preprocess`, read by RAVE's own `rave/dataset.py`): native `train` with its "
           "loader (default 2 worker threads, and 0 workers = loading on the training thread) vs RAVE's own "
           "`rave train` (its Lightning loop, its DataLoader with `--workers 2` and its augmentations: random "
           "crop, phase mangle, dequantize; `benchmarks/rave_train.py --step_times`). Step times include the "
           "wait for data on both sides: the native one is `data_time` from the timing profile, RAVE's the time "
           "from `on_train_batch_end` to the next `on_train_batch_start`.")
    b.table(["", "examples/s (4 / median step)", "s/step", "data wait per step (median)", "data wait, % of wall",
             "load (1-min avg)", "command"],
            [[label, f"{wr[n]['examples_per_second']:.3f}", fmt_s(wr[n]["stats"]),
              f"{1000 * wr[n]['data_stats']['median']:.2f} ms", f"{100 * wr[n]['data_fraction']:.2f} %",
              loads_range(wr[n]["loads"]), f"`{wr[n]['command']}`"]
             for n, label in (("native", "native, 2 workers"), ("native_w0", "native, 0 workers"),
                              ("rave", "`rave train`, 2 workers"))])
    b.text(f"Native / `rave train` whole-run step ratio (medians): **{wr['ratio_native_over_rave']:.3f}**.")
    # Examples/s ours over RAVE's, repetition by repetition (the same number of steps each).
    per_rep = [r / n for n, r in zip(per_rep_medians(wr["native"]["times"], reps),
                                     per_rep_medians(wr["rave"]["times"], reps))]
    n_eps, r_eps = wr["native"]["examples_per_second"], wr["rave"]["examples_per_second"]
    target = benchlib.target("RAVE v2 whole run on the CPU (data loading included), examples/s: ours / `rave train`",
                             "> 1 (ours higher)", ">", 1.0, per_rep, value=n_eps / r_eps, fmt="{:.2f}",
                             over="repetitions", note=f"{n_eps:.2f} vs {r_eps:.2f} examples/s")
    return dict(blocks=b, raw=wr, derived={"ours_over_rave_examples_per_second_per_repetition": per_rep},
                targets=[target], env={"host": wr["host"]},
                commands=[wr[n]["command"] for n in ("native", "native_w0", "rave")])


def op_counts(ctx):
    data, cmd, _ = ctx.json(native(ctx, "step", "--version", "v2", "--capacity", 8, "--latent_size", 8, "--batch", 2,
                                   "--n_signal", 32768, "--threads", 1, "--steps", 1, "--warmup", 1, "--count_ops"))
    counts = data["op_counts"]
    oc = {"command": cmd, "totals": {ph: c["total"] for ph, c in counts.items()},
          "top": {ph: sorted(c["ops"].items(), key=lambda kv: -kv[1])[:8] for ph, c in counts.items()},
          "to_copy": {ph: c["ops"].get("aten::_to_copy", 0) for ph, c in counts.items()}}
    b = benchlib.Blocks()
    b.text("Operator calls per phase-1 step (RecordFunction counter, tiny v2 shape; used to look for needless copies):")
    b.table(["phase", "calls", "aten::_to_copy", "top operators"],
            [[ph, n, oc["to_copy"].get(ph, 0), ", ".join(f"{k} {v}" for k, v in oc["top"][ph][:5])]
             for ph, n in oc["totals"].items()])
    return dict(blocks=b, raw=oc, commands=[cmd])


def v2_step_medians(ctx):
    """{threads: median s/step} of the native v2 step: this run's, else the last rave_cpu_step result's
    (and where they come from, None for this run's)."""
    if ctx.shared.get("v2_medians"):
        return ctx.shared["v2_medians"], None
    path = os.path.join(ctx.results_dir, "rave_cpu_step.json")
    if not os.path.exists(path):
        path = os.path.join(benchlib.RESULTS_DIR, "rave_cpu_step.json")
    with open(path) as f:
        p = json.load(f)
    medians = {t: p["raw"][f"v2_t{t}"]["native"]["stats"]["median"] for t in (1, 2) if f"v2_t{t}" in p.get("raw", {})}
    return medians, f"the RAVE step section's result of {p['date'][:10]} at {p['environment'].get('git')}"


def flops(ctx):
    fl = {"peak": {}, "efficiency": {}}
    for t in (1, 2):
        d, cmd, load = ctx.json(native(ctx, "peak", "--threads", t, "--size", 2048, "--reps", 5))
        fl["peak"][t] = {"gflops": d["gflops_best"], "command": cmd, "load": load}
    d, cmd, _ = ctx.json(native(ctx, "flops", "--version", "v2", "--batch", 4, "--n_signal", 32768))
    fl["v2"] = {"forward_conv_flops": d["forward_conv_flops"], "step_conv_flops": d["step_conv_flops"],
                "conv_calls": d["conv_calls"], "command": cmd}
    for t, med in v2_step_medians(ctx)[0].items():  # the same build as the step medians it divides
        achieved = d["step_conv_flops"] / med / 1e9
        fl["efficiency"][t] = {"step_seconds": med, "achieved_gflops": achieved,
                               "fraction_of_peak": achieved / fl["peak"][t]["gflops"]}
    b = benchlib.Blocks()
    b.text("Convolution FLOPs of a v2 phase-1 step at 4 × 32768, counted from `aten::convolution` input shapes "
           f"({fl['v2']['conv_calls']} calls): forward {fl['v2']['forward_conv_flops'] / 1e9:.2f} GFLOP, "
           f"step ≈ 3 × forward = {fl['v2']['step_conv_flops'] / 1e9:.2f} GFLOP (backward = grad-input + grad-weight; "
           f"STFTs, element-wise ops and Adam not counted). Command: `{fl['v2']['command']}`.")
    rows = []
    for t, p in fl["peak"].items():
        e = fl["efficiency"].get(t)
        rows.append([t, f"{p['gflops']:.1f}"] + ([f"{e['step_seconds']:.3f}", f"{e['achieved_gflops']:.1f}",
                                                  f"{100 * e['fraction_of_peak']:.1f} %"] if e else ["–", "–", "–"]))
    b.table(["threads", "sgemm peak (torch::mm 2048², GFLOP/s)", "v2 step s (median)", "achieved conv GFLOP/s",
             "fraction of peak"], rows)
    b.text("Peak commands: " + ", ".join(f"`{p['command']}`" for p in fl["peak"].values()) + ".")
    return dict(blocks=b, raw=fl, commands=[fl["v2"]["command"]] + [p["command"] for p in fl["peak"].values()])


def scaling(ctx):
    # 1 thread: on a shared machine 2 OpenMP threads are slowed down by oversubscription far more
    # than the batch/length effect being measured. v2's 2048-point multiband STFT needs band signals
    # longer than 1024 samples, i.e. n_signal > 16384 (16 bands): 8192 and 16384 cannot train.
    sc = {"capacity": 16, "threads": 1, "batch": [], "n_signal": [],
          "n_signal_note": "8192 and 16384 are below v2's minimum (2048-point STFT on 16 bands needs n_signal > 16384)"}
    for key, b_, n in [("batch", b_, 32768) for b_ in (1, 2, 4, 8)] + [("n_signal", 2, n) for n in (32768, 65536, 131072)]:
        r = interleave(ctx, {"x": native(ctx, "step", "--version", "v2", "--capacity", 16, "--batch", b_, "--n_signal",
                                         n, "--threads", 1, "--steps", ctx.o.steps, "--warmup", 1)}, ctx.o.reps)["x"]
        sc[key].append({"batch": b_, "n_signal": n, **strip(r)})
    b = benchlib.Blocks()
    b.text(f"v2 structure at capacity {sc['capacity']}, phase-1 step, {sc['threads']} thread(s).")
    b.table(["batch", "n_signal", "s/step", "s per example·32768 samples", "command"],
            [[e["batch"], e["n_signal"], fmt_s(e["stats"]),
              f"{e['stats']['median'] / (e['batch'] * e['n_signal'] / 32768):.4f}", f"`{e['command']}`"]
             for e in sc["batch"] + sc["n_signal"]])
    b.text(f"n_signal: {sc['n_signal_note']}.")
    return dict(blocks=b, raw=sc, commands=[e["command"] for e in sc["batch"] + sc["n_signal"]])


def timed(argvs):
    """Seconds to run every argv of argvs, one after the other."""
    t0 = time.time()
    for argv in argvs:
        subprocess.run([str(x) for x in argv], check=True, capture_output=True)
    return time.time() - t0


def data_path(ctx):
    dp, batches = {}, ctx.o.batches
    loader = os.path.join(ctx.bin, "loader_bench")
    # Loader vs consumption at the benchmark shape (4 × 32768) and at v2's own (8 × 131072), then at
    # v2's shape from a lazy database (preprocess --lazy): decoded files kept, and none.
    for key, b_, n, extra in ((f"loader_4x32768", 4, 32768, []), ("loader_8x131072", 8, 131072, []),
                              ("loader_8x131072_lazy", 8, 131072, ["--lazy"]),
                              ("loader_8x131072_lazy_nocache", 8, 131072, ["--lazy", "--lazy_cache_mb", 0])):
        d, cmd, load = ctx.json([loader, "--batch", b_, "--n_signal", n, "--batches", batches, "--demo_seconds", 20,
                                 *extra])
        dp[key] = {"command": cmd, "runs": d["runs"], "load": load}
    medians, source = v2_step_medians(ctx)
    if medians:  # the faster native v2 step
        t, med = min(medians.items(), key=lambda kv: kv[1])
        dp.update(v2_step_examples_per_second_4x32768=4.0 / med, v2_step_threads=t)
        if source:
            dp["v2_step_source"] = source
    # Preprocess throughput vs sox / ffmpeg decoding the same files.
    audio = benchlib.demo_audio(ctx.bin, ctx.path("pre_audio"), ctx.o.audio_seconds)
    files = sorted(glob.glob(os.path.join(audio, "**", "*.*"), recursive=True))
    total = sum(float(ctx.run(["soxi", "-D", f]).stdout or 0) for f in files)
    dp.update(audio_files=len(files), audio_seconds=total)
    ffmpeg, pre, sox, ff = shutil.which("ffmpeg"), [], [], []
    pre_argv = [os.path.join(ctx.bin, "preprocess"), "--input_path", audio, "--output_path", ctx.path("pre_db"),
                "--num_signal", "131072"]
    for _ in range(ctx.o.reps):
        pre.append(timed([pre_argv]))
        shutil.rmtree(ctx.path("pre_db"), ignore_errors=True)
        sox.append(timed([["sox", f, "-t", "s16", "-r", "44100", "-c", "1", "/dev/null"] for f in files]))
        if ffmpeg:
            ff.append(timed([[ffmpeg, "-v", "quiet", "-i", f, "-f", "s16le", "-ac", "1", "-ar", "44100", "-y",
                              "/dev/null"] for f in files]))
    for key, t, cmd in (("preprocess", pre, ctx.rel(pre_argv)),
                        ("sox", sox, "for f in $TMP/pre_audio/*: sox $f -t s16 -r 44100 -c 1 /dev/null"),
                        ("ffmpeg", ff, "for f in $TMP/pre_audio/*: ffmpeg -i $f -f s16le -ac 1 -ar 44100 -y /dev/null")):
        dp[key] = ({"command": cmd, "stats": stats(t), "audio_s_per_wall_s": total / statistics.median(t)} if t else
                   {"skipped": "ffmpeg is not installed (run.sh installs it with apt-get when it can)"})
    b, rows, ratios, lazy_ratios = benchlib.Blocks(), [], [], []
    cons = dp.get("v2_step_examples_per_second_4x32768")
    for k in ("loader_4x32768", "loader_8x131072"):
        for run in dp[k]["runs"]:
            rows.append([f"loader {k[7:]}, {run['workers']} worker(s)", f"{run['examples_per_second']:.1f} examples/s",
                         f"`{dp[k]['command']}`"])
            ratios += [run["examples_per_second"] / cons] if cons else []
    for k, what in (("loader_8x131072_lazy", "lazy database, 512 MiB of decoded files kept"),
                    ("loader_8x131072_lazy_nocache", "lazy database, every draw decodes its file")):
        for run in dp[k]["runs"]:
            vs = f" ({run['examples_per_second'] / cons:.0f}× the step's consumption)" if cons else ""
            rows.append([f"loader 8x131072, {what}, {run['workers']} worker(s)",
                         f"{run['examples_per_second']:.1f} examples/s{vs}", f"`{dp[k]['command']}`"])
            lazy_ratios += [run["examples_per_second"] / cons] if cons else []
    if cons:
        rows.append([f"v2 phase-1 step consumption, 4 × 32768, {dp['v2_step_threads']} thread(s) (fastest native "
                     "median)", f"{cons:.2f} examples/s",
                     f"(native step median of {dp.get('v2_step_source', 'the RAVE step section')})"])
    for key, label in (("preprocess", f"preprocess ({dp['audio_files']} files, {dp['audio_seconds']:.0f} s of audio)"),
                       ("sox", "sox decode of the same files")):
        rows.append([label, f"{dp[key]['audio_s_per_wall_s']:.0f} audio s / wall s ({fmt_s(dp[key]['stats'])})",
                     f"`{dp[key]['command']}`"])
    rows.append(["ffmpeg decode of the same files", f"{dp['ffmpeg']['audio_s_per_wall_s']:.0f} audio s / wall s",
                 f"`{dp['ffmpeg']['command']}`"] if "stats" in dp["ffmpeg"] else
                ["ffmpeg", f"skipped: {dp['ffmpeg']['skipped']}", ""])
    b.table(["measurement", "figure", "command"], rows)
    targets = []
    if ratios:
        targets.append(benchlib.target("Loader throughput / v2 step consumption", "≥ 20×", ">=", 20.0, ratios,
                                       value=min(ratios), fmt="{:.0f}×", over="loader rows", note="slowest loader row"))
    if lazy_ratios:
        targets.append(benchlib.target("Lazy database loader throughput / v2 step consumption", "≥ 20×", ">=", 20.0,
                                       lazy_ratios, value=min(lazy_ratios), fmt="{:.0f}×", over="lazy loader rows",
                                       note="slowest lazy row (every draw decoding its file)"))
    return dict(blocks=b, raw=dp, targets=targets,
                derived={"loader_over_consumption": ratios, "lazy_loader_over_consumption": lazy_ratios})


def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()


def defaults(ctx):
    df, train = {}, os.path.join(ctx.bin, "train")
    step = lambda m: native(ctx, "step", "--version", "v2", "--batch", 4, "--n_signal", 32768, "--threads", 2,  # noqa: E731
                            "--steps", ctx.o.steps, "--warmup", 1, "--mkldnn", m)
    df["mkldnn"] = {k: strip(v) for k, v in interleave(ctx, {"mkldnn_on": step(1), "mkldnn_off": step(0)},
                                                       ctx.o.reps).items()}
    d, cmd, load = ctx.json(native(ctx, "validate", "--version", "v2", "--batch", 4, "--n_signal", 32768, "--threads", 2,
                                   "--reps", ctx.o.validate_reps))
    df["validation_guard"] = {"command": cmd, "load": load, "no_grad": stats(d["no_grad_seconds"]),
                              "inference_mode": stats(d["inference_mode_seconds"])}
    # Threads per config: steps/s of short runs at 1 and 2 intra-op threads, interleaved, under
    # OpenMP's own default wait policy (spin, then sleep) and passive waiting.
    thr_db, neural_db, thr = ctx.audio_db("thr_db", 20, "--num_signal", 16384, seed=4), ctx.neural_db("thr_ndb", 182, 200), {}
    for rep in range(2):
        for cfg, db, steps, every in (("tiny_rave", thr_db, 90, 30), ("s5_maze", neural_db, 90, 30),
                                      ("foundational", neural_db, 30, 10)):
            for pol in ("default", "PASSIVE"):
                env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
                env.update({"OMP_WAIT_POLICY": pol} if pol != "default" else {})
                for t in (1, 2):
                    argv = [train, "--config", cfg, "--db_path", db, "--out_path", ctx.path(f"thr_runs_{cfg}_{t}"),
                            "--max_steps", str(steps), "--threads", str(t), "--log_every", str(every),
                            "--val_every", "1000000", "--save_every", "1000000"]
                    load = benchlib.load_avg()
                    p = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
                    e = thr.setdefault(cfg, {}).setdefault(f"{pol}/{t}", {"rates": [], "loads": []})
                    e["rates"] += [float(m) for m in re.findall(r"\| ([0-9.eE+-]+) steps/s", p.stdout)][1:]  # 1st: warm-up
                    e["loads"].append(load[0] if load else None)
                    e["command"] = ctx.rel(argv)
    df["threads"] = thr
    # What `train` picks by itself (threads line) on a tiny run.
    argv = [train, "--config", "tiny_rave", "--db_path", thr_db, "--out_path", ctx.path("def_runs"), "--max_steps", "2"]
    m = re.search(r"(\d+) threads?\b", ctx.run(argv).stdout)
    df.update(train_default_threads=int(m.group(1)) if m else None, train_default_threads_command=ctx.rel(argv),
              print_config_workers=sh(f"{train} --config v2 --print_config | grep -E '^workers|^threads'"))
    env = {"blas_alternative": sh("update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | "
                                  "grep -m1 '^Value' | sed 's/Value: //'"),
           "ldd_blas": sh(f"ldd {train} 2>/dev/null | grep -i -E 'blas|lapack|gomp' | sed 's/ (0x.*//'"),
           "ldd_torch_blas": sh("ldd $(ls /usr/lib/x86_64-linux-gnu/libtorch_cpu.so* | head -1) | "
                                "grep -i -E 'blas|gomp' | sed 's/ (0x.*//'"),
           "python_torch": sh("/usr/bin/python3 -c 'import torch; print(torch.__version__, torch.get_num_threads(), "
                              "torch.backends.mkldnn.is_available())'")}
    flat = lambda s: (s or "").replace("\n", " ").replace("\t", "")  # noqa: E731
    b = benchlib.Blocks()
    b.text(f"BLAS: `update-alternatives` libblas.so.3 → `{env['blas_alternative']}`; `ldd build/bin/train`: "
           f"`{flat(env['ldd_blas'] or '(no direct BLAS dependency)')}`; libtorch_cpu: `{flat(env['ldd_torch_blas'])}`.")
    b.text(f"Threads: `train --config tiny_rave` used {df['train_default_threads']} thread(s) (its `train.threads = 1`) "
           f"on this {os.cpu_count()}-core machine (`{df['train_default_threads_command']}`); `train.threads = 0` (the "
           "full-size configs) means all cores; Debian's Python torch starts with "
           f"`{env['python_torch']}` (version, threads, mkldnn).")
    b.text("Loader workers (resolved v2 config): `" + " / ".join(
        line.split("#")[0].strip() for line in df["print_config_workers"].splitlines()) + "`.")
    mk, vg = df["mkldnn"], df["validation_guard"]
    b.text(f"oneDNN (mkldnn) for convolutions, v2 step 4 × 32768, 2 threads: on {fmt_s(mk['mkldnn_on']['stats'])}, "
           f"off {fmt_s(mk['mkldnn_off']['stats'])} (`{mk['mkldnn_on']['command']}` ↔ `--mkldnn 0`).")
    b.text(f"Validation pass (v2, 4 × 32768, 2 threads): NoGradGuard {fmt_s(vg['no_grad'])}, InferenceMode "
           f"{fmt_s(vg['inference_mode'])} (`{vg['command']}`).")
    b.text("Channels-last: a memory format for 4-D (NCHW) tensors; the RAVE autoencoder is all 1-D convolutions "
           "(3-D tensors), so it does not apply to a phase-1 step.")
    b.text("Intra-op threads per config under both OpenMP wait policies (steps/s of short `train` runs, median "
           "over logging intervals after the first, 2 interleaved repetitions): libgomp's default (threads spin "
           "a while, then sleep) and `OMP_WAIT_POLICY=PASSIVE` (sleep at once; what the scripts export, and what "
           "a shared machine needs).")
    config_default, rows = {"tiny_rave": "1", "s5_maze": "1", "foundational": "0 (all cores)"}, []
    for cfg, v in thr.items():
        med = {k: statistics.median(e["rates"]) for k, e in v.items()}
        cell = lambda k: f"**{med[k]:.1f}**" if med[k] == max(med.values()) else f"{med[k]:.1f}"  # noqa: E731
        rows.append([cfg, cell("default/1"), cell("default/2"), cell("PASSIVE/1"), cell("PASSIVE/2"),
                     config_default[cfg], loads_range([x for e in v.values() for x in e["loads"]]),
                     f"`{v['default/1']['command']}`"])
    b.table(["config", "default, 1 thread", "default, 2 threads", "PASSIVE, 1 thread", "PASSIVE, 2 threads",
             "config default", "load (1-min avg)", "command (1 thread)"], rows)
    return dict(blocks=b, raw=df, env=env)


def step_ab(ctx):
    """Old build against new build of the same RAVE step, interleaved: `rave_bench step --version v2
    --batch 4 --n_signal 32768 --threads 1`, one process per repetition, old and new alternating, the
    load before each; compared: the median over repetitions of each run's median step time. The old
    build is made (Release, through ccache) in a detached worktree of `old` under /tmp, unless
    --old_bin names an old rave_bench; the new one is --build's (built first unless --no_build)."""
    o, root = ctx.o, benchlib.ROOT
    git = lambda *a: subprocess.run(["git", "-C", root, *a], capture_output=True, text=True, check=True).stdout.strip()  # noqa: E731
    old_sha, new_sha = (git("rev-parse", "--short", o.old) if not o.old_bin else "OLD"), git("rev-parse", "--short", "HEAD")
    new_sha += "+changes" if git("status", "--porcelain", "--untracked-files=no") else ""
    old_bin = o.old_bin
    if not old_bin:
        tree = f"/tmp/step_ab_{old_sha}"
        if not os.path.isdir(tree):
            git("worktree", "add", "--detach", tree, old_sha)
        env = {"CCACHE_SLOPPINESS": "pch_defines,time_macros,include_file_mtime,include_file_ctime"}
        for src, build in ((tree, f"{tree}/build"),) + (() if o.no_build else ((root, ctx.build),)):
            ctx.run(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release"], env=env)
            ctx.run(["cmake", "--build", build, "-j", "2", "--target", "rave_bench"], env=env)
        old_bin = f"{tree}/build/bin/rave_bench"
    step = f"rave_bench step --version v2 --batch 4 --n_signal 32768 --threads 1 --warmup {o.warmup} --steps {o.steps}"
    raw = {"old": [], "new": []}
    for rep in range(1, o.reps + 1):
        for arm, binary in (("old", old_bin), ("new", os.path.join(ctx.bin, "rave_bench"))):
            times, _, load = ctx.json([binary] + step.split()[1:])
            raw[arm].append({"rep": rep, "step_seconds": times["step_seconds"], "load_before": load,
                             "run_median": statistics.median(times["step_seconds"])})
    med = {arm: [r["run_median"] for r in raw[arm]] for arm in raw}
    ratio = statistics.median(med["new"]) / statistics.median(med["old"])
    b = benchlib.Blocks()
    b.text(f"`{step}` (phase-1 forward, losses, backward, Adam), one process per repetition, old and new "
           f"alternating, {o.reps} repetitions each.")
    b.table(["build", "median s/step (min–max over repetitions)", "load before each run"],
            [[f"{arm} `{sha}`", benchlib.spread(med[arm], "{:.3f}", bold=True),
              " ".join(f"{r['load_before'][0]:.2f}" for r in raw[arm] if r["load_before"])]
             for arm, sha in (("old", old_sha), ("new", new_sha))])
    b.text(f"new/old = **{ratio:.3f}**.")
    return dict(blocks=b, raw={"runs": raw}, env={"old": old_sha, "new": new_sha},
                derived={"old": benchlib.summary(med["old"]), "new": benchlib.summary(med["new"]), "new_over_old": ratio},
                commands=[f"OLD/bin/{step}", f"build/bin/{step}"])


def rave_configs(ctx):
    """Every RAVE configuration at full size through `train --smoke_test`: trained parameters
    (`--summary`), the median step time of phase 1 and of phase 2 (a discriminator update included),
    the peak resident memory, and RAVE's own stated minimum GPU memory. Minutes per config."""
    o, train, runs = ctx.o, os.path.join(ctx.bin, "train"), []
    db = ctx.audio_db("db", o.audio_seconds, "--num_signal", o.n_signal, "--channels", 1)
    for stack in o.stacks.split():
        args = [x for name in stack.split("+") for x in ("--config", name)]
        summary = ctx.run([train, *args, "--summary"]).stdout
        params = re.search(r"^total trained[^:]*:\s*(.*)$", summary, re.M).group(1).strip()
        gpu = next((m.group(1) for name in stack.split("+") for m in [re.search(
            r'^rave_gpu_memory = "(.*)"', open(os.path.join(benchlib.ROOT, "configs", f"{name}.toml")).read(), re.M)]
            if m), "")
        log = ctx.run([train, *args, "--db_path", db, "--out_path", ctx.path("runs"), "--smoke_test", "--batch",
                       o.batch, "--n_signal", o.n_signal, "--threads", o.threads, "--workers", 1]).stdout
        find = lambda rx: float(re.search(rx, log, re.M).group(1))  # noqa: E731
        runs.append({"config": stack, "parameters_trained": params,
                     "phase_1_s_per_step": find(r"^  phase 1 .*then median ([0-9.]*) s/step"),
                     "phase_2_s_per_step": find(r"^  phase 2 \(adversarial\) .*then median ([0-9.]*) s/step"),
                     "peak_rss_mib": find(r"^  peak memory: ([0-9.]*) MiB resident"), "rave_gpu_memory": gpu})
        shutil.rmtree(ctx.path("runs"), ignore_errors=True)
    b = benchlib.Blocks()
    b.text("Each row is `train --config … --smoke_test` at full size: median step time of phase 1 and of phase 2 "
           "(RAVE's adversarial phase, a discriminator update included) after one warm-up step each, and the peak "
           "resident memory of the whole smoke run (validation and the final checkpoint included). RAVE's minimum "
           "GPU memory is what its README states for the base config (batch 8 on a GPU): a different quantity, "
           "shown for scale.")
    b.table(["config", "parameters trained", "phase 1 step", "phase 2 step", "peak RSS", "RAVE's minimum GPU memory"],
            [[f"`{r['config'].replace('+', ' + ')}`", r["parameters_trained"], f"{r['phase_1_s_per_step']:.3f} s",
              f"{r['phase_2_s_per_step']:.3f} s", f"{r['peak_rss_mib']:.1f} MiB", r["rave_gpu_memory"] or "(as its base)"]
             for r in runs])
    return dict(blocks=b, raw={"runs": runs},
                commands=[f"build/bin/train --config CONFIG [--config MIXIN] --db_path DB --smoke_test --batch {o.batch} "
                          f"--n_signal {o.n_signal} --threads {o.threads} --workers 1"])


def rave_parity(ctx):
    """The same small v2 trained by RAVE's own `rave train` and by ours (rave_parity.py, which writes
    its result itself), in the oracle venv .venv-rave (tests/oracle/run.sh makes it)."""
    ctx.run([os.path.join(benchlib.ROOT, ".venv-rave", "bin", "python"), "-W", "ignore",
             os.path.join(HERE, "rave_parity.py"), "--bin", ctx.bin, "--work", ctx.path("parity"), "--results_dir",
             ctx.results_dir, "--steps", ctx.o.steps, "--runs", ctx.o.runs], log_to=ctx.path("parity.log"))


CUDA = dict(cuda=True, needs_runner=("rave_python",), note=VENV_NOTE, core=True)
BENCHMARKS = [
    dict(key="rave", name="rave_cpu_step", title="Native vs the real RAVE: same model, same LibTorch", run=rave_cpu_step,
         analysis="docs/perf/rave_cpu.md", bins=("rave_bench",), options=dict(versions="v2,v3", reps=3, steps=3),
         quick=dict(versions="v2", reps=2, steps=1), **CUDA),
    dict(key="ops", name="op_counts", title="Operator calls per step", run=op_counts, bins=("rave_bench",), core=True),
    dict(key="flops", name="compute_efficiency", title="Compute efficiency", run=flops, bins=("rave_bench",), **CUDA),
    dict(key="scaling", name="scaling", title="Scaling", run=scaling, bins=("rave_bench",), core=True,
         options=dict(reps=3, steps=3), quick=dict(reps=1, steps=2)),
    dict(key="data", name="data_path", title="Data path", run=data_path, bins=("preprocess", "loader_bench"), core=True,
         options=dict(batches=16, audio_seconds=60, reps=3), quick=dict(batches=6, audio_seconds=30, reps=2)),
    dict(key="whole", name="rave_cpu_whole_run", title="Native vs the real RAVE: whole run", run=whole_run,
         bins=("train", "preprocess"), options=dict(reps=3, whole_steps=12), quick=dict(reps=2, whole_steps=8), **CUDA),
    dict(key="defaults", name="defaults", title="Defaults", run=defaults, analysis="docs/perf/defaults.md", core=True,
         bins=("train", "preprocess", "rave_bench"), options=dict(reps=3, steps=2, validate_reps=5),
         quick=dict(reps=2, steps=1, validate_reps=3)),
    dict(key="step_ab", name="step_ab", title="Refactor guard: RAVE v2 step, old build vs new build", run=step_ab,
         script="step_ab.sh", bins=("rave_bench",), args=("old",), env=("reps", "steps", "warmup"),
         options=dict(old=os.environ.get("STEP_AB_OLD", "HEAD~1"), old_bin="", no_build=False, reps=5, steps=4, warmup=3),
         quick=dict(reps=3)),
    dict(key="rave_configs", name="rave_configs", title="RAVE's configurations on the CPU", run=rave_configs,
         script="rave_configs.sh", bins=("train", "preprocess"),
         options=dict(batch=2, n_signal=131072, threads=0, audio_seconds=60, stacks=(
             "v1 v2 v2_small v2_nopqmf v3 discrete discrete_v3 hybrid onnx raspberry v2+causal v2+noise v2+snake "
             "v2+adain v2+descript_discriminator v2+wasserstein v2+spherical v2+spectral_discriminator discrete+causal")),
         # --quick: one small configuration at a short length, to see the driver work (not a figure to keep).
         quick=dict(stacks="v2_small", n_signal=65536, audio_seconds=10)),
    dict(key="rave_parity", name="rave_parity", title="RAVE training parity", run=rave_parity, script="rave_parity.sh",
         bins=("train", "preprocess"), needs=(".venv-rave/bin/python",), options=dict(steps=2000, runs=2),
         quick=dict(steps=400), note="the oracle venv .venv-rave/ is made by tests/oracle/run.sh; the result is "
         "trained on a GPU machine (docs/offline_gpu.md)"),
]
