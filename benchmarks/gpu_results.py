#!/usr/bin/env python3
"""The figures of scripts/gpu_check.sh (docs/offline_gpu.md): read off its runs on the GPU node,
then from one run's files (its $OUT) the result benchmarks/results/gpu_check.json (standard library
only, except `hta`).

  gpu_results.py OUT_DIR [OUT_DIR ...] [--command TEXT] [--keep_traces_from JSON] [--results_dir DIR]
  gpu_results.py --from_json benchmarks/results/gpu_check.json [--results_dir DIR]
  gpu_results.py step RUN_DIR [--skip N]   one `train` run's median step time and GPU memory
  gpu_results.py hta TRACE_DIR OUT.json    HTA's temporal, kernel and idle-time breakdowns (HTA, pandas)
  gpu_results.py trace TRACE.json          what a trace holds; exit 1 unless it has kernel and memcpy
                                           rows, ac2g flows and deviceProperties
  (step, hta and trace run on the GPU node; each prints one JSON object.)

OUT_DIRs: gpu_check.log, steps.jsonl, ours_step.jsonl, rave_step.json and runs.tar.gz of the calls
of one session on one machine (gpu_check.sh --only ...): each file is read from the last that has
it, the step lists joined; the date is the last gpu_check.log's. --keep_traces_from keeps an earlier
gpu_check.json's trace, HTA and memory-snapshot figures when these calls traced nothing.
--from_json remakes the result from an earlier one's figures (date, command, environment kept).
"""
import collections
import datetime
import glob
import io
import json
import os
import re
import statistics
import sys
import tarfile

import benchlib

SECTION = benchlib.sections()["gpu_check"]
# What raw holds (every figure read off the OUT_DIRs) and derived (what is computed from them).
RAW_KEYS = ("env", "steps", "ours", "rave", "rave_env", "rave_steps", "traces", "hta", "memory_snapshots",
            "traces_env")
DERIVED_KEYS = ("comparison", "bf16_speedup")


def config_key(batch, n_signal, precision, phase):
    return f"{batch}x{n_signal} {precision} phase {phase}"


def read_runs(tar_path, traces, hta, snapshots, reserved):
    """trace_figures.json, hta.json, memory snapshots, copy kinds and (reserved, by run folder) the GPU
    memory reserved at the last memory_profile.json entry (GiB) of one runs.tar.gz."""
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if len(parts) == 4 and parts[2] == "profiler_traces" and parts[3].endswith(".pt.trace.json"):
                # Which copies the window made: "Memcpy HtoD (Pinned -> Device)" is a pinned batch.
                run = re.sub(r"_\d{4}-\d\d-\d\d_[0-9a-f]+$", "", parts[1])
                events = json.load(tar.extractfile(member))["traceEvents"]
                kinds = {}
                for e in events:
                    if e.get("cat") == "gpu_memcpy":
                        kinds[e["name"]] = kinds.get(e["name"], 0) + 1
                traces.setdefault(run, {})["memcpy_kinds"] = kinds
            if len(parts) != 3:
                continue
            run = re.sub(r"_\d{4}-\d\d-\d\d_[0-9a-f]+$", "", parts[1])
            if parts[2] == "trace_figures.json":
                traces.setdefault(run, {}).update(json.load(tar.extractfile(member)))
            elif parts[2] == "hta.json":
                hta[run] = json.load(tar.extractfile(member))
            elif parts[2] == "memory_profile.json":
                cuda = json.load(tar.extractfile(member))[-1]["memory"].get("cuda:0")
                reserved[parts[1]] = cuda["reserved_bytes"] / 2**30 if cuda else None
            elif parts[2].startswith("memory_snapshot") and parts[2].endswith(".pickle"):
                import pickle
                snap = pickle.load(io.BytesIO(tar.extractfile(member).read()))
                snapshots[run] = {"file": parts[2], "bytes": member.size, "keys": sorted(snap),
                                  "segments": len(snap["segments"]),
                                  "trace_entries": sum(len(t) for t in snap["device_traces"])}


