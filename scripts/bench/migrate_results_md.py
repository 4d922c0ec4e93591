#!/usr/bin/python3
"""One-time migration (issue #35, kept for the record of where the old figures went): the
Markdown fragments scripts/bench/*_results.md, bench-results.json and notes.json, as they stood
before results became JSON, -> scripts/bench/results/<name>.json and the docs/perf/ pages.

Nothing is measured or recomputed from Markdown except what the fragments print: their tables
and paragraphs are copied as blocks, each result says which file and commit it came from, and
its date is the fragment's last commit. bench-results.json's sections go through bench.py's own
record builders (the raw data is there). Run it from the repository root on the tree before the
migration; later results come from the benchmarks themselves.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import benchlib  # noqa: E402

ROOT = benchlib.ROOT


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True).stdout.strip()


def origin(path):
    """(short commit, ISO date) of the last commit that touched path."""
    sha, date = git("log", "-1", "--format=%h %cI", "--", path).split()
    return sha, date


def split_row(line):
    inner = line.strip()[1:-1]
    cells, cur, i = [], "", 0
    while i < len(inner):
        if inner[i] == "\\" and i + 1 < len(inner) and inner[i + 1] == "|":
            cur += "|"
            i += 2
            continue
        if inner[i] == "|":
            cells.append(cur.strip())
            cur = ""
        else:
            cur += inner[i]
        i += 1
    cells.append(cur.strip())
    return cells


def parse(path):
    """A fragment -> (title, blocks). Tables, ### headings, paragraphs, list items and code
    fences, in order."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    title, blocks, para, i = None, [], [], 0

    def flush():
        if para:
            blocks.append({"text": " ".join(x.strip() for x in para)})
            para.clear()
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            flush()
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            blocks.append({"text": "\n".join(lines[i:j + 1])})
            i = j + 1
            continue
        if line.startswith("## ") and title is None:
            flush()
            title = line[3:].strip()
        elif line.startswith("#"):
            flush()
            blocks.append({"heading": line.lstrip("#").strip()})
        elif line.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(split_row(lines[i]))
                i += 1
            body = [r for r in rows[1:] if not all(set(c) <= set("-:") for c in r)]
            blocks.append({"table": {"columns": rows[0], "rows": body}})
            continue
        elif not line.strip():
            flush()
        elif line.startswith("- ") or line.startswith("  - "):
            flush()
            para.append(line.rstrip())
        else:
            para.append(line)
        i += 1
    flush()
    return title, blocks


def tables(blocks):
    return [b["table"] for b in blocks if "table" in b]


def num(text):
    """'**0.42**' / '**+5.4%**' / '**1.93×** (1.92×)' -> 0.42 / 5.4 / 1.93 (first number)."""
    out, started = "", False
    for ch in text:
        if ch.isdigit() or ch == "." or (ch in "+-" and not started):
            out += ch
            started = started or ch.isdigit()
        elif started:
            break
    return float(out)


def to_docs(blocks, level="##"):
    """Blocks -> Markdown for a docs/perf page (the prose moved out of BENCHMARKS.md)."""
    out = []
    for b in blocks:
        if "text" in b:
            out += [b["text"], ""]
        elif "heading" in b:
            out += [f"{level} {b['heading']}", ""]
        else:
            t = b["table"]
            out.append("| " + " | ".join(t["columns"]) + " |")
            out.append("|" + "---|" * len(t["columns"]))
            out += ["| " + " | ".join(r) + " |" for r in t["rows"]]
            out.append("")
    return out


def fragment_record(fname, name, title, command, split_at=None, targets=None, analysis=None, extra_env=None):
    """split_at: the first block (index) that moves to the analysis page; the rest stays."""
    path = os.path.join("scripts", "bench", fname)
    sha, date = origin(path)
    _, blocks = parse(os.path.join(ROOT, path))
    moved = []
    if split_at is not None:
        blocks, moved = blocks[:split_at], blocks[split_at:]
    env = {"date": date}
    env.update(extra_env or {})
    r = benchlib.record(name, title, command, env, blocks, targets=(targets or (lambda b: []))(blocks),
                        analysis=analysis, migrated_from=f"{path} at {sha}")
    return r, moved


