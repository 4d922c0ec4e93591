#!/usr/bin/python3
"""export_fidelity.sh's runs (one JSON line per run, audio and --quantize: the export's printed
report) -> benchmarks/results/export_fidelity.json: per run, audio and file, the fidelity check's
figures (SNR, max |diff|, spectral distance added, its share of the model's own reconstruction
distance) and the two rules they answer: float32 within 1e-5 of the model, and a lossy file on by
default only within 5 % of the model's own distance."""
import os
import re

import benchlib

STEP = re.compile(r"^  from (?P<ckpt>.+) \(step (?P<step>\d+)\)$", re.M)
INT8 = re.compile(r"--quantize int8: (?P<layers>\d+) layer\(s\) on int8 weights \((?P<int8>\d+) of (?P<total>\d+) weights")
CHECK = re.compile(r"fidelity vs the float32 model on (?P<audio>.+) \((?P<seconds>[0-9.]+) s\): SNR "
                   r"(?:(?P<snr>-?[0-9.]+) dB|inf \(identical\)), max \|diff\| (?P<maxdiff>[0-9.e+-]+), multi-scale "
                   r"spectral distance added (?P<added>[0-9.e+-]+) = (?P<share>-?[0-9.]+)% of the model's own "
                   r"reconstruction distance \((?P<own>[0-9.]+); budget (?P<budget>[0-9]+)%\)")
AUDIO = {"db": "the run's database", "speech": "recorded speech (alsa-utils' spoken channel names, 48 kHz)"}


def parse(row):
    log = row["log"]
    c = CHECK.search(log)
    if not c:
        raise SystemExit(f"summarize_export_fidelity: no fidelity line in the export of {row['run']} "
                         f"({row['audio']}, {row['quantize']}):\n{log}")
    s = STEP.search(log)
    i = INT8.search(log)
    return {"run": row["run"], "audio": row["audio"], "quantize": row["quantize"],
            "step": int(s["step"]) if s else None, "checked_on": c["audio"], "seconds": float(c["seconds"]),
            "snr_db": float(c["snr"]) if c["snr"] else None, "max_abs_diff": float(c["maxdiff"]),
            "added": float(c["added"]), "share": float(c["share"]) / 100.0, "own": float(c["own"]),
            "int8_layers": int(i["layers"]) if i else 0, "int8_weights": int(i["int8"]) if i else 0,
            "weights": int(i["total"]) if i else None, "file_bytes": row["file_bytes"]}


def main():
    a = benchlib.summary_parser(__doc__, "raw config capacity steps:int trained_here:int").parse_args()
    rows = [parse(r) for r in benchlib.read_jsonl(a.raw)]
    b = benchlib.Blocks()
    if a.trained_here:
        b.text(f"The model: RAVE `{a.config}` at capacity {a.capacity}, trained here for {a.steps} steps on the "
               "demo database (`preprocess --generate_demo`, 20 s per file; batch 4 of 131072 samples, phase 1 "
               "only), so far from converged: a model trained for days would be the fairer test of int8, and this "
               "section is rerun on one with `--run DIR`.")
    else:
        b.text("The models: the runs given with `--run` (their best checkpoint).")
    b.text("Each row is one `export --run RUN --streaming --quantize Q [--check_audio speech.wav]`: the file is "
           "loaded back and run as nn~ runs it (2048-sample blocks from a zero state, noise off) against the "
           "float32 C++ model offline on the same audio, after a warm-up of twice the latency. SNR and max |diff| "
           "compare the two outputs; the spectral distance is RAVE's multi-scale one, the distance the file adds "
           "(model → file) as a share of the model's own (input → model). The rule: a lossy file may be the "
           "default only if it adds at most 5 % of the model's own distance; float32 must be the model within "
           "1e-5.")
    table, targets = [], []
    for r in rows:
        label = "float32 (default)" if r["quantize"] == "none" else "`--quantize int8`"
        layers = (f"{r['int8_layers']} ({100.0 * r['int8_weights'] / r['weights']:.0f} % of the weights)"
                  if r["weights"] else "0")
        snr = "identical" if r["snr_db"] is None else f"{r['snr_db']:.1f} dB"
        table.append([(f"{os.path.basename(r['run'].rstrip('/'))}, " if not a.trained_here else "")
                      + f"step {r['step']}", AUDIO.get(r["audio"], r["audio"]), f"{r['seconds']:.1f} s", label,
                      layers, f"{r['file_bytes'] / 2**20:.1f} MiB", snr, f"{r['max_abs_diff']:.2e}",
                      f"{r['added']:.4f}", f"{r['own']:.3f}", f"**{100.0 * r['share']:.2f} %**"])
        model = f"{a.config} at capacity {a.capacity}" if a.trained_here else os.path.basename(r["run"].rstrip("/"))
        where = f"{model}, step {r['step']}, {AUDIO.get(r['audio'], r['audio'])}"
        if r["quantize"] == "none":
            targets.append(benchlib.target(f"Streaming float32 export of a trained {where}: max |file − model|",
                                           "≤ 1e-5", "<=", 1e-5, [r["max_abs_diff"]], fmt="{:.1e}",
                                           over="checks"))
        else:
            targets.append(benchlib.target(f"Streaming `--quantize int8` export of a trained {where}: spectral "
                                           "distance added ÷ the model's own (what a lossy default needs)",
                                           "≤ 0.05", "<=", 0.05, [r["share"]], fmt="{:.4f}", over="checks"))
    b.table(["checkpoint", "audio", "compared", "export", "int8 layers", "file", "SNR", "max |diff|",
             "distance added", "model's own distance", "added ÷ own"], table)
    b.text("`--quantize int8` stays opt-in whatever these figures say: one model trained for minutes on the demo "
           "database does not show what int8 does to a converged model's timbre, and what it gains depends on the "
           "host's quantized engine: much with fbgemm (PyPI's x86 LibTorch), little or nothing with oneDNN "
           "(Debian's 1.13; section \"Exported RAVE v2 in realtime\"). `export` prints the same check for every "
           "file it writes, so each user sees it on their own model.")
    benchlib.write_summary(a, "export_fidelity", "Export fidelity on a trained model", b, raw={"rows": rows},
                           targets=targets, commands=["build/bin/export --run RUN --streaming --quantize none|int8 "
                                                      "--check_seconds S [--check_audio speech.wav]"])


if __name__ == "__main__":
    main()
