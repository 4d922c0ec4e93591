#!/usr/bin/python3
"""The benchmark runner: every benchmark, each writing its result to benchmarks/results/<name>.json,
then BENCHMARKS.md rendered from those files (benchlib.render). Standard library only.

  benchmarks/bench.py [--quick] [--only NAME,...] [--results_dir DIR] [--OPTION VALUE ...]
  benchmarks/bench.py --render_only [--check]    BENCHMARKS.md from the results alone (--check: compare)
  benchmarks/bench.py --list                     the benchmarks, their options and what they need

A benchmark is its description in sections.toml (its key for --only, options and defaults, what
--quick changes, the programs and paths it needs, its section's constant text) and its driver, a
function of bench_rave.py, bench_train.py, bench_ssm.py or bench_export.py that runs the programs
and returns its section, which the runner writes; a driver that returns None had its peer write it.
A benchmark whose needs are missing is skipped with its note. --only also takes a result's name, a
script's (benchmarks/*.sh run one benchmark each) and "others" (all but the `core` ones).
--results_dir elsewhere than benchmarks/results leaves the committed results and BENCHMARKS.md alone.
"""
import difflib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import bench_export  # noqa: E402
import bench_rave  # noqa: E402
import bench_ssm  # noqa: E402
import bench_train  # noqa: E402

ROOT = benchlib.ROOT
DRIVERS = {m.__name__: m for m in (bench_rave, bench_ssm, bench_train, bench_export)}


def description(key, d):
    """sections.toml's description of benchmark `key`, with its driver and the defaults the
    environment sets (default_from)."""
    module, function = d["driver"].split(".")
    options = dict(d.get("options", {}), **{k: os.environ[v] for k, v in d.get("default_from", {}).items()
                                            if v in os.environ})
    return dict(d, key=key, run=getattr(DRIVERS[module], function), options=options)


BENCHMARKS = [description(k, d) for k, d in benchlib.sections().items() if "driver" in d]
GROUPS = {"others": [d["key"] for d in BENCHMARKS if not d.get("core")]}
RUNNER = {"quick": False, "only": "", "results_dir": None, "md": os.path.join(ROOT, "BENCHMARKS.md"),
          "render_only": False, "check": False, "list": False, "keep": False,
          "build": os.environ.get("BUILD_DIR") or os.path.join(ROOT, "build"),
          "cuda_build": os.path.join(ROOT, "build-cuda"),
          "cuda_lib": os.environ.get("CUDA_HOME", "/usr/local/cuda") + "/lib64",
          "rave_python": os.path.join(ROOT, ".venv-rave-cpu", "bin", "python"), "_args": []}


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Ctx:
    """What a driver gets: o (its options), quick, bin (the build's bin/), work (a scratch folder),
    results_dir, shared (figures one driver leaves for another), and ways to run programs."""

    def __init__(self, a, desc, opts, shared):
        self.o, self.quick, self.shared, self.a = types.SimpleNamespace(**opts), a.quick, shared, a
        self.build = a.cuda_build if desc.get("cuda") else a.build
        self.bin = os.path.join(self.build, "bin")
        self.results_dir = a.results_dir
        self.work = tempfile.mkdtemp(prefix=f"rt_bench_{desc['key']}.")
        self.load_before, self.git = benchlib.load_avg(), benchlib.git_describe()  # before anything is written

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def rel(self, argv):
        """argv as the result shows it: repository paths relative, the scratch folder as $TMP."""
        out = []
        for x in map(str, argv):
            x = x.replace(self.work, "$TMP").replace(ROOT + "/", "")
            out.append(x if "$TMP" in x else shlex.quote(x))
        return " ".join(out)

    def run(self, argv, env=None, log_to=None, check=True, **kw):
        """Runs argv (output captured, or into the file log_to) in the environment with env's
        variables (None: unset); on failure raises with its end. p.load: the load before."""
        argv, load = [str(x) for x in argv], benchlib.load_avg()
        env = {k: str(v) for k, v in dict(os.environ, **(env or {})).items() if v is not None}
        if log_to:
            with open(log_to, "w") as f:
                p = subprocess.run(argv, env=env, stdout=f, stderr=subprocess.STDOUT, text=True, **kw)
            p.stdout = open(log_to, errors="replace").read()
        else:
            p = subprocess.run(argv, env=env, capture_output=True, text=True, **kw)
        if check and p.returncode != 0:
            raise RuntimeError(f"{self.rel(argv)} failed ({p.returncode}):\n{(p.stdout or '')[-2000:]}"
                               f"{(p.stderr or '')[-2000:]}")
        p.load = load
        return p

    def jsonl(self, argv, **kw):
        """The JSON lines argv prints on stdout."""
        return [json.loads(x) for x in self.run(argv, **kw).stdout.splitlines() if x.startswith("{")]

    def json(self, argv, **kw):
        """(the last JSON object argv prints, its printable command, the load before)."""
        p = self.run(argv, **kw)
        load, out = p.load, p.stdout
        lines = [x for x in out.splitlines() if x.startswith("{")]
        if not lines:
            raise RuntimeError(f"{self.rel(argv)} printed no JSON:\n{out[-2000:]}")
        try:
            return json.loads(lines[-1]), self.rel(argv), load
        except ValueError:  # pretty-printed (loader_bench)
            return json.loads(out[out.index("{"):]), self.rel(argv), load

    def audio_db(self, name, seconds, *args, seed=1):
        """The demo audio (seconds per file) imported into the LMDB database work/name with args."""
        return benchlib.demo_audio_db(self.bin, self.path(name), seconds, *args, seed=seed)

    def neural_db(self, name, units, trials=None):
        """One synthetic reaching session (seed 1) as the neural database work/name."""
        pre, db = os.path.join(self.bin, "preprocess"), self.path(name)
        self.run([pre, "--generate_neural_demo", db + "_h5", "--force", "--groups", 1, "--units", units,
                  *(["--trials", trials] if trials else []), "--seed", 1])
        self.run([pre, "--kind", "neural", "--input_path", db + "_h5", "--output_path", db])
        return db


