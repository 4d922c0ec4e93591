"""What the benchmark programs under benchmarks/ share (standard library only, importable by every
Python they run in): options() (the one argument parser), emit() (a peer's JSON record),
environment(), Blocks and sections() (a section's content and its constant text in sections.toml),
target(), record() and write_result() (the one result writer), and render() (BENCHMARKS.md from the
results alone: one section per result in the order of TOPICS, the targets table gathering every
result's targets; rendering twice gives the same bytes).

A result, benchmarks/results/<name>.json, is a JSON object: schema (RESULT_SCHEMA), name (the
file's stem), title, date (ISO 8601, the measuring machine's local time), command (what produced
it), environment (date, git describe, cpu, nproc, load before/after, OMP_WAIT_POLICY, ...),
commands (the programs it ran, optional), raw (every run's figures as measured), derived (figures
computed from raw), blocks (what the section shows, in order: {"text": ...}, {"heading": ...},
{"table": {"columns": [...], "rows": [[...], ...]}}), targets (see target()), analysis (a
docs/perf/*.md page reading the figures, optional), migrated_from (where figures measured before
this format were copied from).
"""
import argparse
import datetime
import glob
import json
import operator
import os
import platform
import statistics
import subprocess
import sys
import time

RESULT_SCHEMA = 1
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS_DIR = os.path.join(HERE, "results")
OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "==": operator.eq}


def options(doc, spec, argv=None, **parser_args):
    """The argument parser of every program here. spec: {name: default}; the default's type is the
    option's (int, float, str; False: a flag; a list: repeatable; ...: required; None: a string,
    optional). "--name" and "--na-me" both work. "_args": positional arguments (a list)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter, **parser_args)
    for name, default in spec.items():
        flags = list(dict.fromkeys(("--" + name, "--" + name.replace("_", "-"))))
        if name == "_args":
            ap.add_argument("args", nargs="*")
        elif default is False:
            ap.add_argument(*flags, dest=name, action="store_true")
        elif isinstance(default, list):
            ap.add_argument(*flags, dest=name, action="append", default=list(default))
        else:
            ap.add_argument(*flags, dest=name, type=str if default in (None, ...) else type(default),
                            required=default is ..., default=None if default is ... else default)
    return ap.parse_args(argv)


def emit(obj, path=None, **dump):
    """A peer's JSON record: printed as one line on stdout (path None or "-"), else written to path."""
    if path in (None, "-"):
        print(json.dumps(obj, default=str), flush=True)
        return
    with open(path, "w") as f:
        json.dump(obj, f, default=str, **dump)


def load_avg():
    """The 1-, 5- and 15-minute load averages, or None."""
    try:
        with open("/proc/loadavg") as f:
            return [float(v) for v in f.read().split()[:3]]
    except OSError:
        return None


def cpuinfo():
    """The first processor's fields in /proc/cpuinfo (name -> value); {} where there is none."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def cpu_model():
    return cpuinfo().get("model name") or platform.processor() or platform.machine()


def cpu_identity():
    """The host as a benchmark row names it: vendor, family and model numbers and the widest vector
    ISA from /proc/cpuinfo (a VM's model name is often just "AMD EPYC"; the numbers tell generations
    apart). label: e.g. "AMD EPYC (family 26 model 2, AVX-512), 2 cores"."""
    fields = cpuinfo()
    flags = set(fields.get("flags", "").split())
    isa = next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX")) if flag in flags),
               "SSE" if flags else None)
    ident = {"vendor": fields.get("vendor_id"), "family": fields.get("cpu family"), "model": fields.get("model"),
             "model_name": cpu_model(), "isa": isa, "nproc": os.cpu_count()}
    numbers = ", ".join(x for x in (ident["family"] and f"family {ident['family']} model {ident['model']}", isa) if x)
    ident["label"] = ident["model_name"] + (f" ({numbers})" if numbers else "") + f", {ident['nproc']} cores"
    return ident


def git_describe(root=ROOT):
    try:
        return subprocess.run(["git", "-C", root, "describe", "--always", "--dirty", "--abbrev=7"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def now():
    return datetime.datetime.now().isoformat(timespec="seconds")


def openblas_coretype():
    """The OPENBLAS_CORETYPE every arm of a benchmark runs with: the user's; else, where OpenBLAS
    falls back to its SSE3 (Prescott) kernels on a CPU with AVX2 and FMA, the kernels our programs
    choose there (util/blas_kernels.h), so that the Python peers get them too; None leaves OpenBLAS's
    own choice."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return os.environ["OPENBLAS_CORETYPE"]
    flags = set(cpuinfo().get("flags", "").split())
    probe = subprocess.run([sys.executable, "-c", "import ctypes; ctypes.CDLL('libopenblas.so.0')"],
                           env=dict(os.environ, OPENBLAS_VERBOSE="2"), capture_output=True, text=True)
    if not {"avx2", "fma"} <= flags or "Core: Prescott" not in probe.stdout + probe.stderr:
        return None
    return "SkylakeX" if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags else "Haswell"