def last_with(out_dirs, name):
    found = [d for d in out_dirs if os.path.exists(os.path.join(d, name))]
    if not found:
        raise SystemExit(f"gpu_results: no {name} in {', '.join(out_dirs)}")
    return os.path.join(found[-1], name)


def collect(out_dirs):
    log = "\n".join(open(os.path.join(d, "gpu_check.log")).read() for d in out_dirs)
    env = {k: next(iter(re.findall(p, log, re.M)), None) for k, p in (
        ("python_torch", r"^python (.*)$"), ("device", r"^device (.*)$"), ("nvidia_smi", r"^(NVIDIA .*MHz)$"),
        ("host", r"^host (.*)$"), ("kit", r"^(?:gpu-kit|offline bundle) made (.*)$"))}
    steps = [json.loads(line) for d in out_dirs for line in open(os.path.join(d, "steps.jsonl"))
             if json.loads(line)["step"] != "pack"]
    ours = {}
    for line in open(last_with(out_dirs, "ours_step.jsonl")):
        d = json.loads(line)
        m = re.search(r"v2_b(\d+)_n(\d+)_(fp32|bf16)_phase(\d)", d["run"])
        ours[config_key(*m.groups())] = d
    rave_file = json.load(open(last_with(out_dirs, "rave_step.json")))
    rave = {}
    for r in rave_file["results"]:
        for p in r.get("phases", []):
            rave[config_key(r["batch"], r["n_signal"], r["precision"], p["phase"])] = dict(
                p, valid_signal_crop=r["valid_signal_crop"])
    traces, hta, snapshots, reserved = {}, {}, {}, {}
    for d in out_dirs:
        if os.path.exists(os.path.join(d, "runs.tar.gz")):
            read_runs(os.path.join(d, "runs.tar.gz"), traces, hta, snapshots, reserved)
    rows = []
    for key in ours:
        o, r = ours[key], rave.get(key)
        row = {"config": key, "ours_median_ms": o["median_step_ms"],
               "ours_reserved_gib_end": reserved.get(os.path.basename(o["run"])), "ours_peak_allocated_gib": o.get("gpu_peak_allocated_bytes", 0) / 2**30}
        if r and r.get("status") == "ok":
            row.update(rave_median_ms=r["median_ms"], ratio=o["median_step_ms"] / r["median_ms"],
                       rave_reserved_gib_end=r["memory_reserved"] / 2**30,
                       rave_peak_allocated_gib=r["max_memory_allocated"] / 2**30,
                       valid_signal_crop=r["valid_signal_crop"])
        rows.append(row)
    return {"env": env, "steps": steps, "ours": ours, "rave": rave, "rave_env": rave_file.get("env"),
            "comparison": rows, "traces": traces, "hta": hta, "memory_snapshots": snapshots}


def profile_entries(run_dir, name):
    """The entries of a streamed profile: its rotated parts (<name>.part<K>.json), then the file."""
    stem = os.path.join(run_dir, name)
    parts = sorted(glob.glob(stem + ".part*.json"), key=lambda p: int(p.rsplit(".part", 1)[1][:-5]))
    entries = []
    for path in parts + [stem + ".json"]:
        if os.path.exists(path):
            with open(path) as f:
                entries.extend(json.load(f))
    return entries


