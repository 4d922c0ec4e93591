"""Loads our run's traces with TensorBoard's PyTorch-profiler plugin's own loader and prints
the Overview's DataLoader share and the Module view.

    python3 tb_plugin_views.py TB_PLUGIN_DIR TRACE_DIR [MODULE...]

TB_PLUGIN_DIR: the tb_plugin/ folder of a pytorch/kineto checkout from before its removal
(041e7ce9, the parent of 94979607 that removed it; tb_plugin/ last changed in 4b3b2ed2),
holding the torch_tb_profiler package; needs numpy, pandas and absl (Debian: python3-pandas
python3-absl). TRACE_DIR: a run's profiler_traces/.
Fetches nothing. Exit 0 when the DataLoader share is > 0 and the Module view lists every MODULE
given (and is not empty); 1 otherwise.
"""
import sys
import tempfile


def module_names(stats, out):
    for s in stats:
        out.append(s["name"])
        module_names(s["children"], out)
    return out


def main():
    tb_dir, trace_dir, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
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
        for (worker, span), profile in sorted(run.profiles.items()):
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