def environment(load_before=None, git=None, **extra):
    """The machine and tree a result comes from. load_before: the load when the benchmark started
    (load_avg()); the load now is load_after."""
    env = {"date": now(), "git": git or git_describe(), "cpu": cpu_model(), "nproc": os.cpu_count(),
           "machine": platform.machine(), "load_before": load_before, "load_after": load_avg(),
           "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
           "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"), "cpu_id": cpu_identity()}
    env.update({k: v for k, v in extra.items() if v is not None})
    return env


def spread(values, fmt="{:.1f}", bold=False, head=None):
    """'median (min–max)' of values in fmt, the median in bold if asked; head replaces the median
    (a headline figure that is not the median of these values)."""
    v = sorted(values)
    head = head or fmt.format(statistics.median(v))
    return f"{f'**{head}**' if bold else head} ({fmt.format(v[0])}–{fmt.format(v[-1])})"


def summary(values):
    """Median, min, max and n of a list of numbers (None for an empty list)."""
    v = sorted(values)
    return {"median": statistics.median(v), "min": v[0], "max": v[-1], "n": len(v)} if v else None


def grouped(rows, *keys, value="median_ms"):
    """{(row[key], ...): [row[value], ...]} of rows, in their order."""
    out = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r[value])
    return out


def ratio_rows(runs, arms, base, bold=None):
    """runs: {(threads, arm): [ms, ...]}. Per thread count and arm: a row [threads, arm, median ms,
    min–max, n, median / base's median (in bold for arm `bold`)]; and every arm's summary(), by
    "ARM_tTHREADS_ms"."""
    rows, summaries = [], {}
    for t in sorted({k[0] for k in runs}):
        ref = runs.get((t, base))
        for arm in (a for a in arms if runs.get((t, a))):
            v, m = runs[(t, arm)], statistics.median(runs[(t, arm)])
            summaries[f"{arm}_t{t}_ms"] = summary(v)
            ratio = f"{m / statistics.median(ref):.2f}" if ref else "—"
            rows.append([t, arm, f"{m:.1f}", f"{min(v):.1f}–{max(v):.1f}", len(v), f"**{ratio}**" if arm == bold else ratio])
    return rows, summaries


def time_calls(call, warm, timed):
    """call(x) for every x of warm untimed, then of timed: the ms of each timed call."""
    for x in warm:
        call(x)
    ms = []
    for x in timed:
        t0 = time.perf_counter()
        call(x)
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms


def job_examples_per_second(run_out):
    """The training_summary.json of the one run under a train --out_path, and examples per second
    of the whole job over the training loop (steps · batch · world size / training time)."""
    with open(glob.glob(os.path.join(run_out, "*", "training_summary.json"))[0]) as f:
        s = json.load(f)
    return s, s["total_steps"] * s["batch"] * s["world_size"] / s["total_training_time_seconds"]