def step_figures(run_dir, skip):
    timing = [e for e in profile_entries(run_dir, "timing_profile") if e["step"] >= skip]
    if not timing:
        raise SystemExit(f"gpu_results.py: {run_dir}: no timing_profile entries at step >= {skip}")
    times = [e["total_batch_time"] for e in timing]
    out = {"run": run_dir, "steps_timed": len(times), "first_step_timed": timing[0]["step"],
           "median_step_ms": statistics.median(times) * 1e3, "mean_step_ms": statistics.fmean(times) * 1e3,
           "min_step_ms": min(times) * 1e3,
           "examples_per_second": statistics.median(e["examples_per_second"] for e in timing)}
    for key in ("data_time", "forward_time", "backward_time", "optimizer_time"):
        out["median_" + key.replace("_time", "_ms")] = statistics.median(e[key] for e in timing) * 1e3
    memory = profile_entries(run_dir, "memory_profile")
    cuda = [m for e in memory for k, m in e.get("memory", {}).items() if k.startswith("cuda:")]
    if cuda:
        out["gpu_peak_allocated_bytes"] = max(m["peak_bytes_in_use"] for m in cuda)
        out["gpu_peak_reserved_bytes"] = max(m["peak_reserved_bytes"] for m in cuda)
        out["gpu_allocated_bytes_last"] = cuda[-1]["bytes_in_use"]
    with open(os.path.join(run_dir, "training_summary.json")) as f:
        return dict(out, status=json.load(f).get("status"))


def trace_figures(path):
    with open(path) as f:
        trace = json.load(f)
    events, meta = (trace["traceEvents"], trace) if isinstance(trace, dict) else (trace, {})
    kernels = [e for e in events if e.get("cat") == "kernel"]
    return {"trace": path, "events_by_category": dict(collections.Counter(e.get("cat", "") for e in events)),
            "ac2g_flow_events": sum(e.get("cat") == "ac2g" for e in events),
            "kernel_time_us": sum(e.get("dur", 0) for e in kernels), "kernel_example": kernels[0] if kernels else None,
            "memcpy_example": next((e for e in events if e.get("cat") == "gpu_memcpy"), None),
            "deviceProperties": meta.get("deviceProperties"), "distributedInfo": meta.get("distributedInfo")}


def hta_figures(trace_dir, out_path):
    from hta.trace_analysis import TraceAnalysis

    analyzer, result = TraceAnalysis(trace_dir=trace_dir), {"trace_dir": trace_dir}
    for name in ("temporal_breakdown", "gpu_kernel_breakdown", "idle_time_breakdown"):
        try:
            value = getattr(analyzer, "get_" + name)(visualize=False)
            result[name] = [f.to_dict(orient="records") for f in (value if isinstance(value, tuple) else (value,))
                            if f is not None]
        except Exception as e:  # noqa: BLE001 - one breakdown failing must not hide the others
            result[name] = {"error": f"{type(e).__name__}: {e}"}
    benchlib.emit(result, out_path, indent=1)
    errors = [k for k, v in result.items() if isinstance(v, dict) and "error" in v]
    return {"hta": out_path, "failed": errors}


def bf16_speedup(R):
    """fp32 time / bf16 time per side, size and phase."""
    out = []
    for side, d, field in (("ours", R["ours"], "median_step_ms"), ("RAVE", R["rave"], "median_ms")):
        for cfg in ("8x131072", "4x32768"):
            for ph in (1, 2):
                a, b = d.get(f"{cfg} fp32 phase {ph}"), d.get(f"{cfg} bf16 phase {ph}")
                if a and b:
                    out.append({"side": side, "config": cfg, "phase": ph, "ratio": a[field] / b[field]})
    return out


