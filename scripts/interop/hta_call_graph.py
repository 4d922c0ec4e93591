"""Builds Holistic Trace Analysis's call graph on our traces with HTA's default settings and
checks it against the nesting written in the file.

    python3 hta_call_graph.py HTA_CHECKOUT TRACE_DIR

HTA_CHECKOUT: a facebookresearch/HolisticTraceAnalysis checkout (its `hta` package is imported
from there; needs pandas and numpy, e.g. Debian's python3-pandas). TRACE_DIR: a folder holding
only traces (a run's profiler_traces/). Fetches nothing. Exit 0 when the call graph builds and
every CPU event's parent is the span that encloses it in the file (TensorBoard's rule: sorted
by start, longer first, nested while start < the open span's end); 1 otherwise.
"""
import os
import sys


def file_parents(df):
    """Parents by the enclosing-span rule, per (pid, tid), over the rows HTA kept."""
    parents = {}
    for _, rows in df.groupby(["pid", "tid"]):
        rows = rows.assign(end=rows["ts"] + rows["dur"]).sort_values(["ts", "end", "index"], ascending=[True, False, True], kind="stable")
        stack = []
        for idx, ts, end in zip(rows["index"], rows["ts"], rows["end"]):
            while stack and not ts < stack[-1][1]:
                stack.pop()
            parents[int(idx)] = stack[-1][0] if stack else -1
            stack.append((int(idx), end))
    return parents


def main():
    hta_dir, trace_dir = sys.argv[1], sys.argv[2]
    # HTA's defaults: its ns rounding stays on.
    os.environ.pop("HTA_DISABLE_NS_ROUNDING", None)
    sys.path.insert(0, hta_dir)
    from hta.common.trace import Trace
    from hta.common.trace_call_graph import CallGraph

    trace = Trace(trace_dir=trace_dir)
    trace.load_traces(include_last_profiler_step=True, use_multiprocessing=False)
    graph = CallGraph(trace)
    failures = 0
    for rank in graph.ranks:
        df = graph.trace_data.get_trace(rank)
        if df["ts"].dtype.kind != "i":
            print(f"rank {rank}: ts are not integers ({df['ts'].dtype}): HTA rounded them")
        cpu = df[(df["stream"] == -1) & df["dur"].notna() & (df["dur"] >= 0)]
        expected = file_parents(cpu)
        hta_parent = {int(i): int(p) for i, p in zip(cpu["index"], cpu["parent"])}
        mismatches = [i for i, p in expected.items() if (hta_parent[i] if hta_parent[i] >= 0 else -1) != p]
        threads = cpu.groupby(["pid", "tid"]).ngroups
        print(f"rank {rank}: HTA call graph (default settings) over {len(cpu)} CPU events on {threads} threads; "
              f"{len(expected) - len(mismatches)} parents as nested in the file, {len(mismatches)} mismatches")
        for i in mismatches[:5]:
            print(f"  event {i}: HTA parent {hta_parent[i]}, enclosing span {expected[i]}")
        failures += len(mismatches)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
