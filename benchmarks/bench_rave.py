"""The RAVE benchmarks' drivers (bench.py; standard library only). The comparisons with the real
RAVE (acids-rave 2.3.1: rave_gpu_step.py, rave_train.py in benchmarks/rave_cpu_env.sh's venv on torch
2.11.0) run the native side built against that same LibTorch (--cuda_build); the others time the main
build. Also here: the refactor guard, every RAVE configuration at full size, training parity."""
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import time

import benchlib

HERE, S = benchlib.HERE, benchlib.sections()
HOST = {"cpu": benchlib.cpu_model(), "nproc": os.cpu_count()}
RAVE_STEP, RAVE_TRAIN = os.path.join(HERE, "rave_gpu_step.py"), os.path.join(HERE, "rave_train.py")


def stats(values):
    """benchlib.summary plus the quartiles and the spread in % of the median."""
    s, v = benchlib.summary(values), sorted(values)
    return s and dict(s, q1=v[len(v) // 4], q3=v[(3 * len(v)) // 4] if len(v) > 1 else v[0],
                      spread_pct=100.0 * (s["max"] - s["min"]) / s["median"] if s["median"] else 0.0)


def fmt_s(st):
    return "–" if st is None else f"{st['median']:.3f} s ({st['min']:.3f}–{st['max']:.3f}, n={st['n']})"


def loads_range(loads):
    loads = [x for x in loads if x is not None]
    return f"{min(loads):.1f}–{max(loads):.1f}" if loads else "—"


def per_rep_medians(times, reps):
    """The median of each repetition's steps (times: every repetition's steps, in order)."""
    steps = len(times) // reps
    return [statistics.median(times[i * steps:(i + 1) * steps]) for i in range(reps)]


def strip(o):
    return {k: o[k] for k in ("stats", "command", "loads", "times")}


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
    """rave_bench step against rave_gpu_step.py on the same LibTorch, interleaved, 1 and 2 threads; 4 ×
    32768 at full size is below v2's and v3's receptive-field crop (27116 samples each side): no crop."""
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
                "native_gemm": r["native"]["runs"][-1].get("gemm"), "host": dict(HOST)}
    ctx.shared["v2_medians"] = {t: nvr[f"v2_t{t}"]["native"]["stats"]["median"] for t in (1, 2) if f"v2_t{t}" in nvr}
    e0 = next(iter(nvr.values()))
    re_ = e0["rave_env"]
    b = benchlib.Blocks(S["rave"]["text"])
    b.say("python_side", e=re_, replaced=", ".join(re_.get("replaced_imports") or []) or "nothing",
          gemm=b.line("gemm", gemm=e0["native_gemm"]) if e0.get("native_gemm") else "")
    b.say("step")
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
        targets.append(benchlib.target(b.line("target", **e), "≤ 0.6", "<=", 0.6, per_rep,
                                       value=e["ratio_native_over_rave"], fmt="{:.3f}", over="repetitions"))
    b.table("columns", rows)
    b.text("Commands (per repetition, interleaved): " + "; ".join(
        f"{k}: `{e['native']['command']}` ↔ `{e['rave']['command']}`" for k, e in nvr.items()) + ".")
    return dict(blocks=b, raw=nvr, derived=derived, targets=targets, env={"host": e0.get("host")},
                commands=[c for e in nvr.values() for c in (e["native"]["command"], e["rave"]["command"])])