def missing(a, d):
    """Why d cannot run here (None: it can)."""
    build = a.cuda_build if d.get("cuda") else a.build
    gone = [os.path.join(build, "bin", b) for b in d.get("bins", ()) if not os.path.exists(os.path.join(build, "bin", b))]
    gone += [p for p in d.get("needs", ()) if not os.path.exists(os.path.join(ROOT, p))]
    if "rave_python" in d.get("needs_runner", ()) and not os.path.exists(a.rave_python):
        gone.append(a.rave_python)
    return f"missing {', '.join(gone)}" + (f" ({d['note']})" if d.get("note") else "") if gone else None


def resolve(a, d):
    """d's options: the command line's, else (for its `env` options) the environment's, else
    --quick's, else the defaults; typed as the defaults are. Positional arguments fill d's `args`."""
    o = dict(d.get("options", {}))
    if a.quick:
        o.update(d.get("quick", {}))
    for name in d.get("env", ()):
        if os.environ.get(name.upper()):
            o[name] = os.environ[name.upper()]
    o.update({k: v for k, v in zip(d.get("args", ()), a.args)})
    o.update({k: getattr(a, k) for k in d.get("options", {}) if getattr(a, k, None) not in (None, [], False)})
    typed = {}
    for k, v in o.items():
        kind = type(d.get("options", {}).get(k))
        typed[k] = v if kind in (type(None), list) or isinstance(v, kind) else (
            str(v).lower() in ("1", "true", "yes") if kind is bool else kind(v))
    return typed


def command_of(a, d, opts):
    """The command that reruns d as it ran: bench.py --only KEY, --quick, the options not at their default."""
    defaults = dict(d.get("options", {}), **(d.get("quick", {}) if a.quick else {}))
    shown = [f"benchmarks/bench.py --only {d['key']}"] + (["--quick"] if a.quick else [])
    for k, v in opts.items():
        for x in (v if isinstance(v, list) else [v] if v != defaults.get(k) else []):
            shown.append(f"--{k}" if x is True else f"--{k} {shlex.quote(str(x))}")
    if a.results_dir != benchlib.RESULTS_DIR:
        shown.append("--results_dir DIR")
    return " ".join(shown)


