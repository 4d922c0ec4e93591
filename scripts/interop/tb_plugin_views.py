"""Loads our run's traces with TensorBoard's PyTorch-profiler plugin's own loader and prints
the Overview's DataLoader share and the Module view.

    python3 tb_plugin_views.py TB_PLUGIN_DIR TRACE_DIR [MODULE...]

TB_PLUGIN_DIR: the tb_plugin/ folder of a pytorch/kineto checkout from before its removal
(041e7ce9, the parent of 94979607 that removed it; tb_plugin/ last changed in 4b3b2ed2),
holding the torch_tb_profiler package; needs numpy, pandas and absl (Debian: python3-pandas
python3-absl). TRACE_DIR: a run's profiler_traces/.
Fetches nothing. Exit 0 when the DataLoader share is > 0 and the Module view lists every MODULE
given (and is not empty); 1 otherwise.

With --distributed (TRACE_DIR: a multi-rank run's profiler_traces/), prints the plugin's
Distributed view instead: its per-worker Computation/Communication overlap and its
communication-operations table. Exit 0 when the plugin built that view (it does only when every
worker's collectives lie inside steps and match the other workers' in number) and every worker
lists gloo/nccl collectives; 1 otherwise.
"""
import sys
import tempfile


def module_names(stats, out):
    for s in stats:
        out.append(s["name"])
        module_names(s["children"], out)
    return out


def distributed_view(run):
    views = [p for (worker, _), p in run.profiles.items() if worker == "All"]
    if not views or views[0].comm_ops is None:
        print("the plugin built no Distributed view (collectives outside steps, or unequal across workers)")
        return 1
    d = views[0]
    ok = True
    for worker, (comp, overlap, comm, other) in d.steps_to_overlap["data"]["all"].items():
        print(f"{worker}: Distributed view: per step computation {comp} us, overlapping {overlap} us, "
              f"communication {comm} us, other {other} us")
    for worker, table in d.comm_ops["data"].items():
        rows = [r for r in table["rows"] if r[0].startswith(("gloo:", "nccl:"))]
        print(f"{worker}: collectives: " + ", ".join(f"{r[0]} ×{r[1]} ({r[2]} bytes)" for r in rows))
        ok = ok and bool(rows)
    return 0 if ok else 1


def main():
    distributed = "--distributed" in sys.argv[1:]
    args = [a for a in sys.argv[1:] if a != "--distributed"]
    tb_dir, trace_dir, wanted = args[0], args[1], args[2:]
    sys.path.insert(0, tb_dir)
    import warnings
    warnings.simplefilter("ignore")  # the package's deprecation notice
    from torch_tb_profiler import io
    from torch_tb_profiler.profiler import RunLoader

    ok = True
    with tempfile.TemporaryDirectory() as cache_dir:
        run = RunLoader("run", trace_dir, io.Cache(cache_dir)).load()
        if not run.profiles:
            print("the plugin loaded no profile from", trace_dir)
            return 1
        if distributed:
            return distributed_view(run)
        for (worker, span), profile in sorted(run.profiles.items()):
            if worker == "All":  # the Distributed view of a multi-rank run
                continue
            perf = profile.overview["performance"][0]
            share = {c["name"]: c["extra"] for c in perf["children"]}
            print(f"{worker}: Overview: average step {perf['value']} us; "
                  + ", ".join(f"{k} {v}%" for k, v in share.items()))
            ok = ok and share.get("DataLoader", 0) > 0
            view = profile.get_module_view()
            names = module_names(view["data"], []) if view else []
            print(f"{worker}: Module view: {len(names)} modules: {', '.join(names[:12])}"
                  + (" …" if len(names) > 12 else ""))
            missing = [m for m in wanted if m not in names]
            if missing:
                print(f"{worker}: Module view lacks {', '.join(missing)}")
            ok = ok and bool(names) and not missing
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