def whole_run(ctx):
    """`train` (2 loader workers, and 0) against `rave train` (rave_train.py --step_times), interleaved
    ([whole.text] says what is measured)."""
    db = ctx.audio_db("run_db", 20, "--num_signal", 65536, seed=2)
    steps, reps = ctx.o.whole_steps, ctx.o.reps
    wr = {"steps": steps, "reps": reps, "host": dict(HOST), **{n: {"times": [], "data": [], "loads": []}
                                                           for n in ("native", "native_w0", "rave")}}
    env = {"OMP_NUM_THREADS": "2"}  # RAVE's train.py leaves torch's thread count as it finds it
    for r in range(reps):
        for workers, name in ((2, "native"), (0, "native_w0")):
            out = ctx.path(f"runs_{name}_{r}")
            argv = [os.path.join(ctx.bin, "train"), "--device", "cpu", "--config", "v2", "--db_path", db, "--out_path",
                    out, "--n_signal", "32768", "--batch", "4", "--max_steps", str(steps + 1), "--threads", "2",
                    "--data.workers", str(workers), "--train.valid_signal_crop", "false", "--enable_timing_profiling",
                    "--log_every", "1", "--val_every", "1000000", "--save_every", "1000000"]
            load = ctx.run(argv, env=env).load
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
        p = ctx.run(argv, env=env)
        with open(times_json) as f:
            d = json.load(f)
        wr["rave"]["times"] += d["step_seconds"][1:]
        wr["rave"]["data"] += d["data_seconds"][1:]
        wr["rave"]["loads"].append(p.load[0] if p.load else None)
        wr["rave"]["command"] = "OMP_NUM_THREADS=2 " + ctx.rel(argv)
        wr["rave"]["version"] = p.stdout.splitlines()[0] if p.stdout else ""
    for n in ("native", "native_w0", "rave"):
        e = wr[n]
        e.update(stats=stats(e["times"]), data_stats=stats(e["data"]), data_fraction=sum(e["data"]) / sum(e["times"]),
                 mean_examples_per_second=4 * len(e["times"]) / sum(e["times"]))
        e["examples_per_second"] = 4 / e["stats"]["median"]
    wr["ratio_native_over_rave"] = wr["native"]["stats"]["median"] / wr["rave"]["stats"]["median"]
    b = benchlib.Blocks(S["whole"]["text"])
    b.say("intro", reps=wr["reps"], steps=wr["steps"])
    b.table("columns", [[label, f"{wr[n]['examples_per_second']:.3f}", fmt_s(wr[n]["stats"]),
              f"{1000 * wr[n]['data_stats']['median']:.2f} ms", f"{100 * wr[n]['data_fraction']:.2f} %",
              loads_range(wr[n]["loads"]), f"`{wr[n]['command']}`"]
             for n, label in (("native", "native, 2 workers"), ("native_w0", "native, 0 workers"),
                              ("rave", "`rave train`, 2 workers"))])
    b.say("ratio", ratio=wr["ratio_native_over_rave"])
    # Examples/s ours over RAVE's, repetition by repetition (the same number of steps each).
    per_rep = [r / n for n, r in zip(per_rep_medians(wr["native"]["times"], reps),
                                     per_rep_medians(wr["rave"]["times"], reps))]
    n_eps, r_eps = wr["native"]["examples_per_second"], wr["rave"]["examples_per_second"]
    target = benchlib.target(b.line("target"), "> 1 (ours higher)", ">", 1.0, per_rep, value=n_eps / r_eps,
                             fmt="{:.2f}", over="repetitions", note=f"{n_eps:.2f} vs {r_eps:.2f} examples/s")
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
    b = benchlib.Blocks(S["ops"]["text"]).say("intro")
    b.table("columns", [[ph, n, oc["to_copy"].get(ph, 0), ", ".join(f"{k} {v}" for k, v in oc["top"][ph][:5])]
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
    b = benchlib.Blocks(S["flops"]["text"])
    b.say("flops", v=fl["v2"], forward=fl["v2"]["forward_conv_flops"] / 1e9, step=fl["v2"]["step_conv_flops"] / 1e9)
    rows = []
    for t, p in fl["peak"].items():
        e = fl["efficiency"].get(t)
        rows.append([t, f"{p['gflops']:.1f}"] + ([f"{e['step_seconds']:.3f}", f"{e['achieved_gflops']:.1f}",
                                                  f"{100 * e['fraction_of_peak']:.1f} %"] if e else ["–", "–", "–"]))
    b.table("columns", rows)
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
    b = benchlib.Blocks(S["scaling"]["text"]).say("intro", sc=sc)
    b.table("columns", [[e["batch"], e["n_signal"], fmt_s(e["stats"]),
              f"{e['stats']['median'] / (e['batch'] * e['n_signal'] / 32768):.4f}", f"`{e['command']}`"]
                        for e in sc["batch"] + sc["n_signal"]])
    b.say("note", sc=sc)
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
    for key, b_, n, extra in (("loader_4x32768", 4, 32768, []), ("loader_8x131072", 8, 131072, []),
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
    return data_path_section(dp)


def data_path_section(dp):
    """data_path's section from its figures: the loader rows against the v2 step's consumption."""
    rows, ratios, cons = [], {"": [], "lazy": []}, dp.get("v2_step_examples_per_second_4x32768")
    for k, what in (("loader_4x32768", ""), ("loader_8x131072", ""),
                    ("loader_8x131072_lazy", ", lazy database, 512 MiB of decoded files kept"),
                    ("loader_8x131072_lazy_nocache", ", lazy database, every draw decodes its file")):
        for run in dp[k]["runs"]:
            eps, lazy = run["examples_per_second"], "lazy" if what else ""
            vs = f" ({eps / cons:.0f}× the step's consumption)" if cons and lazy else ""
            rows.append([f"loader {k.split('_')[1]}{what}, {run['workers']} worker(s)", f"{eps:.1f} examples/s{vs}",
                         f"`{dp[k]['command']}`"])
            ratios[lazy] += [eps / cons] if cons else []
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
    targets = [benchlib.target(f"{label} throughput / v2 step consumption", "≥ 20×", ">=", 20.0, ratios[lazy],
                               value=min(ratios[lazy]), fmt="{:.0f}×", over=f"{lazy} loader rows".lstrip(), note=note)
               for lazy, label, note in (("", "Loader", "slowest loader row"),
                                         ("lazy", "Lazy database loader", "slowest lazy row (every draw decoding its file)"))
               if ratios[lazy]]
    return dict(blocks=benchlib.Blocks().table(["measurement", "figure", "command"], rows), raw=dp, targets=targets,
                derived={"loader_over_consumption": ratios[""], "lazy_loader_over_consumption": ratios["lazy"]})


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
                for t in (1, 2):
                    argv = [train, "--config", cfg, "--db_path", db, "--out_path", ctx.path(f"thr_runs_{cfg}_{t}"),
                            "--max_steps", str(steps), "--threads", str(t), "--log_every", str(every),
                            "--val_every", "1000000", "--save_every", "1000000"]
                    p = ctx.run(argv, env={"OMP_WAIT_POLICY": None if pol == "default" else pol})
                    e = thr.setdefault(cfg, {}).setdefault(f"{pol}/{t}", {"rates": [], "loads": []})
                    e["rates"] += [float(m) for m in re.findall(r"\| ([0-9.eE+-]+) steps/s", p.stdout)][1:]  # 1st: warm-up
                    e["loads"].append(p.load[0] if p.load else None)
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
    b = benchlib.Blocks(S["defaults"]["text"])
    b.say("blas", e=env, ldd=flat(env["ldd_blas"] or "(no direct BLAS dependency)"), torch=flat(env["ldd_torch_blas"]))
    b.say("threads", d=df, e=env, nproc=os.cpu_count())
    b.text("Loader workers (resolved v2 config): `" + " / ".join(
        line.split("#")[0].strip() for line in df["print_config_workers"].splitlines()) + "`.")
    mk, vg = df["mkldnn"], df["validation_guard"]
    b.say("mkldnn", on=fmt_s(mk["mkldnn_on"]["stats"]), off=fmt_s(mk["mkldnn_off"]["stats"]),
          command=mk["mkldnn_on"]["command"])
    b.say("guard", no_grad=fmt_s(vg["no_grad"]), inference=fmt_s(vg["inference_mode"]), command=vg["command"])
    b.say("channels_last").say("policies")
    config_default, rows = {"tiny_rave": "1", "s5_maze": "1", "foundational": "0 (all cores)"}, []
    for cfg, v in thr.items():
        med = {k: statistics.median(e["rates"]) for k, e in v.items()}
        cell = lambda k: f"**{med[k]:.1f}**" if med[k] == max(med.values()) else f"{med[k]:.1f}"  # noqa: E731
        rows.append([cfg, cell("default/1"), cell("default/2"), cell("PASSIVE/1"), cell("PASSIVE/2"),
                     config_default[cfg], loads_range([x for e in v.values() for x in e["loads"]]),
                     f"`{v['default/1']['command']}`"])
    b.table("columns", rows)
    return dict(blocks=b, raw=df, env=env)


def step_ab(ctx):
    """Old build against new of the same RAVE step, one process per repetition, alternating; compared:
    the median over repetitions of each run's median step time. The old build is made (Release,
    through ccache) in a detached worktree of `old` under /tmp, unless --old_bin names an old
    rave_bench; the new one is --build's (built first unless --no_build)."""
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
    b = benchlib.Blocks(S["step_ab"]["text"]).say("intro", step=step, o=o)
    b.table("columns", [[f"{arm} `{sha}`", benchlib.spread(med[arm], "{:.3f}", bold=True),
              " ".join(f"{r['load_before'][0]:.2f}" for r in raw[arm] if r["load_before"])]
                        for arm, sha in (("old", old_sha), ("new", new_sha))]).say("ratio", ratio=ratio)
    return dict(blocks=b, raw={"runs": raw}, env={"old": old_sha, "new": new_sha},
                derived={"old": benchlib.summary(med["old"]), "new": benchlib.summary(med["new"]), "new_over_old": ratio},
                commands=[f"OLD/bin/{step}", f"build/bin/{step}"])


def rave_configs(ctx):
    """Every RAVE configuration at full size through `train --smoke_test` and `--summary` (minutes each)."""
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
    b = benchlib.Blocks(S["rave_configs"]["text"]).say("intro")
    b.table("columns", [[f"`{r['config'].replace('+', ' + ')}`", r["parameters_trained"], f"{r['phase_1_s_per_step']:.3f} s",
              f"{r['phase_2_s_per_step']:.3f} s", f"{r['peak_rss_mib']:.1f} MiB", r["rave_gpu_memory"] or "(as its base)"]
             for r in runs])
    return dict(blocks=b, raw={"runs": runs})


def rave_parity(ctx):
    """rave_parity.py in the oracle venv .venv-rave (tests/oracle/run.sh makes it); it writes the result."""
    ctx.run([os.path.join(benchlib.ROOT, ".venv-rave", "bin", "python"), "-W", "ignore",
             os.path.join(HERE, "rave_parity.py"), "--bin", ctx.bin, "--work", ctx.path("parity"), "--results_dir",
             ctx.results_dir, "--steps", ctx.o.steps, "--runs", ctx.o.runs], log_to=ctx.path("parity.log"))