def gnuplot(png, dat, series, script, size):
    """A png of size "W,H" by gnuplot: series [(name, [[x, y, ...], ...])] written to dat, the i-th as
    its `index i`; script: the commands after the terminal and output."""
    with open(dat, "w") as f:
        f.writelines(f"# {name}\n" + "".join(" ".join(map(str, p)) + "\n" for p in points) + "\n\n"
                     for name, points in series)
    script = [f"set terminal pngcairo size {size} font 'DejaVu Sans,10'", f"set output '{png}'", *script]
    subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True, check=True)


def latest_run(out_path):
    """The newest run under a train --out_path (its `latest` file names it)."""
    with open(os.path.join(out_path, "latest")) as f:
        return os.path.join(out_path, f.read().strip())


def demo_audio(bin_dir, folder, seconds, seed=1):
    """preprocess --generate_demo: the demo's audio files (seconds per file) in folder."""
    subprocess.run([os.path.join(bin_dir, "preprocess"), "--generate_demo", folder, "--force", "--demo_seconds",
                    str(seconds), "--seed", str(seed)], check=True, capture_output=True)
    return folder


def demo_audio_db(bin_dir, db, seconds, *args, seed=1):
    """The demo audio (at DB_audio) imported into the LMDB db with preprocess's further args; db."""
    audio = demo_audio(bin_dir, db + "_audio", seconds, seed)
    subprocess.run([os.path.join(bin_dir, "preprocess"), "--input_path", audio, "--output_path", db, *map(str, args)],
                   check=True, capture_output=True)
    return db


def target(label, goal, op, threshold, runs, value=None, fmt="{:.2f}", over="runs", note=None, host=None):
    """One goal the targets table shows. runs: the figure of every run (or round, or repetition, as
    `over` says); the goal is met only when every run meets it (op: "<=", ">=", "<", ">", "==").
    value: the headline figure, when it is not the median of runs (e.g. a ratio of medians); fmt
    formats value and runs. host: the host it was measured on (cpu_identity's label), named in the
    label and kept, for results that keep a row per host (keep_other_hosts)."""
    t = {"target": f"{label}; {host}" if host else label, "goal": goal, "op": op, "threshold": threshold,
         "runs": list(runs), "format": fmt, "over": over, "value": value}
    t.update((k, v) for k, v in (("note", note), ("host", host)) if v)
    return t if value is not None else {k: v for k, v in t.items() if k != "value"}


class Blocks(list):
    """The section's content in order (see the module docstring). texts: the section's constant
    text in sections.toml ([KEY.text]): say() and line() fill a template's {fields} (str.format),
    table() takes a key of it for the columns."""

    def __init__(self, texts=None):
        super().__init__()
        self.texts = texts or {}

    def line(self, key, **fields):
        return self.texts[key].format(**fields)

    def lines(self, key, **fields):
        """A list of templates (e.g. the section's commands), filled in."""
        return [x.format(**fields) for x in self.texts[key]]

    def say(self, key, **fields):
        return self.text(self.line(key, **fields))

    def text(self, *parts):
        self.append({"text": " ".join(p for p in parts if p)})
        return self

    def heading(self, title):
        self.append({"heading": title})
        return self

    def table(self, columns, rows):
        self.append({"table": {"columns": list(self.texts[columns] if isinstance(columns, str) else columns),
                               "rows": [list(r) for r in rows]}})
        return self


def sections():
    """benchmarks/sections.toml: every benchmark's description (what bench.py --list shows) and its
    section's constant text, by the benchmark's key."""
    import tomllib
    with open(os.path.join(HERE, "sections.toml"), "rb") as f:
        return tomllib.load(f)


def record(name, title, command, env, blocks, raw=None, derived=None, targets=None, commands=None,
           analysis=None, **extra):
    """A result object (see the module docstring); write it with write_result."""
    r = {"schema": RESULT_SCHEMA, "name": name, "title": title, "date": env.get("date") or now(),
         "command": command, "environment": env, "commands": list(commands or []),
         "raw": {} if raw is None else raw, "derived": {} if derived is None else derived,
         "blocks": list(blocks), "targets": list(targets or []), "analysis": analysis}
    return dict({k: v for k, v in r.items() if k not in ("commands", "analysis") or v}, **extra)