def t_ssm(blocks):
    out = []
    for row in tables(blocks)[0]["rows"]:
        if row[1] == "native_fused":
            out.append(benchlib.target(f"s5_maze training step, native/Python, {row[0]} thread(s)", "≤ 0.5", "<=", 0.5,
                                       [num(row[5])], over="ratio of medians; per-round ratios not kept"))
    return out


def t_profiling(blocks):
    out = []
    for row in tables(blocks)[1]["rows"]:
        out.append(benchlib.target(f"Timing + memory profiling overhead, {row[0]} (share of CPU samples)", "≤ 1 %",
                                   "<=", 1.0, [num(row[3])], fmt="{:.2f} %", over="perf runs"))
    return out


def t_tracing(blocks):
    out = []
    for row in tables(blocks)[1]["rows"]:
        if row[0] == "traced":
            label = "Detailed tracing overhead, tiny_rave (one process, every other step traced)"
        elif row[0] == "+ record_shapes":
            label = "… with record_shapes"
        else:
            continue
        out.append(benchlib.target(label, "≤ 10 %", "<=", 10.0, [num(row[4])], fmt="{:+.1f} %", over="in-process runs"))
    return out


def t_ddp(blocks):
    out = []
    for row in tables(blocks)[0]["rows"]:
        out.append(benchlib.target(f"Data parallel, {row[0]}: 2 ranks / 1 rank, 1 thread each (job examples/s)", "≥ 1.8×",
                                   ">=", 1.8, [num(row[3])], fmt="{:.2f}×", over="median of paired runs",
                                   note=f"paired runs {row[4]}, host ceiling {num(row[5]):.2f}×"))
        out.append(benchlib.target(f"Data parallel, {row[0]}: native / Python DDP, 2 ranks (step examples/s)", "≥ 1.0×",
                                   ">=", 1.0, [num(row[13])], fmt="{:.2f}×", over="ratios of medians"))
    return out


def t_export(blocks):
    for row in tables(blocks)[0]["rows"]:
        if row[0] == "1" and row[1] == "2048" and "streaming" in row[2]:
            return [benchlib.target("Exported RAVE v2 (streaming), forward on 2048-sample blocks, 1 thread: realtime "
                                    "factor", "≥ 10×", ">=", 10.0, [num(row[3])], fmt="{:.1f}×",
                                    over="median of rounds", note=f"rounds {row[4]}; the floor is below 10×")]
    return []


def t_fuzz(blocks):
    hour = tables(blocks)[1]["rows"]
    crashes = [int(num(r[7])) for r in hour]
    names = ", ".join(r[0][5:] for r in hour)
    return [benchlib.target("Fuzzing: an hour per decoder target, crashes", "0", "==", 0, crashes, fmt="{:.0f}",
                            over="targets", note=f"3,600 s each for {len(hour)} targets: {names}")]


def migrate_bench_results(out_dir):
    with open(os.path.join(ROOT, "bench-results.json")) as f:
        R = json.load(f)
    sha, _ = origin("bench-results.json")
    latest, previous = bench.env_of(R["environment"]), bench.env_of(R["environment_previous"])
    written = []
    for key, build in bench.BUILDERS:
        if not R.get(key):
            continue
        section = {"native_vs_rave": "rave", "whole_run": "whole", "op_counts": "ops", "flops": "flops",
                   "scaling": "scaling", "data": "data", "defaults": "defaults"}[key]
        recent = section in R["only"].split(",")
        env = dict(latest if recent else previous)
        command = ("scripts/bench/run.sh" + (" --quick" if not recent and R.get("quick_previous") else "")
                   + (f" (bench.py --only {R['only']})" if recent else ""))
        r = build(R[key], env, command)
        r["migrated_from"] = f"bench-results.json at {sha}"
        written.append(benchlib.write_result(r, out_dir))
    return written


