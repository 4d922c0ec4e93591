"""The export benchmarks' drivers (bench.py; standard library only): our TorchScript and ONNX exports
of RAVE v2 against RAVE's own, and what `--quantize int8` costs in fidelity on a trained model."""
import os
import re
import statistics

import benchlib

ROOT, HERE, S = benchlib.ROOT, benchlib.HERE, benchlib.sections()
RAVE_PY = os.path.join(ROOT, ".venv-rave-cpu", "bin", "python")  # torch 2.11 (PyPI, MKL) and acids-rave 2.3.1
DEBIAN_PY = "/usr/bin/python3"  # python3-torch: LibTorch 1.13, OpenBLAS, the one our build links


def torch_label(row):
    """'1.13 (OpenBLAS)' from a race row's torch version and BLAS."""
    blas = row.get("blas") or {}
    kind = ("MKL" if blas.get("blas_info") == "mkl" else "OpenBLAS" if any("openblas" in x for x in blas.get("libraries", []))
            else blas.get("blas_info") or "?")
    return f"{'.'.join(row['torch'].split('+')[0].split('.')[:2])} ({kind})"


def export(ctx):
    """Our streaming exports (export_bench --keep, float32 and int8) against RAVE's own
    (rave_own_export.py), export_race.py per round under each LibTorch in turn; a row per host."""
    o, w = ctx.o, ctx.path
    eb = [os.path.join(ctx.bin, "export_bench"), "--version", "v2", "--block", 2048, "--threads", 1, "--seconds", 1]
    ours_export = ctx.json(eb + ["--keep", w("ours.ts")])[0]
    ctx.run(eb + ["--quantize", "int8", "--keep", w("ours_int8.ts")])
    rave_export = ctx.json([RAVE_PY, "-W", "ignore", os.path.join(HERE, "rave_own_export.py"), "--out", w("rave.ts"),
                            "--match", w("ours.ts")])[0]
    rows, pys = [], (DEBIAN_PY, RAVE_PY)
    for r in range(1, o.rounds + 1):
        for py in pys if r % 2 else pys[::-1]:
            rows += ctx.jsonl([py, "-W", "ignore", os.path.join(HERE, "export_race.py"), "--file", f"ours={w('ours.ts')}",
                               "--file", f"ours_int8={w('ours_int8.ts')}", "--file", f"rave={w('rave.ts')}", "--threads",
                               o.threads, "--blocks", o.blocks, "--rounds", 1, "--first_round", r, "--seconds", o.seconds])
    torches = sorted({r["torch"] for r in rows}, key=lambda v: tuple(
        int(p) if p.isdigit() else 0 for p in v.split("+")[0].replace("a", ".").split(".")))
    first = {v: next(r for r in rows if r["torch"] == v) for v in torches}
    label, package = {v: torch_label(first[v]) for v in torches}, {v: first[v].get("torch_package") for v in torches}
    short = lambda v: ".".join(v.split("+")[0].split(".")[:2])  # noqa: E731
    sel = lambda v, t, blk, name: sorted((r for r in rows if (r["torch"], r["threads"], r["block"], r["name"]) == (  # noqa: E731
        v, t, blk, name)), key=lambda r: r["round"])
    match = rave_export.get("match") or {}
    b = benchlib.Blocks(S["export"]["text"])
    b.say("models", r=rave_export, latent=match.get("latent_size", "?"), mib=rave_export["parameter_bytes"] / 2**20,
          parameters=format(match["parameters"], ",") if match else "?")
    b.say("race", o=o, s="s" if o.rounds != 1 else "", torches="; ".join(
        f"{label[v]}: torch {v}" + (f", {package[v]}" if package.get(v) else "") for v in torches))
    arms = [(n, lbl) for n, lbl in (("ours", "ours, float32 (default)"), ("ours_int8", "ours, `--quantize int8`"))
            if any(r["name"] == n for r in rows)]
    table, derived, by_torch = [], {}, {n: {} for n, _ in arms}
    for v in torches:
        for t, blk in sorted({(r["threads"], r["block"]) for r in rows}):
            rave = sel(v, t, blk, "rave")
            rave_ms, rave_rtf = [r["ms_per_block_median"] for r in rave], [r["rtf"] for r in rave]
            by_round = {r["round"]: r["ms_per_block_median"] for r in rave}
            for name, arm_label in arms:
                ours = sel(v, t, blk, name)
                ms, rtf = [r["ms_per_block_median"] for r in ours], [r["rtf"] for r in ours]
                ratios = [r["ms_per_block_median"] / by_round[r["round"]] for r in ours if r["round"] in by_round]
                floor = [r["weights_read_ms"] for r in sel(v, t, blk, "ours") + rave]  # the float files' floor
                derived[f"{name}_t{t}_b{blk}_torch{short(v)}"] = {
                    "torch": v, "ours_ms": benchlib.summary(ms), "rave_ms": benchlib.summary(rave_ms),
                    "ours_rtf": benchlib.summary(rtf), "rave_rtf": benchlib.summary(rave_rtf),
                    "ours_over_rave": benchlib.summary(ratios), "ours_over_rave_per_round": ratios,
                    "weights_read_ms": benchlib.summary(floor)}
                if t == 1 and blk in (2048, 4096):
                    by_torch[name].setdefault(v, []).extend(ratios)
                table.append([label[v], t, blk, arm_label, benchlib.spread(ms), benchlib.spread(rave_ms),
                              benchlib.spread(ratios, "{:.2f}", bold=True), f"{statistics.median(rtf):.2f}×",
                              f"{statistics.median(rave_rtf):.2f}×", f"{statistics.median(floor):.1f} ms"])
    b.table("columns", table).say("int8")
    b.say("floor", mib=rave_export["parameter_bytes"] / 2**20, ms2048=1e3 * 2048 / 44100, ms4096=1e3 * 4096 / 44100)
    # One target per file, LibTorch and host: the builds differ in what they run fast (int8: fbgemm or not).
    host, targets = benchlib.cpu_identity()["label"], []
    for name, arm_label in arms:
        verdicts = []
        for v, x in by_torch[name].items():
            targets.append(benchlib.target(b.line("target", arm=arm_label.replace("ours, ", ""), torch=label[v]),
                                           "≤ 0.5", "<=", 0.5, x, fmt="{:.2f}", over="rounds × blocks", host=host))
            verdict = "met" if all(r <= 0.5 for r in x) else "met by some rounds only" if any(r <= 0.5 for r in x) else "not met"
            verdicts.append(f"{statistics.median(x):.2f}× on LibTorch {label[v]} (goal ≤ 0.5: {verdict})")
        if verdicts:
            b.say("verdicts", arm=arm_label, verdicts=" and ".join(verdicts))
    # What the goal asks of a float32 file: half of RAVE's own time, against one read of its weights.
    halves = [f"{label[v]}, {blk}: {d['rave_ms']['median'] / 2:.1f} ms against {d['weights_read_ms']['median']:.1f} ms"
              for v in torches for blk in (2048, 4096) for d in [derived.get(f"ours_t1_b{blk}_torch{short(v)}")] if d]
    if halves:
        b.say("halves", halves="; ".join(halves))
    n = ours_export["forward_latency_samples"]
    b.say("latency", n=n, ms=n / 44.1)
    carried = benchlib.keep_other_hosts(b, targets, "export", host, ctx.results_dir)
    return dict(blocks=b, raw={"runs": rows, "ours_export": ours_export, "rave_own_export": rave_export}, derived=derived,
                targets=targets, other_hosts=carried,
                env={"torch": {v: {"label": label[v], "blas": first[v]["blas"], "python": first[v]["executable"]}
                               for v in torches}})


