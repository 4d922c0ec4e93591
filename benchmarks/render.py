"""BENCHMARKS.md from benchmarks/results/*.json alone (standard library only), for
benchmarks/bench.py, whose --render_only does nothing else.

One section per result file, in the order of TOPICS; a result whose name is not listed comes
after them, by name, and is reported on stderr. Each section says what produced its figures and
when. The targets table gathers every result's targets: the headline figure, the median and range
over the runs behind it, and "met" only when every run meets the goal. The output depends on the
JSON files alone, so rendering twice gives the same bytes.
"""
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402

# The sections' order: (result name, what it is about, for the contents line).
TOPICS = (
    ("rave_cpu_step", "RAVE step on the CPU"),
    ("rave_cpu_whole_run", "RAVE whole run on the CPU"),
    ("op_counts", "operator counts"),
    ("compute_efficiency", "compute efficiency"),
    ("scaling", "scaling"),
    ("data_path", "data path"),
    ("defaults", "defaults"),
    ("ssm_step", "s5_maze step"),
    ("ssm_kinds", "SSM kinds"),
    ("ssm_transfer", "SSM transfer vs scratch"),
    ("profiling", "profiling overhead"),
    ("tracing", "tracing overhead"),
    ("ddp", "data parallel"),
    ("heap_retention", "heap retention"),
    ("long_run_rss", "long run"),
    ("export", "export in realtime"),
    ("export_fidelity", "export fidelity"),
    ("onnx_export", "ONNX export"),
    ("rave_configs", "RAVE configs"),
    ("rave_smoke", "RAVE full size"),
    ("step_ab", "refactor guard"),
    ("fuzz", "fuzzing"),
    ("gpu_check", "GPU"),
    ("rave_parity", "training parity"),
)


def anchor(title):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    out = []
    for ch in title.strip().lower():
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "#" + "".join(out)


def cell(v):
    if v is None:
        return "—"
    return str(v).replace("|", "\\|").replace("\n", " ")


def table(t):
    lines = []
    if t.get("title"):
        lines += [t["title"], ""]
    lines.append("| " + " | ".join(cell(c) for c in t["columns"]) + " |")
    lines.append("|" + "---|" * len(t["columns"]))
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in t["rows"]]
    return lines


def load(directory):
    results = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
        if r.get("schema") is None:
            print(f"render: {os.path.relpath(path)} is not a result (no schema); skipped", file=sys.stderr)
            continue
        benchlib.check(r)
        results.append(r)
    order = {name: i for i, (name, _) in enumerate(TOPICS)}
    for r in results:
        if r["name"] not in order:
            print(f"render: {r['name']} is not in render.py's TOPICS; its section goes last", file=sys.stderr)
    return sorted(results, key=lambda r: (order.get(r["name"], len(order)), r["name"]))


def fmt(t, v):
    return t.get("format", "{}").format(v)


def target_row(r, t):
    runs = t["runs"]
    value = t.get("value", statistics.median(runs))
    met = all(benchlib.meets(t["op"], v, t["threshold"]) for v in runs)
    if len(runs) == 1:
        spread = f"n=1, {t.get('over', 'runs')}"
    else:
        spread = (f"median {fmt(t, statistics.median(runs))}, {fmt(t, min(runs))}–{fmt(t, max(runs))}, "
                  f"n={len(runs)} {t.get('over', 'runs')}")
    verdict = "met" if met else ("missed" if not any(benchlib.meets(t["op"], v, t["threshold"]) for v in runs)
                                 else "missed by some runs")
    measured = fmt(t, value) + (f" ({t['note']})" if t.get("note") else "")
    title = r["title"]
    return f"| {cell(t['target'])} | {cell(t['goal'])} | {cell(measured)} | {cell(spread)} | {verdict} | [{title}]({anchor(title)}) |"


def provenance(r):
    env = r.get("environment") or {}
    shown = r["command"] if "`" in r["command"] else f"`{r['command']}`"
    parts = [f"Measured {r['date'][:10]} by {shown}"]
    if env.get("git"):
        parts[0] += f" at {env['git']}"
    machine = (env["cpu_id"]["label"] if env.get("cpu_id") else
               ", ".join(str(x) for x in (env.get("cpu"), f"{env['nproc']} cores" if env.get("nproc") else None) if x))
    if machine:
        parts.append(machine)
    if env.get("load_before"):
        load_text = "load before " + " ".join(f"{x:.2f}" for x in env["load_before"])
        if env.get("load_after"):
            load_text += ", after " + " ".join(f"{x:.2f}" for x in env["load_after"])
        parts.append(load_text)
    if env.get("omp_wait_policy"):
        parts.append(f"`OMP_WAIT_POLICY={env['omp_wait_policy']}`")
    if env.get("openblas_coretype"):
        parts.append(f"`OPENBLAS_CORETYPE={env['openblas_coretype']}`")
    text = "; ".join(parts) + "."
    if r.get("migrated_from"):
        text += f" Figures copied from {r['migrated_from']} when results became JSON."
    return text


def render(results):
    dates = sorted(r["date"] for r in results)
    L = ["# Benchmarks", "",
         "<!-- Generated by benchmarks/bench.py --render_only from benchmarks/results/*.json; "
         "edit those (or rerun the benchmark), not this file. -->", "",
         f"Rendered from {len(results)} result files in `benchmarks/results/`, measured between "
         f"{dates[0][:10]} and {dates[-1][:10]}; each section names the command that produced its figures and "
         "when. Timings are medians with (min–max, n) over the runs named; A/B variants were run interleaved, one "
         "process per repetition, with the 1-minute load average recorded (a load near 1 is the benchmark itself; "
         "higher means something else ran). Spreads between identical runs are several % on the 2-core VM most "
         "of these ran on: compare medians. Readings of the figures are in [docs/perf/](docs/perf/).", ""]
    rows = [target_row(r, t) for r in results for t in r["targets"]]
    if rows:
        L += ["## Targets: where we stand", "",
              "The measured figure is the section's headline (a median, or a ratio of medians); the runs column "
              "gives the median and range of the figure over the runs, rounds or repetitions behind it. A target "
              "is met only when every run meets it.", "",
              "| target | goal | measured | runs | | section |", "|---|---|---|---|---|---|"] + rows + [""]
    for r in results:
        L += [f"## {r['title']}", "", provenance(r), ""]
        if r.get("analysis"):
            L += [f"Analysis: [{r['analysis']}]({r['analysis']}).", ""]
        for b in r["blocks"]:
            if "text" in b:
                L += [b["text"], ""]
            elif "heading" in b:
                L += [f"### {b['heading']}", ""]
            else:
                L += table(b["table"]) + [""]
    return "\n".join(L).rstrip("\n") + "\n"


def write(results_dir, md):
    """Renders every result of results_dir into the file md."""
    results = load(results_dir)
    if not results:
        raise SystemExit(f"render: no results in {results_dir}")
    with open(md, "w", encoding="utf-8") as f:
        f.write(render(results))
    print(f"render: {md} from {len(results)} results in {results_dir}")