def embed(json_name, name, title, fname, targets, moved_to=None, split_at=None):
    """gpu_check.json / rave_parity.json already hold their program's figures: the result's
    fields go beside them."""
    path = os.path.join(benchlib.RESULTS_DIR, json_name)
    with open(path) as f:
        data = json.load(f)
    r, moved = fragment_record(fname, name, title, data.get("command") or "", split_at=split_at, analysis=moved_to)
    r["targets"] = targets(data)
    for k, v in r.items():
        if k not in ("raw", "derived"):
            data[k] = v
    benchlib.check(data)
    with open(os.path.join(benchlib.RESULTS_DIR, name + ".json"), "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")
    if json_name != name + ".json":
        os.remove(path)
    return moved


def write_doc(path, title, intro, body):
    with open(os.path.join(ROOT, path), "w", encoding="utf-8") as f:
        f.write("\n".join([f"# {title}", "", intro, ""] + body).rstrip("\n") + "\n")


def main():
    out = benchlib.RESULTS_DIR
    for p in migrate_bench_results(out):
        print("wrote", p)
    specs = [
        ("ssm_step_results.md", "ssm_step", "s5_maze training step, native vs Python", "scripts/bench/ssm_step.sh --quick",
         None, t_ssm, "docs/perf/ssm_step.md"),
        ("profiling_results.md", "profiling", "Timing + memory profiling overhead",
         "scripts/bench/profiling_overhead.sh --quick", None, t_profiling, None),
        ("tracing_results.md", "tracing", "Detailed tracing overhead", "scripts/bench/tracing_overhead.sh --quick",
         None, t_tracing, "docs/perf/tracing.md"),
        ("ddp_results.md", "ddp", "Data-parallel training", "scripts/bench/ddp.sh", None, t_ddp, "docs/perf/ddp.md"),
        ("heap_retention_results.md", "heap_retention", "Freed memory kept for reuse (train.retain_freed_memory)",
         "scripts/bench/heap_retention.sh", None, None, None),
        ("long_run_rss_results.md", "long_run_rss", "Long run: RSS and profile size",
         "PART_MB=16 PARTS=4 MEMORY=1 scripts/bench/long_run_rss.sh 1000000", None, None, None),
        ("export_results.md", "export", "Exported RAVE v2 in realtime", "scripts/bench/export_bench.sh", None, t_export,
         None),
        ("rave_configs_results.md", "rave_configs", "RAVE's configurations on the CPU",
         "scripts/bench/rave_configs.sh --batch 2 --n_signal 131072 --threads 0", None, None, None),
        ("rave_smoke_results.md", "rave_smoke", "RAVE v2 / v3 at full size: 3 real steps on this CPU",
         "scripts/smoke_rave.sh", None, None, None),
        ("step_ab_results.md", "step_ab", "Refactor guard: RAVE v2 step, old build vs new build",
         "scripts/bench/step_ab.sh 94fa92d", None, None, None),
        ("fuzz_results.md", "fuzz", "Fuzzing the decoders of outside data", "scripts/fuzz.sh 3600 TARGET", 5, t_fuzz,
         "docs/perf/fuzzing.md"),
    ]
    moved = {}
    for fname, name, title, command, split_at, targets, analysis in specs:
        r, m = fragment_record(fname, name, title, command, split_at=split_at, targets=targets, analysis=analysis)
        if name == "ddp":  # the column definitions move to the analysis page
            keep = [b for b in r["blocks"] if not ("text" in b and b["text"].startswith("job: examples/s"))]
            m = [b for b in r["blocks"] if b not in keep]
            r["blocks"] = keep
        if name == "ssm_step":  # the fuller earlier runs of ssm_results.md, beside the latest
            _, old = parse(os.path.join(ROOT, "scripts", "bench", "ssm_results.md"))
            moved["ssm_results"] = old
            timing = [b for b in old if "table" in b and b["table"]["columns"][:2] == ["threads", "implementation"]]
            r["blocks"] += [{"heading": "Earlier run: `scripts/bench/ssm_step.sh --rounds 5 --steps 20 --threads \"1 2\"`"},
                            {"text": "Copied from scripts/bench/ssm_results.md (1-minute load 2.7–3.0 during the run; "
                                     "two later runs of the same command are quoted in the analysis page)."}] + timing
        moved[name] = m
        print("wrote", benchlib.write_result(r, out))
    moved["gpu_check"] = embed(
        "gpu_check.json", "gpu_check", "GPU: `scripts/gpu_check.sh` on a GPU node", "gpu_results.md",
        lambda d: [benchlib.target(
            f"RAVE v2 GPU step ({d['rave_env']['device_name']}), ours / the real RAVE's training_step, 8 × 131072, fp32 "
            "and bf16, phases 1 and 2", "≤ 0.9", "<=", 0.9,
            [r["ratio"] for r in d["comparison"] if r["config"].startswith("8x131072") and "ratio" in r],
            over="configs, one run each")])
    moved["rave_parity"] = embed(
        "rave_parity.json", "rave_parity", "RAVE training parity: our `train` against RAVE's own `rave train`",
        "rave_parity_results.md",
        lambda d: [benchlib.target(
            f"RAVE training parity, tiny v2, {d['steps']} steps × {d['runs_per_trainer']} runs per trainer "
            f"({d['device']}): gap of the mean final validations / the larger seed-to-seed spread",
            "≤ 1 (gap within the spread)", "<=", 1.0,
            [d["gap_of_means"] / max(d["rave_spread"], d["ours_spread"])], fmt="{:.3f}", over="comparison",
            note=f"ours / RAVE {d['ratio_of_mean_finals']:.3f}; gap {d['gap_of_means']:.3f}; spread "
                 f"{d['rave_spread']:.3f} RAVE, {d['ours_spread']:.3f} ours")])
    with open(os.path.join(HERE, "notes.json")) as f:
        notes = json.load(f)
    os.makedirs(os.path.join(ROOT, "docs", "perf"), exist_ok=True)
    note = ("Moved out of BENCHMARKS.md when its figures became data (issue #35). The measured figures are in "
            "[BENCHMARKS.md](../../BENCHMARKS.md), section \"{}\"; this page is the reading of them.")
    write_doc("docs/perf/ssm_step.md", "s5_maze step: method and analysis",
              note.format("s5_maze training step, native vs Python"), to_docs(moved["ssm_results"]))
    with open(os.path.join(ROOT, "scripts", "bench", "trace_results.md"), encoding="utf-8") as f:
        trace = f.read().split("\n", 1)[1]
    write_doc("docs/perf/tracing.md", "Detailed tracing: where its cost goes",
              note.format("Detailed tracing overhead"), trace.strip().splitlines())
    write_doc("docs/perf/ddp.md", "Data-parallel training: what the columns measure",
              note.format("Data-parallel training"), to_docs(moved["ddp"]))
    write_doc("docs/perf/fuzzing.md", "Fuzzing: what the runs found", note.format("Fuzzing the decoders of outside data"),
              to_docs(moved["fuzz"]))
    write_doc("docs/perf/rave_cpu.md", "Native vs the real RAVE on the CPU: notes",
              note.format("Native vs the real RAVE: same model, same LibTorch"), [f"- {n}" for n in notes["notes"]])
    write_doc("docs/perf/defaults.md", "Defaults: why they are what they are", note.format("Defaults"),
              list(notes.get("defaults", [])))


if __name__ == "__main__":
    main()
