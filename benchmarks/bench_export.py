"""The export benchmarks of bench.py: descriptions and drivers (standard library only): our
streaming TorchScript export of RAVE v2 against RAVE's own, our ONNX export against RAVE's own
under ONNX Runtime, and what `--quantize int8` costs in fidelity on a trained model."""
import os
import re
import statistics

import benchlib

ROOT, HERE = benchlib.ROOT, benchlib.HERE
RAVE_PY = os.path.join(ROOT, ".venv-rave-cpu", "bin", "python")  # torch 2.11 (PyPI, MKL) and acids-rave 2.3.1
DEBIAN_PY = "/usr/bin/python3"  # python3-torch: LibTorch 1.13, OpenBLAS, the one our build links


def torch_label(row):
    """'1.13 (OpenBLAS)' from a race row's torch version and BLAS."""
    blas = row.get("blas") or {}
    kind = ("MKL" if blas.get("blas_info") == "mkl" else "OpenBLAS" if any("openblas" in x for x in blas.get("libraries", []))
            else blas.get("blas_info") or "?")
    return f"{'.'.join(row['torch'].split('+')[0].split('.')[:2])} ({kind})"


def export(ctx):
    """Our streaming export of a random full-size v2 (export_bench --keep: float32, and --quantize
    int8) against RAVE's own (rave_own_export.py in .venv-rave-cpu: acids-rave 2.3.1's export path)
    as nn~ runs them: per round one process per LibTorch (1.13, Debian's; 2.11, PyPI's, what nn~
    ships), their order alternating, export_race.py on every file, thread count and block size,
    plus the weight-read floor. The targets keep a row per host (benchlib.keep_other_hosts)."""
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
    b = benchlib.Blocks()
    b.text("RAVE v2 at full size (capacity 96, latent 128, ratio 2048), random weights (the speed does not depend "
           "on their values), streaming exports of it. **Ours**: `build/bin/export_bench --keep` writes what "
           "`export --streaming` writes for `RaveOptions::preset(v2)`. **RAVE's own**: made by RAVE's own code, "
           f"acids-rave {rave_export['acids-rave']}'s `scripts/export.py` path (`rave export --streaming`) as "
           "`benchmarks/rave_own_export.py` runs it: `cached_conv.use_cached_conv(True)` before anything is "
           "built, RAVE built from its own `v2.gin` (`RAVE.n_channels = 1`, 44.1 kHz) with a fixed seed, the weight "
           "norm removed as export.py removes it (`nn.utils.remove_weight_norm` on every module with a "
           "`weight_g`), export.py's own `VariationalScriptedRAVE` (imported from the installed module, on "
           f"nn-tilde {rave_export['nn-tilde']}) built with fidelity 0.95 and its `fidelity` buffer filled so "
           f"that it keeps {rave_export['latent_size']} of {rave_export['full_latent_size']} latent dimensions "
           f"(ours keeps {match.get('latent_size', '?')}), `torch.jit.script` and saved by torch "
           f"{rave_export['torch']}. Parameters: RAVE's own {rave_export['parameters']:,}, ours "
           f"{format(match['parameters'], ',') if match else '?'}; {rave_export['parameter_bytes'] / 2**20:.1f} MiB in float32.")
    b.text("Both files are loaded with `torch.jit.load` in one process and `forward` is called on consecutive "
           "[1, 1, block] blocks of the same noise under `torch.inference_mode` (nn~'s `Backend::perform` calls "
           f"`forward` once per buffer), 5 warm-up blocks then {o.seconds:g} s of audio at 44.1 kHz per file per "
           f"round, {o.rounds} round{'s' if o.rounds != 1 else ''} (`benchmarks/export_race.py`). Each round is "
           "one process per LibTorch, the two LibTorch builds alternating, and within it the files alternate too "
           "(order reversed every other round): "
           + "; ".join(f"{label[v]}: torch {v}" + (f", {package[v]}" if package.get(v) else "") for v in torches)
           + ". 1.13 is Debian's `python3-torch`, the LibTorch our build links; 2.11 is PyPI's, what nn~ ships; "
           "both load the same files (RAVE's own saved by torch 2.11, ours by 1.13). "
           "ms per block: the median over a round's blocks, then the median over rounds (range over rounds); "
           "realtime factor = seconds of audio per second of compute; ours ÷ RAVE's own: the median of the "
           "per-round ratios of ms per block (below 1: ours is faster).")
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
    b.table(["LibTorch (BLAS)", "threads", "block", "ours", "ours: ms per block (range)",
             "RAVE's own: ms per block (range)", "ours ÷ RAVE's own (range)", "ours: realtime factor",
             "RAVE's own: realtime factor", "weight-read floor (float32)"], table)
    b.text("`--quantize int8` stores the large layers' weights as int8 (a quarter of the bytes) and runs them "
           "through aten's dynamic quantized linear: fbgemm on PyPI's x86 LibTorch, oneDNN on Debian's 1.13 "
           "(built without fbgemm). It is lossy and opt-in; what it adds to a model's error is printed by "
           "`export` (docs/export.md).")
    b.text("The weight-read floor: every `forward` call reads every weight once (at 2048 samples the latent is one "
           "frame, so the large convolutions are matrix-vector products), so no block can take less than one read of "
           f"the {rave_export['parameter_bytes'] / 2**20:.1f} MiB of weights: one pass summing every parameter of "
           "the file, median of 9 after a warm-up pass, on the same LibTorch and threads (the median over rounds and "
           "the two float32 files, whose weights are the same size). A block of 2048 samples is "
           f"{1e3 * 2048 / 44100:.1f} ms of audio, one of 4096 {1e3 * 4096 / 44100:.1f} ms.")
    # One target per file, LibTorch and host: the builds differ in what they run fast (int8: fbgemm or not).
    host, targets = benchlib.cpu_identity()["label"], []
    for name, arm_label in arms:
        verdicts = []
        for v, x in by_torch[name].items():
            targets.append(benchlib.target(
                f"Exported RAVE v2 (streaming, {arm_label.replace('ours, ', '')}, LibTorch {label[v]}), forward on "
                "2048- and 4096-sample blocks, 1 thread: time per block, ours ÷ RAVE's own export", "≤ 0.5", "<=",
                0.5, x, fmt="{:.2f}", over="rounds × blocks", host=host))
            verdict = "met" if all(r <= 0.5 for r in x) else "met by some rounds only" if any(r <= 0.5 for r in x) else "not met"
            verdicts.append(f"{statistics.median(x):.2f}× on LibTorch {label[v]} (goal ≤ 0.5: {verdict})")
        if verdicts:
            b.text(f"At 1 thread, 2048 and 4096 samples, {arm_label} takes " + " and ".join(verdicts)
                   + " of RAVE's own export's time per block (medians of the per-round ratios).")
    # What the goal asks of a float32 file: half of RAVE's own time, against one read of its weights.
    halves = [f"{label[v]}, {blk}: {d['rave_ms']['median'] / 2:.1f} ms against {d['weights_read_ms']['median']:.1f} ms"
              for v in torches for blk in (2048, 4096) for d in [derived.get(f"ours_t1_b{blk}_torch{short(v)}")] if d]
    if halves:
        b.text("Half of RAVE's own time per block at 1 thread (what ≤ 0.5 allows ours) against the weight-read "
               "floor: " + "; ".join(halves) + ". Where the half is near or below the floor, no float32 file can "
               "meet the goal, however few operators it runs; storing the weights in fewer bytes (int8) can. "
               "Where it is above, what bounds a file is how fast the LibTorch's BLAS runs the products at these "
               "shapes (docs/perf/export.md).")
    b.text(f"Streaming latency of our `forward`: {ours_export['forward_latency_samples']} samples "
           f"({ours_export['forward_latency_samples'] / 44.1:.0f} ms at 44.1 kHz), plus nn~'s buffering.")
    carried = benchlib.keep_other_hosts(b, targets, "export", host, ctx.results_dir)
    ours = "build/bin/export_bench --version v2 --block 2048 --threads 1 --seconds 1"
    return dict(blocks=b, raw={"runs": rows, "ours_export": ours_export, "rave_own_export": rave_export}, derived=derived,
                targets=targets, other_hosts=carried,
                env={"torch": {v: {"label": label[v], "blas": first[v]["blas"], "python": first[v]["executable"]}
                               for v in torches}},
                commands=[f"{ours} --keep OURS.ts", f"{ours} --quantize int8 --keep OURS_INT8.ts",
                          ".venv-rave-cpu/bin/python benchmarks/rave_own_export.py --out RAVE.ts --match OURS.ts",
                          "PYTHON benchmarks/export_race.py --file ours=OURS.ts --file ours_int8=OURS_INT8.ts --file "
                          f"rave=RAVE.ts --threads T --blocks B --rounds 1 --first_round R --seconds {o.seconds:g} "
                          "(PYTHON: /usr/bin/python3, torch 1.13; .venv-rave-cpu/bin/python, torch 2.11)"])