def check(r):
    """Raises ValueError when r is not a result bench.py can render."""
    missing = [k for k in ("schema", "name", "title", "date", "command", "blocks", "targets") if k not in r]
    if missing or r["schema"] != RESULT_SCHEMA:
        raise ValueError(f"result {r.get('name', '?')}: no {missing} or schema {r.get('schema')} != {RESULT_SCHEMA}")
    for b in r["blocks"]:
        if len(b) != 1 or next(iter(b)) not in ("text", "heading", "table"):
            raise ValueError(f"result {r['name']}: block {str(b)[:80]} is none of text, heading, table")
        for row in b["table"]["rows"] if "table" in b else []:
            if len(row) != len(b["table"]["columns"]):
                raise ValueError(f"result {r['name']}: row {row} has {len(row)} cells, not {len(b['table']['columns'])}")
    for t in r["targets"]:
        if t["op"] not in OPS or not t["runs"]:
            raise ValueError(f"result {r['name']}: target {t['target']!r} needs an op and at least one run")


def results_dir(path=None):
    """--results_dir, else $BENCH_RESULTS_DIR, else benchmarks/results."""
    return path or os.environ.get("BENCH_RESULTS_DIR") or RESULTS_DIR


def write_result(r, directory=None):
    """Writes r to <directory>/<name>.json (see results_dir) and returns the path."""
    check(r)
    directory = results_dir(directory)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, r["name"] + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(r, f, indent=1, ensure_ascii=False, default=str)
        f.write("\n")
    return path


def other_hosts(name, host, directory=None):
    """The hosts an earlier result of benchmark `name` (in directory) measured other than `host`,
    kept so that a targets table holds one row per host: that result's own figures (when its host
    differs) and the hosts it carried. Each: host, date, git, command, load_before, table (the
    section's first table: columns and rows), targets (each with its host)."""
    try:
        with open(os.path.join(results_dir(directory), name + ".json"), encoding="utf-8") as f:
            prev = json.load(f)
    except (OSError, ValueError):
        return []
    kept = [h for h in prev.get("other_hosts", []) if h["host"] != host]
    env = prev.get("environment") or {}
    # Results written before cpu_identity was recorded name the model and cores.
    prev_host = (env["cpu_id"]["label"] if env.get("cpu_id") else
                 f"{env.get('cpu', '?')}, {env.get('nproc', '?')} cores (family and model not recorded)")
    if prev_host != host:
        kept.insert(0, {"host": prev_host, "date": prev.get("date"), "git": env.get("git"),
                        "command": prev.get("command"), "load_before": env.get("load_before"),
                        "table": next((b["table"] for b in prev.get("blocks", []) if "table" in b), None),
                        "targets": [dict(t, host=t.get("host", prev_host)) for t in prev.get("targets", [])]})
    return kept


def keep_other_hosts(blocks, targets, name, host, directory=None):
    """Keeps the hosts an earlier result of `name` measured (other_hosts) beside this one: an
    "Other hosts" part of the section (each host's provenance and first table) appended to blocks,
    their targets appended to targets, each noting when and at which commit it was measured.
    Returns them, for the result's other_hosts field."""
    carried = other_hosts(name, host, directory)
    if not carried:
        return carried
    blocks.heading("Other hosts")
    blocks.text(f"This section's figures are from {host}. The same command on other hosts, kept from earlier runs "
                "(each run keeps the hosts it does not measure; the targets table has a row per host, each noting "
                "when and at which commit it was measured):")
    for h in carried:
        load = (", load before " + " ".join(f"{x:.2f}" for x in h["load_before"])) if h.get("load_before") else ""
        blocks.text(f"**{h['host']}**: measured {(h.get('date') or '?')[:10]} by `{h.get('command')}` at "
                    f"{h.get('git') or '?'}{load}.")
        if h.get("table"):
            blocks.table(h["table"]["columns"], h["table"]["rows"])
    targets += [dict(t, note=f"measured {(h.get('date') or '?')[:10]} at {h.get('git') or '?'}")
                for h in carried for t in h["targets"]]
    return carried


