#!/usr/bin/python3
"""export_bench.sh's runs (one JSON line of build/bin/export_bench per round, thread count and
block size) -> scripts/bench/results/export.json: the realtime factor of each arm per round, its
median and range, the weight-read floor, and the ≥ 10× target."""
import argparse
import statistics

import benchlib

ARMS = (("rtf_export_streaming", "exported, `--streaming` (what nn~ loads)"),
        ("rtf_cpp_module", "C++ module (RaveModel::forward per block)"),
        ("rtf_export_offline", "exported, offline"))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--raw", required=True, help="export_bench's JSON lines")
    ap.add_argument("--command", required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--blocks", required=True)
    ap.add_argument("--load_before")
    ap.add_argument("--results_dir")
    a = ap.parse_args()
    rows = benchlib.read_jsonl(a.raw)
    keys = sorted({(r["threads"], r["block"]) for r in rows})
    b = benchlib.Blocks()
    b.text(f"RAVE v2 at full size (capacity 96, latent 128, ratio 2048), `forward` called on blocks of {a.blocks} "
           f"samples under `c10::InferenceMode` as nn~ does, {a.seconds:g} s of audio per arm after 5 warm-up "
           f"blocks, {a.rounds} interleaved rounds; realtime factor = seconds of audio per second of compute "
           "(goal ≥ 10×).")
    table, derived, targets = [], {}, []
    for t, blk in keys:
        sel = [r for r in rows if r["threads"] == t and r["block"] == blk]
        for key, label in ARMS:
            v = [r[key] for r in sel]
            m = statistics.median(v)
            derived[f"{key}_t{t}_b{blk}"] = benchlib.summary(v)
            cell = f"**{m:.1f}×**" if key == "rtf_export_streaming" else f"{m:.1f}×"
            table.append([t, blk, label, cell, f"{min(v):.1f}–{max(v):.1f}"])
        if t == 1 and blk == 2048:
            targets.append(benchlib.target(
                "Exported RAVE v2 (streaming), forward on 2048-sample blocks, 1 thread: realtime factor",
                "≥ 10×", ">=", 10.0, [r["rtf_export_streaming"] for r in sel], fmt="{:.1f}×", over="rounds"))
    b.table(["threads", "block", "arm", "realtime factor (median)", "runs' range"], table)
    b.text("The floor: every `forward` call reads every weight once (at 2048 samples the latent is one frame, so "
           "the large top-level convolutions are matrix-vector products). The exported module's weights are "
           f"{rows[0]['parameter_bytes'] / 2**20:.1f} MiB (float32); one read of them is a sum over each, the same "
           "library on the same threads.")
    floor = []
    for t, blk in keys:
        sel = [r for r in rows if r["threads"] == t and r["block"] == blk]
        read = statistics.median(r["weights_read_ms"] for r in sel)
        budget = sel[0]["block_ms_at_10x"]
        floor.append([t, blk, f"{read:.1f} ms", f"{budget:.1f} ms", f"{10 * budget / read:.1f}×"])
    b.table(["threads", "block", "one read of every weight (median)", "time per block at 10× realtime",
             "best realtime factor the reads alone allow"], floor)
    for t, blk in keys:
        sel = [r for r in rows if r["threads"] == t and r["block"] == blk]
        read = statistics.median(r["weights_read_ms"] for r in sel)
        budget = sel[0]["block_ms_at_10x"]
        rtf = statistics.median(r["rtf_export_streaming"] for r in sel)
        verdict = ("the reads alone take longer than the 10× budget, so ≥ 10× is out of reach on this CPU "
                   "whatever the kernels" if read > budget else "10× is within the floor")
        b.text(f"{t} thread(s), {blk}-sample blocks: the streaming export takes {10 * budget / rtf:.1f} ms per block, "
               f"{read:.1f} ms of which the weight reads alone need; {verdict}.")
    b.text(f"Streaming latency of `forward`: {rows[0]['forward_latency_samples']} samples "
           f"({rows[0]['forward_latency_samples'] / 44.1:.0f} ms at 44.1 kHz), plus nn~'s buffering.")
    env = benchlib.environment(a.load_before)
    rec = benchlib.record("export", "Exported RAVE v2 in realtime", a.command, env, b,
                          raw={"runs": rows}, derived=derived, targets=targets,
                          commands=["build/bin/export_bench --version v2 --block BLOCK --threads T "
                                    f"--seconds {a.seconds:g}"])
    print(benchlib.write_result(rec, a.results_dir))


if __name__ == "__main__":
    main()