def blocks_of(R, command):
    """The section: text and tables made from the figures alone."""
    env = R["env"]
    b = benchlib.Blocks(SECTION["text"]).say("measured", command=command, e=env)
    failed = [s for s in R["steps"] if s["status"] not in ("ok", "skipped")]
    b.text(("Every step passed: " if not failed else "Steps: ")
           + ", ".join(f"{s['step']} {s['seconds']} s" + ("" if s["status"] == "ok" else f" ({s['status']})")
                       for s in R["steps"]) + ".")
    if R.get("traces_env"):
        t = R["traces_env"]
        b.say("kept_traces", kit=t.get("kit"), device=t.get("device"))
    timed = sorted({o.get("steps_timed") for o in R["ours"].values()})
    warm = sorted({o.get("first_step_timed") for o in R["ours"].values()})
    rave_steps = (R.get("rave_steps") or {}).get("steps")
    b.heading(b.line("step_heading")).say("step", timed="/".join(map(str, timed)), warm="/".join(map(str, warm)),
                                          rave_steps=rave_steps)
    rows = []
    for row in R["comparison"]:
        opt = R["ours"][row["config"]].get("median_optimizer_ms")
        opt = f"{opt:.1f}" if opt is not None else "—"
        if "rave_median_ms" not in row:
            rows.append([row["config"], f"{row['ours_median_ms']:.1f}", opt, "—", "—", "", ""])
            continue
        ours_reserved = row["ours_reserved_gib_end"]
        ours_reserved = f"{ours_reserved:.2f}" if ours_reserved is not None else "—"
        rows.append([row["config"], f"{row['ours_median_ms']:.1f}", opt, f"{row['rave_median_ms']:.1f}",
                     f"**{row['ratio']:.2f}**", f"{ours_reserved} / {row['rave_reserved_gib_end']:.2f}",
                     f"{row['ours_peak_allocated_gib']:.2f} / {row['rave_peak_allocated_gib']:.2f}"])
    b.table("columns", rows)
    ratios = [r["ratio"] for r in R["comparison"] if "ratio" in r]
    big = big_rows(R)
    if ratios:
        b.say("goal", big=", ".join(f"{r:.2f}" for r in big), verdict="met" if big and max(big) <= 0.9 else "not met",
              lo=min(ratios), hi=max(ratios))
    b.say("bf16", speedups="; ".join(f"{x['side']} {x['config']} phase {x['phase']} {x['ratio']:.2f}×"
                                     for x in R["bf16_speedup"])).say("memory")
    b.heading("Traces from the GPU (CUPTI), read by HTA")
    rows = []
    for run, t in sorted(R["traces"].items()):
        c = t["events_by_category"]
        dev = (t.get("deviceProperties") or [{}])[0]
        rows.append([run, str(c.get("kernel", 0)), str(c.get("gpu_memcpy", 0)), str(c.get("gpu_memset", 0)),
                     str(c.get("cuda_runtime", 0)), str(t["ac2g_flow_events"]),
                     f"{dev.get('name')}, {dev.get('numSms')} SMs, sm_{dev.get('computeMajor')}{dev.get('computeMinor')}"])
    b.table("trace_columns", rows)
    for run, t in sorted(R["traces"].items()):
        kinds = ", ".join(f"{n} × {c}" for n, c in sorted(t.get("memcpy_kinds", {}).items()))
        b.say("copies", run=run, kinds=kinds)
    b.text("HTA 0.5.0 (`TraceAnalysis` on each run's `profiler_traces/`):")
    rows = []
    for run, h in sorted(R["hta"].items()):
        t = h["temporal_breakdown"][0][0]
        k = {r["kernel_type"]: r["percentage"] for r in h["gpu_kernel_breakdown"][0]}
        i = ", ".join(f"{r['idle_category']} {r['idle_time']:.0f}" for r in h["idle_time_breakdown"][0])
        rows.append([run, f"{t['idle_time_pctg']} / {t['compute_time_pctg']} / {t['non_compute_time_pctg']}",
                     f"{k.get('COMPUTATION')} / {k.get('MEMORY')}", i])
    b.table("hta_columns", rows).say("host_wait")
    snaps = [b.line("snapshot", run=run, s=s, keys=", ".join(s["keys"])) for run, s in sorted(R["memory_snapshots"].items())]
    if snaps:
        b.text(*snaps)
    return b


def big_rows(R):
    """ours / RAVE at 8 x 131072, the rows the target is about."""
    return [r["ratio"] for r in R["comparison"] if r["config"].startswith("8x131072") and "ratio" in r]