def onnx_export(ctx):
    """export_bench --onnx_dir's files and rave_own_onnx.py's, raced by onnx_race.py in .venv-onnx
    (scripts/onnx_venv.sh); onnx_section makes the section of its figures."""
    w = ctx.path
    ctx.run([os.path.join(ROOT, "scripts", "onnx_venv.sh")])
    with open(w("ours_int8.json"), "w") as f:
        f.write(ctx.run([os.path.join(ctx.bin, "export_bench"), "--version", "v2", "--onnx_dir", ctx.work]).stdout)
    with open(w("rave.json"), "w") as f:
        f.write(ctx.run([RAVE_PY, "-W", "ignore", os.path.join(HERE, "rave_own_onnx.py"), "--weights", w("weights"),
                         "--out", w("rave.onnx")]).stdout)
    race = [os.path.join(ROOT, ".venv-onnx", "bin", "python"), os.path.join(HERE, "onnx_race.py"), "--dir", ctx.work]
    return onnx_section(ctx, ctx.json(race + ["--rounds", ctx.o.rounds, "--seconds", ctx.o.seconds])[0])


def onnx_section(ctx, d):
    """The ONNX section from onnx_race.py's figures d: per block size, each file's ms per call and ours
    ÷ RAVE's own round by round; realtime at 48 kHz; a row per host."""
    med, buffers = statistics.median, (128, 256, 512, 1024, 2048)
    by = benchlib.grouped(d["runs"], "name", "block", value="ms_per_block_median")
    ms = lambda name, block: by[(name, block)]  # noqa: E731
    derived, table, ratio_runs, int8_runs = {}, [], [], []
    for block in (2048, 4096):
        o, f, q, rv = ms("ours", block), ms("ours_offline", block), ms("ours_int8", block), ms("rave", block)
        ratios, qratios = [x / y for x, y in zip(o, rv)], [x / y for x, y in zip(q, rv)]
        ratio_runs += ratios
        int8_runs += qratios
        derived[f"b{block}"] = {"ours_ms": benchlib.summary(o), "ours_offline_ms": benchlib.summary(f),
                                "ours_int8_ms": benchlib.summary(q), "rave_ms": benchlib.summary(rv),
                                "ours_over_rave": benchlib.summary(ratios),
                                "ours_int8_over_rave": benchlib.summary(qratios)}
        table.append([block, f"{med(o):.1f}", f"{med(f):.1f}", f"{med(q):.1f}", f"{med(rv):.1f}",
                      benchlib.spread(ratios, "{:.2f}", bold=True), benchlib.spread(qratios, "{:.2f}", bold=True)])
    rt_rows = [[b, f"{1e3 * b / 48000:.2f} ms"] + [f"{1e3 * b / 48000 / med(ms(n, 2048)):.2f}×"
                                                    for n in ("ours", "ours_int8", "rave")] for b in buffers]
    derived.update((k, d[k]) for k in ("spectral_distance", "int8_vs_float32_snr_db", "weights_read_ms"))
    i8, floor, half = d["ours_int8"], d["weights_read_ms"], med(ms("rave", 2048)) / 2
    b = benchlib.Blocks(S["onnx"]["text"])
    b.say("models", r=d["rave_own_onnx"], ort=d["onnxruntime"], rounds=ctx.o.rounds, seconds=ctx.o.seconds)
    b.table("columns", table).say("int8", layers=i8["int8_layers"], snr=d["int8_vs_float32_snr_db"],
                                  share=100.0 * i8["int8_weights"] / (i8["int8_weights"] + i8["float_weights"]))
    b.say("floor", mib=d["weights_mib"], floor=floor, half=half, side="below" if half < floor else "above",
          verdict=b.line("below" if half < floor else "above"))
    b.say("realtime").table("realtime_columns", rt_rows)
    b.say("output", ours=d["spectral_distance"]["ours_vs_rave"], rave=d["spectral_distance"]["rave_vs_rave"],
          scales=", ".join(map(str, d["scales"])))
    host = benchlib.cpu_identity()["label"]
    targets = [benchlib.target(b.line(k), "≤ 0.5", "<=", 0.5, v, over="rounds × blocks", host=host)
               for k, v in (("target", ratio_runs), ("int8_target", int8_runs))]
    carried = benchlib.keep_other_hosts(b, targets, "onnx_export", host, ctx.results_dir)  # a row per host
    return dict(blocks=b, raw={k: d[k] for k in ("runs", "rave_own_onnx", "ours_int8")}, derived=derived,
                targets=targets, other_hosts=carried, env={"onnxruntime": d["onnxruntime"]})