# The sections' order, by result name.
TOPICS = ("rave_cpu_step", "rave_cpu_whole_run", "op_counts", "compute_efficiency", "scaling", "data_path", "defaults",
          "ssm_step", "ssm_kinds", "ssm_transfer", "profiling", "tracing", "ddp", "heap_retention", "long_run_rss",
          "export", "export_fidelity", "onnx_export", "rave_configs", "rave_smoke", "step_ab", "fuzz", "gpu_check",
          "rave_parity")


def anchor(title):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return "#" + "".join("-" if ch == " " else ch for ch in title.strip().lower() if ch.isalnum() or ch in "-_ ")


def cell(v):
    return "—" if v is None else str(v).replace("|", "\\|").replace("\n", " ")


def md_table(t):
    return (["| " + " | ".join(cell(c) for c in t["columns"]) + " |", "|" + "---|" * len(t["columns"])]
            + ["| " + " | ".join(cell(c) for c in row) + " |" for row in t["rows"]])


def load_results(directory):
    """Every result in directory, in the order of TOPICS (others last, by name, noted on stderr)."""
    results = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
        if r.get("schema") is None:
            print(f"render: {os.path.relpath(path)} is not a result (no schema); skipped", file=sys.stderr)
            continue
        check(r)
        results.append(r)
    order = {name: i for i, name in enumerate(TOPICS)}
    for r in results:
        if r["name"] not in order:
            print(f"render: {r['name']} is not in benchlib's TOPICS; its section goes last", file=sys.stderr)
    return sorted(results, key=lambda r: (order.get(r["name"], len(order)), r["name"]))


def target_row(r, t):
    runs, f = t["runs"], t.get("format", "{}").format
    value = t.get("value", statistics.median(runs))
    over = t.get("over", "runs")
    spread_ = (f"n=1, {over}" if len(runs) == 1 else
               f"median {f(statistics.median(runs))}, {f(min(runs))}–{f(max(runs))}, n={len(runs)} {over}")
    ok = [OPS[t["op"]](v, t["threshold"]) for v in runs]
    verdict = "met" if all(ok) else "missed by some runs" if any(ok) else "missed"
    measured = f(value) + (f" ({t['note']})" if t.get("note") else "")
    return (f"| {cell(t['target'])} | {cell(t['goal'])} | {cell(measured)} | {cell(spread_)} | {verdict} | "
            f"[{r['title']}]({anchor(r['title'])}) |")


def provenance(r):
    env = r.get("environment") or {}
    shown = r["command"] if "`" in r["command"] else f"`{r['command']}`"
    parts = [f"Measured {r['date'][:10]} by {shown}" + (f" at {env['git']}" if env.get("git") else "")]
    machine = (env["cpu_id"]["label"] if env.get("cpu_id") else
               ", ".join(str(x) for x in (env.get("cpu"), f"{env['nproc']} cores" if env.get("nproc") else None) if x))
    if machine:
        parts.append(machine)
    if env.get("load_before"):
        parts.append("load before " + " ".join(f"{x:.2f}" for x in env["load_before"])
                     + (", after " + " ".join(f"{x:.2f}" for x in env["load_after"]) if env.get("load_after") else ""))
    parts += [f"`{k.upper()}={env[k]}`" for k in ("omp_wait_policy", "openblas_coretype") if env.get(k)]
    text = "; ".join(parts) + "."
    if r.get("migrated_from"):
        text += f" Figures copied from {r['migrated_from']} when results became JSON."
    return text


def render(results):
    """BENCHMARKS.md's text from the results (load_results)."""
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
            L += ([b["text"], ""] if "text" in b else [f"### {b['heading']}", ""] if "heading" in b
                  else md_table(b["table"]) + [""])
    return "\n".join(L).rstrip("\n") + "\n"