def result(R, command, env):
    R["bf16_speedup"] = bf16_speedup(R)
    device = (R.get("rave_env") or {}).get("device_name") or R["env"].get("device")
    targets = [benchlib.target(SECTION["text"]["target"].format(device=device), "≤ 0.9", "<=", 0.9, big_rows(R),
                               over="configs, one run each")] if big_rows(R) else []
    return benchlib.record(
        SECTION["name"], SECTION["title"], command, env, blocks_of(R, command),
        raw={k: R[k] for k in RAW_KEYS if R.get(k) is not None},
        derived={k: R[k] for k in DERIVED_KEYS}, targets=targets,
        commands=["scripts/gpu_check.sh (docs/offline_gpu.md)", "benchmarks/gpu_results.py step|hta|trace"])


def figures_of_runs(cmd, rest, skip):
    """step RUN_DIR | hta TRACE_DIR OUT.json | trace TRACE.json: one JSON object on stdout; the exit status."""
    if len(rest) != {"step": 1, "hta": 2, "trace": 1}[cmd]:
        raise SystemExit("gpu_results.py step RUN_DIR [--skip N] | hta TRACE_DIR OUT.json | trace TRACE.json")
    failed = False
    if cmd == "step":
        out = step_figures(rest[0], skip)
    elif cmd == "trace":
        out = trace_figures(rest[0])
        cats = out["events_by_category"]
        missing = [c for c in ("kernel", "gpu_memcpy", "cuda_runtime") if not cats.get(c)]
        missing += [] if out["ac2g_flow_events"] else ["ac2g flows"]
        missing += [] if out["deviceProperties"] else ["deviceProperties"]
        if missing:
            out["missing"], failed = missing, True
    else:
        out = hta_figures(rest[0], rest[1])
        failed = bool(out["failed"])
    benchlib.emit(out)
    return 1 if failed else 0


def main():
    # --skip: the warm-up steps `step` leaves out (cudnn autotuning).
    a = benchlib.options(__doc__, {"_args": [], "command": "`scripts/gpu_check.sh`", "keep_traces_from": None,
                                   "from_json": None, "results_dir": None, "skip": 5})
    if a.args and a.args[0] in ("step", "hta", "trace"):
        sys.exit(figures_of_runs(a.args[0], a.args[1:], a.skip))
    a.out_dirs = a.args
    if bool(a.out_dirs) == bool(a.from_json):
        raise SystemExit("gpu_results: give either OUT_DIRs or --from_json")
    if a.from_json:
        with open(a.from_json, encoding="utf-8") as f:
            old = json.load(f)
        R = dict(old["raw"], **old["derived"])
        env = dict(old.get("environment") or {}, date=old["date"])
        print(benchlib.write_result(result(R, old["command"], env), a.results_dir))
        return
    kept = json.load(open(a.keep_traces_from)) if a.keep_traces_from else None
    R = collect(a.out_dirs)
    R["rave_steps"] = {"steps": json.load(open(last_with(a.out_dirs, "rave_step.json"))).get("steps")}
    if kept is not None and not R["traces"]:
        k = dict(kept["raw"], **kept["derived"])
        R["traces"], R["hta"], R["memory_snapshots"] = k["traces"], k["hta"], k["memory_snapshots"]
        R["traces_env"] = k.get("traces_env") or k["env"]
    # When the check ran: its log's last write (the GPU machine's files keep their times in $OUT).
    log = os.path.join(a.out_dirs[-1], "gpu_check.log")
    date = datetime.datetime.fromtimestamp(os.path.getmtime(log)).isoformat(timespec="seconds")
    env = {"date": date, **{k: v for k, v in R["env"].items() if v is not None}}
    print(benchlib.write_result(result(R, a.command, env), a.results_dir))


if __name__ == "__main__":
    main()
