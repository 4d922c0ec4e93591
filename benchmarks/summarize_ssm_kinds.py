#!/usr/bin/python3
"""ssm_kinds.sh's runs (one JSON line per run of ssm_step_bench --ssm KIND, in round order) and
`train --summary` outputs (summary_<kind>.txt) -> benchmarks/results/ssm_kinds.json: the
parameter counts of each kind's layer, block and whole s5_maze model; every run's median step
time; per kind and thread count the median and spread of the run medians, and the ratio to s5."""
import os
import re
import statistics

import benchlib


def parse_summary(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()

    def find(pattern):
        m = re.search(pattern, text, re.M)
        if not m:
            raise SystemExit(f"summarize_ssm_kinds: no match for {pattern!r} in {path}")
        return m.groups()
    layer, layer_params = find(r"^[ ]+ssm \((\w+)\)[ ]+params ([\d,]+)")
    count = lambda pattern: int(find(pattern)[0].replace(",", ""))  # noqa: E731
    return {"header": text.splitlines()[0].strip(), "layer_class": layer,
            "layer_params": int(layer_params.replace(",", "")),
            "block_params": count(r"^[ ]+0 \(\w+\)[ ]+params ([\d,]+)"),
            "model_params": count(r"^total params ([\d,]+)"),
            "no_decay_params": count(r"^SSM parameters \(.*\): ([\d,]+)")}


def main():
    a = benchlib.summary_parser(__doc__, "raw summaries rounds:int steps:int kinds").parse_args()
    kinds = a.kinds.split()
    rows = benchlib.read_jsonl(a.raw)
    params = {k: parse_summary(os.path.join(a.summaries, f"summary_{k}.txt")) for k in kinds}
    runs = {}
    for r in rows:
        runs.setdefault((r["threads"], r["ssm"]), []).append(r["median_ms"])

    b = benchlib.Blocks()
    b.text("`model.ssm` selects the layer inside each block (docs/cli.md, \"SSM kinds\"). The s5_maze decoder "
           "(Linear 182→64, one block: BatchNorm, SSM layer, GLU, dropout 0.05; Linear 64→2) with each kind "
           "at width 64 and state 64. Parameter counts from `train --config s5_maze --model.ssm KIND --summary` "
           "on a 182-unit synthetic database; \"Λ, step\" are the layer's A and step parameters, which train "
           "without weight decay and which `train.transfer_mode = freeze_a` freezes.")
    b.table(["kind", "layer", "SSM layer params", "of which Λ, step", "block params", "s5_maze model params"],
            [[k, params[k]["layer_class"], f"{params[k]['layer_params']:,}", f"{params[k]['no_decay_params']:,}",
              f"{params[k]['block_params']:,}", f"{params[k]['model_params']:,}"] for k in kinds])
    b.text(f"Training step, batch 64 × 140 bins × 182 units (zero_grad + forward + MSE + backward + AdamW, "
           f"`model.scan = fused`: the fused recurrence for s5 and lru, the FFT convolution for s4d): "
           f"{a.rounds} rounds, the kinds interleaved within each round and thread count, one process per run, "
           f"{a.steps} timed steps after 3 warm-up steps; the median of the per-run medians, their spread, and "
           "the ratio of medians to s5 at the same thread count.")
    table, derived = [], {"params": params}
    for t in sorted({k[0] for k in runs}):
        base = runs.get((t, "s5"))
        for k in kinds:
            v = runs.get((t, k))
            if not v:
                continue
            m = statistics.median(v)
            derived[f"{k}_t{t}_ms"] = benchlib.summary(v)
            ratio = f"{m / statistics.median(base):.2f}" if base else "—"
            table.append([t, k, f"{m:.1f}", f"{min(v):.1f}–{max(v):.1f}", len(v), ratio])
    b.table(["threads", "kind", "median step (ms)", "spread of run medians (ms)", "runs", "vs s5"], table)
    benchlib.write_summary(a, "ssm_kinds", "SSM kinds side by side: s5, s4d, lru on the s5_maze shape", b,
                           raw={"runs": rows}, derived=derived,
                           commands=["build/bin/train --config s5_maze --model.ssm KIND --summary --db_path DB",
                                     f"build/bin/ssm_step_bench --threads T --steps {a.steps} --warmup 3 --scan fused "
                                     "--ssm KIND"])


if __name__ == "__main__":
    main()
