#!/usr/bin/env python3
"""Figures scripts/gpu_check.sh reads off its runs (docs/offline_gpu.md).

  gpu_figures.py step RUN_DIR --skip N     median step time and GPU memory of one `train` run,
                                           from its timing_profile.json and memory_profile.json
  gpu_figures.py hta TRACE_DIR OUT.json    Holistic Trace Analysis's temporal, kernel and
                                           idle-time breakdowns of the traces in TRACE_DIR
  gpu_figures.py trace TRACE.json          what the trace holds: kernel / memcpy / memset rows,
                                           ac2g flows, deviceProperties, distributedInfo; exit 1
                                           unless it has kernel and memcpy rows, ac2g flows and
                                           deviceProperties

Each prints one JSON object on stdout. Only the standard library, except `hta` (HTA, pandas).
"""
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


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
        raise SystemExit(f"gpu_figures.py: {run_dir}: no timing_profile entries at step >= {skip}")
    times = [e["total_batch_time"] for e in timing]
    out = {
        "run": run_dir,
        "steps_timed": len(times),
        "first_step_timed": timing[0]["step"],
        "median_step_ms": statistics.median(times) * 1e3,
        "mean_step_ms": statistics.fmean(times) * 1e3,
        "min_step_ms": min(times) * 1e3,
        "examples_per_second": statistics.median(e["examples_per_second"] for e in timing),
    }
    for key in ("data_time", "forward_time", "backward_time", "optimizer_time"):
        out["median_" + key.replace("_time", "_ms")] = statistics.median(e[key] for e in timing) * 1e3
    memory = profile_entries(run_dir, "memory_profile")
    cuda = [m for e in memory for k, m in e.get("memory", {}).items() if k.startswith("cuda:")]
    if cuda:
        out["gpu_peak_allocated_bytes"] = max(m["peak_bytes_in_use"] for m in cuda)
        out["gpu_peak_reserved_bytes"] = max(m["peak_reserved_bytes"] for m in cuda)
        out["gpu_allocated_bytes_last"] = cuda[-1]["bytes_in_use"]
    with open(os.path.join(run_dir, "training_summary.json")) as f:
        summary = json.load(f)
    out["status"] = summary.get("status")
    return out


def trace_figures(path):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    cats = {}
    for e in events:
        cats[e.get("cat", "")] = cats.get(e.get("cat", ""), 0) + 1
    flows = [e for e in events if e.get("cat") == "ac2g"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    return {
        "trace": path,
        "events_by_category": cats,
        "ac2g_flow_events": len(flows),
        "kernel_time_us": sum(e.get("dur", 0) for e in kernels),
        "kernel_example": kernels[0] if kernels else None,
        "memcpy_example": next((e for e in events if e.get("cat") == "gpu_memcpy"), None),
        "deviceProperties": trace.get("deviceProperties") if isinstance(trace, dict) else None,
        "distributedInfo": trace.get("distributedInfo") if isinstance(trace, dict) else None,
    }


def hta_figures(trace_dir, out_path):
    from hta.trace_analysis import TraceAnalysis

    analyzer = TraceAnalysis(trace_dir=trace_dir)
    result = {"trace_dir": trace_dir}

    def table(name, fn):
        try:
            value = fn()
            frames = value if isinstance(value, tuple) else (value,)
            result[name] = [f.to_dict(orient="records") for f in frames if f is not None]
        except Exception as e:  # noqa: BLE001: one breakdown failing must not hide the others
            result[name] = {"error": f"{type(e).__name__}: {e}"}

    table("temporal_breakdown", lambda: analyzer.get_temporal_breakdown(visualize=False))
    table("gpu_kernel_breakdown", lambda: analyzer.get_gpu_kernel_breakdown(visualize=False))
    table("idle_time_breakdown", lambda: analyzer.get_idle_time_breakdown(visualize=False))
    benchlib.emit(result, out_path, indent=1)
    errors = [k for k, v in result.items() if isinstance(v, dict) and "error" in v]
    return {"hta": out_path, "failed": errors}


def main():
    a = benchlib.options(__doc__, {"_args": [], "skip": 5})  # --skip: warm-up steps left out (cudnn autotuning)
    a.cmd, rest = (a.args + [None])[0], a.args[1:]
    if a.cmd not in ("step", "hta", "trace") or len(rest) != {"step": 1, "hta": 2, "trace": 1}[a.cmd]:
        raise SystemExit("gpu_figures.py step RUN_DIR [--skip N] | hta TRACE_DIR OUT.json | trace TRACE.json")
    a.run_dir = a.trace_dir = a.trace = rest[0]
    a.out = rest[-1]
    failed = False
    if a.cmd == "step":
        out = step_figures(a.run_dir, a.skip)
    elif a.cmd == "trace":
        out = trace_figures(a.trace)
        cats = out["events_by_category"]
        missing = [c for c in ("kernel", "gpu_memcpy", "cuda_runtime") if not cats.get(c)]
        missing += [] if out["ac2g_flow_events"] else ["ac2g flows"]
        missing += [] if out["deviceProperties"] else ["deviceProperties"]
        if missing:
            out["missing"], failed = missing, True
    else:
        out = hta_figures(a.trace_dir, a.out)
        failed = bool(out["failed"])
    benchlib.emit(out)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