def onnx_export(ctx):
    """Our ONNX export of a random full-size v2 (export_bench --onnx_dir) against RAVE's own ONNX
    export of the same weights (rave_own_onnx.py in .venv-rave-cpu), timed under ONNX Runtime on one
    thread by onnx_race.py in .venv-onnx (scripts/onnx_venv.sh), which writes the result itself."""
    w = ctx.path
    ctx.run([os.path.join(ROOT, "scripts", "onnx_venv.sh")])
    with open(w("ours_int8.json"), "w") as f:
        f.write(ctx.run([os.path.join(ctx.bin, "export_bench"), "--version", "v2", "--onnx_dir", ctx.work]).stdout)
    with open(w("rave.json"), "w") as f:
        f.write(ctx.run([RAVE_PY, "-W", "ignore", os.path.join(HERE, "rave_own_onnx.py"), "--weights", w("weights"),
                         "--out", w("rave.onnx")]).stdout)
    ctx.run([os.path.join(ROOT, ".venv-onnx", "bin", "python"), os.path.join(HERE, "onnx_race.py"), "--dir", ctx.work,
             "--rounds", ctx.o.rounds, "--seconds", ctx.o.seconds, "--command", f"benchmarks/bench.py --only onnx"
             + (" --quick" if ctx.quick else ""), "--load_before", " ".join(map(str, ctx.load_before or [])),
             "--results_dir", ctx.results_dir])


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
    """What `export --quantize int8` costs in fidelity on a trained model, beside float32: the check
    `export` prints (export/checks/fidelity.h: the file loaded back and run as nn~ runs it against the
    float32 C++ model offline; SNR, and the spectral distance it adds as a share of the model's own)
    on the run's database and on recorded speech (alsa-utils' spoken channel names). Without --run
    it trains one here (config at capacity on the demo database, batch 4 of 131072, steps steps)."""
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
    b = benchlib.Blocks()
    b.text(f"The model: RAVE `{o.config}` at capacity {o.capacity}, trained here for {o.steps} steps on the "
           "demo database (`preprocess --generate_demo`, 20 s per file; batch 4 of 131072 samples, phase 1 "
           "only), so far from converged: a model trained for days would be the fairer test of int8, and this "
           "section is rerun on one with `--run DIR`." if trained_here else
           "The models: the runs given with `--run` (their best checkpoint).")
    b.text("Each row is one `export --run RUN --streaming --quantize Q [--check_audio speech.wav]`: the file is "
           "loaded back and run as nn~ runs it (2048-sample blocks from a zero state, noise off) against the "
           "float32 C++ model offline on the same audio, after a warm-up of twice the latency. SNR and max |diff| "
           "compare the two outputs; the spectral distance is RAVE's multi-scale one, the distance the file adds "
           "(model → file) as a share of the model's own (input → model). The rule: a lossy file may be the "
           "default only if it adds at most 5 % of the model's own distance; float32 must be the model within "
           "1e-5.")
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
        targets.append(benchlib.target(f"Streaming float32 export of a trained {where}: max |file − model|", "≤ 1e-5",
                                       "<=", 1e-5, [r["max_abs_diff"]], fmt="{:.1e}", over="checks")
                       if r["quantize"] == "none" else
                       benchlib.target(f"Streaming `--quantize int8` export of a trained {where}: spectral distance "
                                       "added ÷ the model's own (what a lossy default needs)", "≤ 0.05", "<=", 0.05,
                                       [r["share"]], fmt="{:.4f}", over="checks"))
    b.table(["checkpoint", "audio", "compared", "export", "int8 layers", "file", "SNR", "max |diff|",
             "distance added", "model's own distance", "added ÷ own"], table)
    b.text("`--quantize int8` stays opt-in whatever these figures say: one model trained for minutes on the demo "
           "database does not show what int8 does to a converged model's timbre, and what it gains depends on the "
           "host's quantized engine: much with fbgemm (PyPI's x86 LibTorch), little or nothing with oneDNN "
           "(Debian's 1.13; section \"Exported RAVE v2 in realtime\"). `export` prints the same check for every "
           "file it writes, so each user sees it on their own model.")
    return dict(blocks=b, raw={"rows": rows}, targets=targets, commands=[
        "build/bin/export --run RUN --streaming --quantize none|int8 --check_seconds S [--check_audio speech.wav]"])


VENV = dict(needs=(".venv-rave-cpu/bin/python",), note="benchmarks/rave_cpu_env.sh makes .venv-rave-cpu", bins=("export_bench",))
BENCHMARKS = [
    dict(key="export", name="export", title="Exported RAVE v2 in realtime", run=export, script="export_bench.sh",
         analysis="docs/perf/export.md", options=dict(rounds=3, seconds=10.0, threads="1 2", blocks="2048 4096"),
         quick=dict(rounds=2, seconds=4.0), **VENV),
    dict(key="onnx", name="onnx_export", title="ONNX export under ONNX Runtime", run=onnx_export, script="onnx_bench.sh",
         options=dict(rounds=3, seconds=10.0), quick=dict(rounds=2, seconds=4.0), **VENV),
    dict(key="export_fidelity", name="export_fidelity", title="Export fidelity on a trained model", run=export_fidelity,
         script="export_fidelity.sh", bins=("export", "train", "preprocess"),
         options=dict(run=[], config="v2", capacity=32, steps=3000, check_seconds=10.0, threads=2),
         quick=dict(steps=200, check_seconds=4.0)),
]
