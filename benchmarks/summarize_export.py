#!/usr/bin/python3
"""export_bench.sh's runs (export_race.py's JSON lines: one per LibTorch, round, file, thread
count and block size; export_bench --keep's and rave_own_export.py's records of the files)
-> benchmarks/results/export.json: per LibTorch, thread count and block, ms per block of ours
and of RAVE's own streaming export (median over rounds and range), their realtime factors, ours ÷
RAVE's own (median of the per-round ratios), the weight-read floor, and the ≤ 0.5 target, one
per host and LibTorch: the hosts an earlier result measured are kept beside this one (benchlib.other_hosts)."""
import statistics

import benchlib


def torch_label(row):
    """'1.13 (OpenBLAS)' from a race row's torch version and BLAS."""
    major_minor = ".".join(row["torch"].split("+")[0].split(".")[:2])
    blas = row.get("blas") or {}
    if blas.get("blas_info") == "mkl":
        kind = "MKL"
    elif any("openblas" in lib for lib in blas.get("libraries", [])):
        kind = "OpenBLAS"
    else:
        kind = blas.get("blas_info") or "?"
    return f"{major_minor} ({kind})"


def version_key(v):
    return tuple(int(p) if p.isdigit() else 0 for p in v.split("+")[0].replace("a", ".").split("."))