STEP = re.compile(r"^  from (?P<ckpt>.+) \(step (?P<step>\d+)\)$", re.M)
INT8 = re.compile(r"--quantize int8: (?P<layers>\d+) layer\(s\) on int8 weights \((?P<int8>\d+) of (?P<total>\d+) weights")
CHECK = re.compile(r"fidelity vs the float32 model on (?P<audio>.+) \((?P<seconds>[0-9.]+) s\): SNR "
                   r"(?:(?P<snr>-?[0-9.]+) dB|inf \(identical\)), max \|diff\| (?P<maxdiff>[0-9.e+-]+), multi-scale "
                   r"spectral distance added (?P<added>[0-9.e+-]+) = (?P<share>-?[0-9.]+)% of the model's own "
                   r"reconstruction distance \((?P<own>[0-9.]+); budget (?P<budget>[0-9]+)%\)")
AUDIO = {"db": "the run's database", "speech": "recorded speech (alsa-utils' spoken channel names, 48 kHz)"}
SPEECH = [f"/usr/share/sounds/alsa/{p}.wav" for p in ("Front_Left", "Front_Center", "Front_Right", "Side_Left",
                                                       "Side_Right", "Rear_Left", "Rear_Center", "Rear_Right")]


def export_fidelity(ctx):
    """The fidelity check `export` prints (export/checks/fidelity.h) for float32 and int8, on the run's
    database and recorded speech; without --run it trains one here."""
    o, exe = ctx.o, os.path.join(ctx.bin, "export")
    missing = [f for f in SPEECH if not os.path.exists(f)]
    if missing:
        raise RuntimeError(f"{missing[0]} missing: apt-get install alsa-utils (scripts/setup.sh)")
    speech = ctx.path("speech.wav")
    ctx.run(["sox", *SPEECH, speech])
    runs = o.run
    if not runs:
        log = ctx.run([os.path.join(ctx.bin, "train"), "--config", o.config, "--db_path", ctx.audio_db("db", 20),
                       "--out_path", ctx.path("runs"), "--threads", o.threads, "--override", f"model.capacity={o.capacity}",
                       "--batch", 4, "--n_signal", 131072, "--max_steps", o.steps, "--val_every", max(o.steps // 4, 1),
                       "--seed", 1]).stdout
        runs = re.findall(r"^run directory: (.*)$", log, re.M)[-1:]
    rows = []
    for run in runs:
        for audio in ("db", "speech"):
            for q in ("none", "int8"):
                out = ctx.path(f"check_{audio}_{q}.ts")
                log = ctx.run([exe, "--run", run, "--streaming", "--force", "--quantize", q, "--check_seconds",
                               o.check_seconds, *(["--check_audio", speech] if audio == "speech" else []), "--output", out]).stdout
                c, s, i = CHECK.search(log), STEP.search(log), INT8.search(log)
                if not c:
                    raise RuntimeError(f"no fidelity line in the export of {run} ({audio}, {q}):\n{log}")
                rows.append({"run": run, "audio": audio, "quantize": q, "step": int(s["step"]) if s else None,
                             "checked_on": c["audio"], "seconds": float(c["seconds"]),
                             "snr_db": float(c["snr"]) if c["snr"] else None, "max_abs_diff": float(c["maxdiff"]),
                             "added": float(c["added"]), "share": float(c["share"]) / 100.0, "own": float(c["own"]),
                             "int8_layers": int(i["layers"]) if i else 0, "int8_weights": int(i["int8"]) if i else 0,
                             "weights": int(i["total"]) if i else None, "file_bytes": os.path.getsize(out)})
                os.remove(out)
    trained_here = not o.run
    b = benchlib.Blocks(S["export_fidelity"]["text"]).say("trained_here" if trained_here else "given", o=o).say("rows")
    table, targets = [], []
    for r in rows:
        name = os.path.basename(r["run"].rstrip("/"))
        where = (f"{o.config} at capacity {o.capacity}" if trained_here else name) + \
            f", step {r['step']}, {AUDIO[r['audio']]}"
        table.append([("" if trained_here else f"{name}, ") + f"step {r['step']}", AUDIO[r["audio"]],
                      f"{r['seconds']:.1f} s", "float32 (default)" if r["quantize"] == "none" else "`--quantize int8`",
                      f"{r['int8_layers']} ({100.0 * r['int8_weights'] / r['weights']:.0f} % of the weights)"
                      if r["weights"] else "0", f"{r['file_bytes'] / 2**20:.1f} MiB",
                      "identical" if r["snr_db"] is None else f"{r['snr_db']:.1f} dB", f"{r['max_abs_diff']:.2e}",
                      f"{r['added']:.4f}", f"{r['own']:.3f}", f"**{100.0 * r['share']:.2f} %**"])
        targets.append(benchlib.target(b.line("float_target", where=where), "≤ 1e-5", "<=", 1e-5, [r["max_abs_diff"]],
                                       fmt="{:.1e}", over="checks") if r["quantize"] == "none" else
                       benchlib.target(b.line("int8_target", where=where), "≤ 0.05", "<=", 0.05, [r["share"]],
                                       fmt="{:.4f}", over="checks"))
    b.table("columns", table).say("opt_in")
    return dict(blocks=b, raw={"rows": rows}, targets=targets)