def run_one(a, d, shared):
    opts = resolve(a, d)
    ctx = Ctx(a, d, opts, shared)
    log(f"{d['key']}: running ({', '.join(f'{k}={v}' for k, v in opts.items())})")
    try:
        out = d["run"](ctx)
        if out is not None:
            if "commands" not in out:  # the description's, filled with the options
                out["commands"] = [c.format(o=ctx.o) for c in d.get("text", {}).get("commands", [])]
            env = benchlib.environment(ctx.load_before, git=ctx.git, **out.pop("env", {}))
            r = benchlib.record(d["name"], d["title"], command_of(a, d, opts), env, out.pop("blocks"),
                                analysis=d.get("analysis"), **out)
            log(f"{d['key']}: wrote {benchlib.write_result(r, a.results_dir)}")
        return "ok"
    finally:
        if a.keep:
            log(f"{d['key']}: work folder kept: {ctx.work}")
        else:
            shutil.rmtree(ctx.work, ignore_errors=True)


def render(results_dir, md, check=False):
    """BENCHMARKS.md (md) from the results in results_dir; check: compare instead of writing (1: differs)."""
    results = benchlib.load_results(results_dir)
    if not results:
        raise SystemExit(f"render: no results in {results_dir}")
    text = benchlib.render(results)
    if check:
        with open(md, encoding="utf-8") as f:
            old = f.read()
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), md, "rendered"))
        return int(old != text)
    with open(md, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"render: {md} from {len(results)} results in {results_dir}")
    return 0


def main():
    spec = dict(RUNNER)
    for d in BENCHMARKS:
        for k, v in d.get("options", {}).items():
            spec.setdefault(k, v if v is False or isinstance(v, list) else None)
    a = benchlib.options(__doc__, spec)
    a.results_dir = os.path.abspath(benchlib.results_dir(a.results_dir))
    if a.render_only:
        sys.exit(render(a.results_dir, a.md, a.check))
    names = {n: d for d in BENCHMARKS for n in (d["key"], d["name"], d.get("script"), f"benchmarks/{d.get('script')}")}
    wanted = [x for w in filter(None, a.only.split(",")) for x in GROUPS.get(w, [w])] or [d["key"] for d in BENCHMARKS]
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise SystemExit(f"bench.py: no benchmark {', '.join(unknown)} (--list names them)")
    if a.list:  # those --only names (a shim's own), else all; `--list | head` ends quietly
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        for key in dict.fromkeys(names[w]["key"] for w in wanted):
            d = names[key]
            print(f"{d['key']:16} -> results/{d['name']}.json  {d.get('script') or ''}\n    options: {d.get('options', {})}"
                  f"\n    --quick: {d.get('quick', {})}\n    needs: {missing(a, d) or 'all present'}")
        return
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # a shared machine needs it (docs/cli.md)
    coretype = benchlib.openblas_coretype()  # every arm on the BLAS kernels the CPU allows (benchlib)
    if coretype:
        os.environ["OPENBLAS_CORETYPE"] = coretype
    if a.cuda_lib:  # the cuda build's binaries load the CUDA toolkit's libraries, even on the CPU
        os.environ["LD_LIBRARY_PATH"] = a.cuda_lib + (":" + os.environ["LD_LIBRARY_PATH"]
                                                      if os.environ.get("LD_LIBRARY_PATH") else "")
    t0, shared, status = time.time(), {}, {}
    for d in dict.fromkeys(names[w]["key"] for w in wanted):
        d = names[d]
        why = missing(a, d)
        if why:
            log(f"{d['key']}: skipped, {why}")
            status[d["key"]] = f"skipped: {why}"
            continue
        try:
            status[d["key"]] = run_one(a, d, shared)
        except Exception as e:  # noqa: BLE001 - one failing benchmark must not stop the others
            traceback.print_exc()
            status[d["key"]] = f"FAILED: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    for k, s in status.items():
        log(f"{k}: {s}")
    if a.results_dir == benchlib.RESULTS_DIR:
        render(a.results_dir, a.md)
    log(f"done in {time.time() - t0:.0f} s: {a.results_dir}")
    sys.exit(1 if any(s.startswith("FAILED") for s in status.values()) else 0)


if __name__ == "__main__":
    main()