def main():
    a = benchlib.summary_parser(__doc__, "raw ours_export rave_export rounds:int seconds:float").parse_args()
    rows = benchlib.read_jsonl(a.raw)
    ours_export, rave_export = benchlib.last_json_line(a.ours_export), benchlib.last_json_line(a.rave_export)
    torches = sorted({r["torch"] for r in rows}, key=version_key)
    first = {v: next(r for r in rows if r["torch"] == v) for v in torches}
    label = {v: torch_label(first[v]) for v in torches}
    package = {v: first[v].get("torch_package") for v in torches}
    keys = sorted({(r["threads"], r["block"]) for r in rows})

    def sel(v, t, blk, name):
        return sorted((r for r in rows if (r["torch"], r["threads"], r["block"], r["name"]) == (v, t, blk, name)),
                      key=lambda r: r["round"])

    match = rave_export.get("match") or {}
    ours_params = f"{match['parameters']:,}" if match else "?"
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
           f"{rave_export['torch']}. Parameters: RAVE's own {rave_export['parameters']:,}, ours {ours_params}; "
           f"{rave_export['parameter_bytes'] / 2**20:.1f} MiB in float32.")
    b.text("Both files are loaded with `torch.jit.load` in one process and `forward` is called on consecutive "
           "[1, 1, block] blocks of the same noise under `torch.inference_mode` (nn~'s `Backend::perform` calls "
           f"`forward` once per buffer), 5 warm-up blocks then {a.seconds:g} s of audio at 44.1 kHz per file per "
           f"round, {a.rounds} round{'s' if a.rounds != 1 else ''} (`benchmarks/export_race.py`). Each round is "
           "one process per LibTorch, the "
           "two LibTorch builds alternating, and within it the files alternate too (order reversed every other round): "
           + "; ".join(f"{label[v]}: torch {v}" + (f", {package[v]}" if package.get(v) else "") for v in torches)
           + ". 1.13 is Debian's `python3-torch`, the LibTorch our build links; 2.11 is PyPI's, what nn~ ships; "
           "both load the same files (RAVE's own saved by torch 2.11, ours by 1.13). "
           "ms per block: the median over a round's blocks, then the median over rounds (range over rounds); "
           "realtime factor = seconds of audio per second of compute; ours ÷ RAVE's own: the median of the "
           "per-round ratios of ms per block (below 1: ours is faster).")
    arms = [("ours", "ours, float32 (default)"), ("ours_int8", "ours, `--quantize int8`")]
    arms = [(n, lbl) for n, lbl in arms if any(r["name"] == n for r in rows)]
    table, derived, ratio_runs, ratio_by_torch = [], {}, {n: [] for n, _ in arms}, {n: {} for n, _ in arms}
    for v in torches:
        for t, blk in keys:
            rave = sel(v, t, blk, "rave")
            if not rave:
                continue
            rave_ms = [r["ms_per_block_median"] for r in rave]
            rave_rtf = [r["rtf"] for r in rave]
            rave_by_round = {r["round"]: r["ms_per_block_median"] for r in rave}
            for name, arm_label in arms:
                ours = sel(v, t, blk, name)
                if not ours:
                    continue
                ms = [r["ms_per_block_median"] for r in ours]
                rtf = [r["rtf"] for r in ours]
                ratios = [r["ms_per_block_median"] / rave_by_round[r["round"]] for r in ours
                          if r["round"] in rave_by_round]
                # The float files' floor (the int8 file's packed weights are no parameters).
                floor = [r["weights_read_ms"] for r in sel(v, t, blk, "ours") + rave]
                key = f"{name}_t{t}_b{blk}_torch{'.'.join(v.split('+')[0].split('.')[:2])}"
                derived[key] = {"torch": v, "ours_ms": benchlib.summary(ms), "rave_ms": benchlib.summary(rave_ms),
                                "ours_rtf": benchlib.summary(rtf), "rave_rtf": benchlib.summary(rave_rtf),
                                "ours_over_rave": benchlib.summary(ratios), "ours_over_rave_per_round": ratios,
                                "weights_read_ms": benchlib.summary(floor)}
                if t == 1 and blk in (2048, 4096):
                    ratio_runs[name] += ratios
                    ratio_by_torch[name].setdefault(v, []).extend(ratios)
                table.append([label[v], t, blk, arm_label, benchlib.spread(ms), benchlib.spread(rave_ms),
                              benchlib.spread(ratios, "{:.2f}", bold=True),
                              f"{statistics.median(rtf):.2f}×", f"{statistics.median(rave_rtf):.2f}×",
                              f"{statistics.median(floor):.1f} ms"])
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
    # One target per file and LibTorch: the goal compares ours with RAVE's own on the same
    # LibTorch, and the two builds differ in what they can run fast (int8: fbgemm or not).
    # One row per host too: the hosts earlier runs measured stay beside this one (other_hosts).
    host = benchlib.cpu_identity()["label"]
    targets = []
    for name, arm_label in arms:
        for v, runs in ratio_by_torch[name].items():
            targets.append(benchlib.target(
                f"Exported RAVE v2 (streaming, {arm_label.replace('ours, ', '')}, LibTorch {label[v]}), forward on "
                "2048- and 4096-sample blocks, 1 thread: time per block, ours ÷ RAVE's own export", "≤ 0.5", "<=",
                0.5, runs, fmt="{:.2f}", over="rounds × blocks", host=host))
        verdicts = []
        for v, x in ratio_by_torch[name].items():
            verdict = ("met" if all(r <= 0.5 for r in x)
                       else "met by some rounds only" if any(r <= 0.5 for r in x) else "not met")
            verdicts.append(f"{statistics.median(x):.2f}× on LibTorch {label[v]} (goal ≤ 0.5: {verdict})")
        if verdicts:
            b.text(f"At 1 thread, 2048 and 4096 samples, {arm_label} takes " + " and ".join(verdicts)
                   + " of RAVE's own export's time per block (medians of the per-round ratios).")
    # What the goal asks of a file that reads float32 weights: half of RAVE's own time, against
    # the time one read of those weights takes on the same LibTorch.
    halves = []
    for v in torches:
        for blk in (2048, 4096):
            d = derived.get(f"ours_t1_b{blk}_torch{'.'.join(v.split('+')[0].split('.')[:2])}")
            if d:
                halves.append(f"{label[v]}, {blk}: {d['rave_ms']['median'] / 2:.1f} ms against "
                              f"{d['weights_read_ms']['median']:.1f} ms")
    if halves:
        b.text("Half of RAVE's own time per block at 1 thread (what ≤ 0.5 allows ours) against the weight-read "
               "floor: " + "; ".join(halves) + ". Where the half is near or below the floor, no float32 file can "
               "meet the goal, however few operators it runs; storing the weights in fewer bytes (int8) can. "
               "Where it is above, what bounds a file is how fast the LibTorch's BLAS runs the products at these "
               "shapes (docs/perf/export.md).")
    b.text(f"Streaming latency of our `forward`: {ours_export['forward_latency_samples']} samples "
           f"({ours_export['forward_latency_samples'] / 44.1:.0f} ms at 44.1 kHz), plus nn~'s buffering.")
    carried = benchlib.keep_other_hosts(b, targets, "export", host, a.results_dir)
    env = benchlib.environment(a.load_before, torch={v: {"label": label[v], "blas": first[v]["blas"],
                                                         "python": first[v]["executable"]} for v in torches})
    ours = "build/bin/export_bench --version v2 --block 2048 --threads 1 --seconds 1"
    benchlib.write_summary(
        a, "export", "Exported RAVE v2 in realtime", b, env=env,
        raw={"runs": rows, "ours_export": ours_export, "rave_own_export": rave_export}, derived=derived,
        targets=targets, other_hosts=carried, analysis="docs/perf/export.md",
        commands=[f"{ours} --keep OURS.ts", f"{ours} --quantize int8 --keep OURS_INT8.ts",
                  ".venv-rave-cpu/bin/python benchmarks/rave_own_export.py --out RAVE.ts --match OURS.ts",
                  "PYTHON benchmarks/export_race.py --file ours=OURS.ts --file ours_int8=OURS_INT8.ts --file "
                  f"rave=RAVE.ts --threads T --blocks B --rounds 1 --first_round R --seconds {a.seconds:g} "
                  "(PYTHON: /usr/bin/python3, torch 1.13; .venv-rave-cpu/bin/python, torch 2.11)"])


if __name__ == "__main__":
    main()
