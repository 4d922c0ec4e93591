#!/usr/bin/python3
"""Benchmark driver behind benchmarks/run.sh: runs every benchmark (A/B runs interleaved,
median and spread), writes each section's result to benchmarks/results/<name>.json and
regenerates BENCHMARKS.md from those files (benchlib.render). Uses only the standard library.

  benchmarks/bench.py [--quick] [--only rave,ops,flops,scaling,data,whole,defaults,others]
  benchmarks/bench.py --render_only        BENCHMARKS.md from benchmarks/results/*.json alone

The comparisons with RAVE time the real RAVE (acids-rave 2.3.1): its own `training_step`
(benchmarks/rave_gpu_step.py --device cpu) and its own `rave train` (benchmarks/rave_train.py),
in the venv benchmarks/rave_cpu_env.sh makes, on torch 2.11.0's LibTorch; the native side
is built against that same LibTorch (--cuda_build, scripts/check_cuda_build.sh's build-cuda/,
which runs on the CPU). The other sections time the main build (Debian's LibTorch 1.13).
"others" runs the benchmarks/*.sh benchmarks as the OTHERS table says: each with its own
quick settings under --quick (or left out where it has none), and left out, with a note, where
the builds or venvs it needs are missing.
"""
import argparse
import datetime
import difflib
import glob
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"  # Debian's python3-torch: the same LibTorch 1.13 as the native build
RAVE_STEP = os.path.join(ROOT, "benchmarks", "rave_gpu_step.py")
RAVE_TRAIN = os.path.join(ROOT, "benchmarks", "rave_train.py")
# benchmarks/*.sh that set things up rather than measure: run_others skips them.
NOT_BENCHMARKS = ("run.sh", "deps.sh", "rave_cpu_env.sh", "fssm_env.sh", "lib.sh")
# The other benchmarks/*.sh benchmarks, as run_others runs them. Per script: "quick", the
# arguments (and environment) of --quick (default --quick), None where the script has no quick
# mode (then --quick leaves it out, with quick_note: its figures need the full run); "full", those
# of a full run (default none); "build" and "cuda_build", the programs it needs in --build's /
# --cuda_build's bin/ (BUILD_DIR is set to that build for it); "needs", other paths under the
# repository (venvs), and "note", why it is left out when they are missing. A *.sh in neither this
# table nor NOT_BENCHMARKS is left out, with a note, until it is added here.
TRAIN = ("train", "preprocess")
RAVE_CPU = {"needs": (".venv-rave-cpu/bin/python",),
            "note": "build-cuda/ and .venv-rave-cpu/ (the real RAVE on torch 2.11) are made by "
                    "benchmarks/rave_cpu_env.sh"}
OTHERS = {
    "ddp.sh": dict(RAVE_CPU, cuda_build=TRAIN, env={"SETUP": "0"}),
    "export_bench.sh": dict(RAVE_CPU, build=("export_bench",)),
    "onnx_bench.sh": dict(RAVE_CPU, build=("export_bench",)),
    "export_fidelity.sh": {"build": ("export",) + TRAIN},  # trains a small v2 first (--quick: 200 steps)
    "heap_retention.sh": {"build": TRAIN},
    # Its question is a long run's drift: --quick is 20000 steps with 1 MiB parts, enough to see the
    # profile rotate within its bound, not to judge the RSS slope.
    "long_run_rss.sh": {"quick": (["20000"], {"PART_MB": "1", "PARTS": "4"}),
                        "full": (["1000000"], {"PART_MB": "16", "PARTS": "4", "MEMORY": "1"}), "build": TRAIN},
    "profiling_overhead.sh": {"build": TRAIN},
    "rave_configs.sh": {"quick": None, "build": TRAIN,
                        "quick_note": "every configuration at full size, minutes each: run it alone"},
    "rave_parity.sh": {"needs": (".venv-rave/bin/python",),
                       "note": "the oracle venv .venv-rave/ is made by tests/oracle/run.sh; the result "
                               "is trained on a GPU machine (docs/offline_gpu.md)"},
    "ssm_kinds.sh": {"build": ("ssm_step_bench",) + TRAIN},
    "ssm_step.sh": {"build": ("ssm_step_bench",)},
    "ssm_transfer.sh": {"build": TRAIN},  # 75 training runs; --quick: s5 only
    "step_ab.sh": {},
    "tracing_overhead.sh": {"build": TRAIN},
}
SECTIONS = ("rave", "ops", "flops", "scaling", "data", "whole", "defaults", "others")
CUDA_LIB = os.environ.get("CUDA_HOME", "/usr/local/cuda") + "/lib64"


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd, timeout=None):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout).stdout.strip()


class Runner:
    def __init__(self, build, tmp):
        self.bin = os.path.join(build, "bin")
        self.tmp = tmp

    def rel(self, argv):
        out = []
        for a in argv:
            a = str(a)
            if a.startswith(ROOT + "/"):
                a = os.path.relpath(a, ROOT)
            if a.startswith(self.tmp):
                a = "$TMP" + a[len(self.tmp):]
            out.append(a)
        return " ".join(shlex.quote(a) if "$TMP" not in a else a for a in out)

    def json_cmd(self, argv, timeout=1800):
        """Runs argv, returns (parsed last JSON line of stdout, printable command, load)."""
        load = benchlib.load_avg()
        p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"{self.rel(argv)} failed ({p.returncode}):\n{p.stderr[-2000:]}\n{p.stdout[-2000:]}")
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        if not lines:
            raise RuntimeError(f"{self.rel(argv)} printed no JSON:\n{p.stdout[-2000:]}")
        try:
            data = json.loads(lines[-1])  # one JSON object per line (rave_bench, rave_gpu_step.py)
        except json.JSONDecodeError:
            data = json.loads(p.stdout[p.stdout.index("{"):])  # pretty-printed (loader_bench)
        return data, self.rel(argv), load

    def native(self, *args):
        return [os.path.join(self.bin, "rave_bench"), *args]


def stats(values):
    """benchlib.summary plus the quartiles and the spread in % of the median."""
    s = benchlib.summary(values)
    if s is None:
        return None
    v = sorted(values)
    s["q1"] = v[len(v) // 4]
    s["q3"] = v[(3 * len(v)) // 4] if len(v) > 1 else v[0]
    s["spread_pct"] = 100.0 * (s["max"] - s["min"]) / s["median"] if s["median"] else 0.0
    return s


def fmt_s(st, unit="s", scale=1.0):
    if st is None:
        return "–"
    return f"{st['median'] * scale:.3f} {unit} ({st['min'] * scale:.3f}–{st['max'] * scale:.3f}, n={st['n']})"


def interleave(runner, variants, reps, key="step_seconds", times=None):
    """variants: {name: argv}. Runs rep 1 of every variant, then rep 2, ... Collects the
    per-step times of each variant (data[key], or times(name, data) when given, in seconds);
    returns {name: {"stats", "command", "loads", "runs"}}."""
    out = {name: {"times": [], "loads": [], "command": None, "runs": []} for name in variants}
    for r in range(reps):
        for name, argv in variants.items():
            data, cmd, load = runner.json_cmd(argv)
            o = out[name]
            t = times(name, data) if times else data[key]
            o["times"].extend(t)
            o["loads"].append(load[0] if load else None)
            o["command"] = cmd
            o["runs"].append(data)
            log(f"  {name} rep {r + 1}/{reps}: median {statistics.median(t):.3f}s (load {load[0] if load else '?'})")
    for o in out.values():
        o["stats"] = stats(o["times"])
    return out


# ---------------------------------------------------------------------------------------------
def bench_environment(build):
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), "uname": platform.platform(),
           "nproc": os.cpu_count(), "uptime": sh("uptime"),
           "cpu": sh("lscpu | grep -m1 'Model name' | sed 's/.*: *//'"),
           "blas_alternative": sh("update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep -m1 '^Value' | sed 's/Value: //'"),
           "ldd_blas": sh(f"ldd {build}/bin/train 2>/dev/null | grep -i -E 'blas|lapack|gomp' | sed 's/ (0x.*//'"),
           "ldd_torch_blas": sh("ldd $(ls /usr/lib/x86_64-linux-gnu/libtorch_cpu.so* | head -1) | grep -i -E 'blas|gomp' | sed 's/ (0x.*//'"),
           "python_torch": sh(f"{PY} -c 'import torch; print(torch.__version__, torch.get_num_threads(), torch.backends.mkldnn.is_available())'"),
           "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
           "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
           "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE")}


def host():
    """The machine a section ran on (bench.py may run on another host than the page's)."""
    return {"cpu": sh("lscpu | grep -m1 'Model name' | sed 's/.*: *//'"), "nproc": os.cpu_count()}


def rave_step_seconds(name, data):
    """Per-step seconds of a variant: rave_bench's step_seconds, or rave_gpu_step.py's step_ms."""
    if name == "native":
        return data["step_seconds"]
    rec = data["results"][0]
    if rec.get("status") in ("error", "oom"):
        raise RuntimeError(f"rave_gpu_step.py: {rec['error']}")
    return [t / 1e3 for t in rec["phases"][0]["step_ms"]]


def bench_native_vs_rave(crunner, rave_py, versions, reps, steps):
    """The native phase-1 step (rave_bench step, on torch 2.11's LibTorch) against the real RAVE's
    own training_step (rave_gpu_step.py: RAVE's gin config, Lightning's per-batch calls, its
    optimizer step) on the same LibTorch, interleaved, at 1 and 2 threads. 4 × 32768 at full size
    is below v2's and v3's receptive-field crop (27116 samples each side), so both run without it."""
    res = {}
    for v in versions:
        for threads in (1, 2):
            variants = {
                "native": crunner.native("step", "--version", v, "--batch", 4, "--n_signal", 32768,
                                         "--threads", threads, "--steps", steps, "--warmup", 1),
                "rave": [rave_py, "-W", "ignore", RAVE_STEP, "--device", "cpu", "--config", v, "--threads", threads,
                         "--configs", "b4x32768:fp32:nocrop", "--phase", 1, "--steps", steps, "--warmup", 1,
                         "--replace-unused-imports", "--out", "-"],
            }
            log(f"native vs the real RAVE {v}, {threads} thread(s)")
            r = interleave(crunner, variants, reps, times=rave_step_seconds)
            ratio = r["native"]["stats"]["median"] / r["rave"]["stats"]["median"]
            phases = {}
            for ph in ("forward", "loss", "backward", "optimizer"):
                phases[ph] = statistics.median(p[ph] for run in r["native"]["runs"] for p in run["phases"])
            env = r["rave"]["runs"][-1]["env"]
            res[f"{v}_t{threads}"] = {"version": v, "threads": threads, "native": strip(r["native"]),
                                      "rave": strip(r["rave"]), "ratio_native_over_rave": ratio,
                                      "native_phase_medians": phases,
                                      "rave_env": {k: env.get(k) for k in ("torch", "acids-rave", "pytorch-lightning",
                                                                           "torchaudio", "numpy", "replaced_imports",
                                                                           "pqmf_prototype", "threads")},
                                      "rave_parameters": r["rave"]["runs"][-1]["results"][0].get("parameters"),
                                      "native_gemm": r["native"]["runs"][-1].get("gemm"),
                                      "host": host()}
            log(f"  ratio native/RAVE = {ratio:.3f}")
    return res


def strip(o):
    return {k: o[k] for k in ("stats", "command", "loads", "times")}


def bench_op_counts(runner, version):
    argv = runner.native("step", "--version", version, "--capacity", 8, "--latent_size", 8, "--batch", 2,
                         "--n_signal", 32768, "--threads", 1, "--steps", 1, "--warmup", 1, "--count_ops")
    data, cmd, _ = runner.json_cmd(argv)
    counts = data["op_counts"]
    top = {ph: sorted(c["ops"].items(), key=lambda kv: -kv[1])[:8] for ph, c in counts.items()}
    to_copy = {ph: c["ops"].get("aten::_to_copy", 0) for ph, c in counts.items()}
    return {"command": cmd, "totals": {ph: c["total"] for ph, c in counts.items()}, "top": top,
            "to_copy": to_copy}


def bench_flops(runner, quick, step_medians):
    out = {"peak": {}}
    for t in (1, 2):
        d, cmd, load = runner.json_cmd(runner.native("peak", "--threads", t, "--size", 2048, "--reps", 5))
        out["peak"][t] = {"gflops": d["gflops_best"], "command": cmd, "load": load}
        log(f"sgemm peak {t} thread(s): {d['gflops_best']:.1f} GFLOP/s")
    d, cmd, _ = runner.json_cmd(runner.native("flops", "--version", "v2", "--batch", 4, "--n_signal", 32768))
    out["v2"] = {"forward_conv_flops": d["forward_conv_flops"], "step_conv_flops": d["step_conv_flops"],
                 "conv_calls": d["conv_calls"], "command": cmd}
    out["efficiency"] = {}
    for t in (1, 2):
        med = step_medians.get(t)
        if med:
            achieved = d["step_conv_flops"] / med / 1e9
            out["efficiency"][t] = {"step_seconds": med, "achieved_gflops": achieved,
                                    "fraction_of_peak": achieved / out["peak"][t]["gflops"]}
    return out


def bench_scaling(runner, quick):
    cap = 16
    reps = 1 if quick else 3
    steps = 2 if quick else 3
    # 1 thread: on a shared machine 2 OpenMP threads are slowed down by oversubscription far more
    # than the batch/length effect being measured.
    res = {"capacity": cap, "threads": 1, "batch": [], "n_signal": []}
    for b in (1, 2, 4, 8):
        r = interleave(runner, {"x": runner.native("step", "--version", "v2", "--capacity", cap, "--batch", b,
                                                   "--n_signal", 32768, "--threads", 1, "--steps", steps,
                                                   "--warmup", 1)}, reps)["x"]
        res["batch"].append({"batch": b, "n_signal": 32768, **strip(r)})
    # v2's 2048-point multiband STFT needs band signals longer than 1024 samples, i.e.
    # n_signal > 16384 (16 bands): 8192 and 16384 cannot train with v2's loss.
    res["n_signal_note"] = "8192 and 16384 are below v2's minimum (2048-point STFT on 16 bands needs n_signal > 16384)"
    for n in (32768, 65536, 131072):
        r = interleave(runner, {"x": runner.native("step", "--version", "v2", "--capacity", cap, "--batch", 2,
                                                   "--n_signal", n, "--threads", 1, "--steps", steps,
                                                   "--warmup", 1)}, reps)["x"]
        res["n_signal"].append({"batch": 2, "n_signal": n, **strip(r)})
    return res


def bench_data(runner, quick, build, v2_step_t2):
    res = {}
    # Loader vs consumption at the benchmark shape (batch 4 × 32768) and at v2's own (8 × 131072).
    for b, n in ((4, 32768), (8, 131072)):
        argv = [os.path.join(build, "bin", "loader_bench"), "--batch", b, "--n_signal", n,
                "--batches", 6 if quick else 16, "--demo_seconds", 20]
        d, cmd, load = runner.json_cmd(argv)
        res[f"loader_{b}x{n}"] = {"command": cmd, "runs": d["runs"], "load": load}
    # The same at v2's shape from a lazy database (preprocess --lazy): decoded files kept, and none.
    for key, extra in (("lazy", []), ("lazy_nocache", ["--lazy_cache_mb", 0])):
        argv = [os.path.join(build, "bin", "loader_bench"), "--batch", 8, "--n_signal", 131072,
                "--batches", 6 if quick else 16, "--demo_seconds", 20, "--lazy", *extra]
        d, cmd, load = runner.json_cmd(argv)
        res[f"loader_8x131072_{key}"] = {"command": cmd, "runs": d["runs"], "load": load}
    if v2_step_t2:  # (threads, median s/step) of the faster native v2 step
        res["v2_step_examples_per_second_4x32768"] = 4.0 / v2_step_t2[1]
        res["v2_step_threads"] = v2_step_t2[0]
    # Preprocess throughput vs sox / ffmpeg decoding the same files.
    audio = benchlib.demo_audio(runner.bin, os.path.join(runner.tmp, "pre_audio"), 30 if quick else 60)
    files = sorted(glob.glob(os.path.join(audio, "**", "*.*"), recursive=True))
    total_s = 0.0
    for f in files:
        total_s += float(sh(f"soxi -D {shlex.quote(f)}") or 0)
    res["audio_files"] = len(files)
    res["audio_seconds"] = total_s
    pre_times, sox_times, ff_times = [], [], []
    ffmpeg = shutil.which("ffmpeg")
    for r in range(2 if quick else 3):
        db = os.path.join(runner.tmp, f"pre_db_{r}")
        pre_argv = [os.path.join(build, "bin", "preprocess"), "--input_path", audio, "--output_path", db,
                    "--num_signal", "131072"]
        t0 = time.time()
        subprocess.run(pre_argv, check=True, capture_output=True)
        pre_times.append(time.time() - t0)
        shutil.rmtree(db, ignore_errors=True)
        t0 = time.time()
        for f in files:
            subprocess.run(["sox", f, "-t", "s16", "-r", "44100", "-c", "1", "/dev/null"], check=True,
                           capture_output=True)
        sox_times.append(time.time() - t0)
        if ffmpeg:
            t0 = time.time()
            for f in files:
                subprocess.run([ffmpeg, "-v", "quiet", "-i", f, "-f", "s16le", "-ac", "1", "-ar", "44100", "-y",
                                "/dev/null"], check=True, capture_output=True)
            ff_times.append(time.time() - t0)
    res["preprocess"] = {"command": runner.rel(pre_argv), "stats": stats(pre_times),
                         "audio_s_per_wall_s": total_s / statistics.median(pre_times)}
    res["sox"] = {"command": "for f in $TMP/pre_audio/*: sox $f -t s16 -r 44100 -c 1 /dev/null",
                  "stats": stats(sox_times), "audio_s_per_wall_s": total_s / statistics.median(sox_times)}
    if ff_times:
        res["ffmpeg"] = {"command": "for f in $TMP/pre_audio/*: ffmpeg -i $f -f s16le -ac 1 -ar 44100 -y /dev/null",
                         "stats": stats(ff_times), "audio_s_per_wall_s": total_s / statistics.median(ff_times)}
    else:
        res["ffmpeg"] = {"skipped": "ffmpeg is not installed (run.sh installs it with apt-get when it can)"}
    return res


def bench_whole_run(crunner, rave_py, quick, build, cuda_build, reps=None, steps=None):
    """Native `train` (its loader with the default 2 workers, and with 0 workers = loading on the
    training thread) against the real RAVE's `rave train` (its Lightning loop and DataLoader with
    2 workers, benchmarks/rave_train.py --step_times), v2 at batch 4 × 32768 without the crop,
    2 threads, on the same database and the same LibTorch, interleaved. Per-step times include the
    wait for data on both sides: the native one from the timing profile, RAVE's from
    on_train_batch_end to the next on_train_batch_start."""
    db = benchlib.demo_audio_db(os.path.join(build, "bin"), os.path.join(crunner.tmp, "run_db"), 20,
                                "--num_signal", 65536, seed=2)
    steps = steps or (8 if quick else 12)
    reps = reps or (2 if quick else 3)
    res = {"steps": steps, "reps": reps, "host": host()}
    names = ("native", "native_w0", "rave")
    for n in names:
        res[n] = {"times": [], "data": [], "loads": []}
    env = dict(os.environ, OMP_NUM_THREADS="2")  # RAVE's train.py leaves torch's thread count as it finds it
    for r in range(reps):
        for workers, name in ((2, "native"), (0, "native_w0")):
            out = os.path.join(crunner.tmp, f"runs_{name}_{r}")
            argv = [os.path.join(cuda_build, "bin", "train"), "--device", "cpu", "--config", "v2", "--db_path", db, "--out_path", out,
                    "--n_signal", "32768", "--batch", "4", "--max_steps", str(steps + 1), "--threads", "2",
                    "--data.workers", str(workers), "--train.valid_signal_crop", "false",
                    "--enable_timing_profiling", "--log_every", "1", "--val_every", "1000000", "--save_every", "1000000"]
            load = benchlib.load_avg()
            p = subprocess.run(argv, capture_output=True, text=True, env=env)
            if p.returncode != 0:
                raise RuntimeError(f"train failed: {p.stderr[-2000:]}")
            with open(os.path.join(benchlib.latest_run(out), "timing_profile.json")) as f:
                entries = json.load(f)[1:]  # the first step is warm-up
            res[name]["times"] += [e["total_batch_time"] for e in entries]
            res[name]["data"] += [e["data_time"] for e in entries]
            res[name]["loads"].append(load[0] if load else None)
            res[name]["command"] = crunner.rel(argv)
            shutil.rmtree(out, ignore_errors=True)
        out = os.path.join(crunner.tmp, f"runs_rave_{r}")
        times_json = os.path.join(crunner.tmp, f"rave_step_times_{r}.json")
        # max_steps + 2: the callback times a batch up to the next one's start, and the first is warm-up.
        argv = [rave_py, "-W", "ignore", RAVE_TRAIN, "--replace-unused-imports", "--step_times", times_json, "--",
                "--config", "v2", "--db_path", db, "--name", "bench", "--out_path", out,
                "--n_signal", "32768", "--batch", "4", "--workers", "2", "--gpu", "-1", "--channels", "1",
                "--max_steps", str(steps + 2), "--val_every", "1000000", "--save_every", "1000000", "--noprogress",
                "--override", "RAVE.valid_signal_crop=False"]
        load = benchlib.load_avg()
        p = subprocess.run(argv, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError(f"rave train failed: {(p.stdout + p.stderr)[-3000:]}")
        with open(times_json) as f:
            d = json.load(f)
        res["rave"]["times"] += d["step_seconds"][1:]
        res["rave"]["data"] += d["data_seconds"][1:]
        res["rave"]["loads"].append(load[0] if load else None)
        res["rave"]["command"] = "OMP_NUM_THREADS=2 " + crunner.rel(argv)
        res["rave"]["version"] = p.stdout.splitlines()[0] if p.stdout else ""
        shutil.rmtree(out, ignore_errors=True)
        log("whole run rep %d: native %.3f s/step, native (0 workers) %.3f, rave train %.3f" % (
            r + 1, statistics.median(res["native"]["times"][-steps:]),
            statistics.median(res["native_w0"]["times"][-steps:]), statistics.median(d["step_seconds"][1:])))
    for n in names:
        e = res[n]
        e["stats"] = stats(e["times"])
        e["data_stats"] = stats(e["data"])
        e["examples_per_second"] = 4 / e["stats"]["median"]
        e["mean_examples_per_second"] = 4 * len(e["times"]) / sum(e["times"])
        e["data_fraction"] = sum(e["data"]) / sum(e["times"])
    res["ratio_native_over_rave"] = res["native"]["stats"]["median"] / res["rave"]["stats"]["median"]
    return res


def bench_defaults(runner, quick, build):
    res = {}
    reps = 2 if quick else 3
    variants = {"mkldnn_on": runner.native("step", "--version", "v2", "--batch", 4, "--n_signal", 32768,
                                           "--threads", 2, "--steps", 1 if quick else 2, "--warmup", 1, "--mkldnn", 1),
                "mkldnn_off": runner.native("step", "--version", "v2", "--batch", 4, "--n_signal", 32768,
                                            "--threads", 2, "--steps", 1 if quick else 2, "--warmup", 1, "--mkldnn", 0)}
    log("mkldnn on/off")
    r = interleave(runner, variants, reps)
    res["mkldnn"] = {k: strip(v) for k, v in r.items()}
    d, cmd, load = runner.json_cmd(runner.native("validate", "--version", "v2", "--batch", 4, "--n_signal", 32768,
                                                 "--threads", 2, "--reps", 3 if quick else 5))
    res["validation_guard"] = {"command": cmd, "load": load, "no_grad": stats(d["no_grad_seconds"]),
                               "inference_mode": stats(d["inference_mode_seconds"])}
    # Threads per config: steps/s of short runs at 1 and 2 intra-op threads, interleaved.
    thr_db = benchlib.demo_audio_db(runner.bin, os.path.join(runner.tmp, "thr_db"), 20, "--num_signal", 16384, seed=4)
    neural_db = benchlib.demo_neural_db(runner.bin, os.path.join(runner.tmp, "thr_neural_db"), 182, 200)
    thr = {}
    jobs = [("tiny_rave", thr_db, 90, 30), ("s5_maze", neural_db, 90, 30), ("foundational", neural_db, 30, 10)]
    policies = ("default", "PASSIVE")  # OpenMP's own default (spin, then sleep) and passive waiting
    for rep in range(2):
        for cfg, db, steps, every in jobs:
            for pol in policies:
                env = dict(os.environ)
                env.pop("OMP_WAIT_POLICY", None)
                if pol != "default":
                    env["OMP_WAIT_POLICY"] = pol
                for t in (1, 2):
                    out = os.path.join(runner.tmp, f"thr_runs_{cfg}_{t}")
                    argv = [os.path.join(build, "bin", "train"), "--config", cfg, "--db_path", db, "--out_path", out,
                            "--max_steps", str(steps), "--threads", str(t), "--log_every", str(every),
                            "--val_every", "1000000", "--save_every", "1000000"]
                    load = benchlib.load_avg()
                    p = subprocess.run(argv, capture_output=True, text=True, env=env)
                    if p.returncode != 0:
                        raise RuntimeError(f"train --config {cfg} failed: {p.stderr[-1500:]}")
                    rates = [float(m) for m in re.findall(r"\| ([0-9.eE+-]+) steps/s", p.stdout)][1:]  # 1st: warm-up
                    e = thr.setdefault(cfg, {}).setdefault(f"{pol}/{t}", {"rates": [], "loads": []})
                    e["rates"] += rates
                    e["loads"].append(load[0] if load else None)
                    e["command"] = runner.rel(argv)
                    shutil.rmtree(out, ignore_errors=True)
        log(f"threads rep {rep + 1}: " + "; ".join(
            f"{c} " + " ".join(f"{k}={statistics.median(e['rates']):.1f}" for k, e in v.items()) for c, v in thr.items()))
    res["threads"] = thr
    # What `train` picks by itself (threads line) on a tiny run.
    argv = [os.path.join(build, "bin", "train"), "--config", "tiny_rave", "--db_path", thr_db, "--out_path",
            os.path.join(runner.tmp, "def_runs"), "--max_steps", "2"]
    p = subprocess.run(argv, capture_output=True, text=True)
    m = re.search(r"(\d+) threads?\b", p.stdout)
    res["train_default_threads"] = int(m.group(1)) if m else None
    res["train_default_threads_command"] = runner.rel(argv)
    res["print_config_workers"] = sh(f"{build}/bin/train --config v2 --print_config | grep -E '^workers|^threads'")
    return res


def others_plan(quick, build, cuda_build):
    """[(script, argv, env, None)] for each script to run, [(script, None, None, why)] for each
    left out (OTHERS says how each runs and what it needs)."""
    plan = []
    for script in sorted(glob.glob(os.path.join(ROOT, "benchmarks", "*.sh"))):
        name = os.path.basename(script)
        rel = os.path.relpath(script, ROOT)
        if name in NOT_BENCHMARKS:
            continue
        spec = OTHERS.get(name)
        if spec is None:
            plan.append((rel, None, None, "not in bench.py's OTHERS table (say there how it runs)"))
            continue
        mode = spec.get("quick", (["--quick"], {})) if quick else spec.get("full", ([], {}))
        if mode is None:
            plan.append((rel, None, None, f"no quick mode ({spec.get('quick_note', 'run it alone')})"))
            continue
        bin_dir = cuda_build if spec.get("cuda_build") else build
        missing = [os.path.join(bin_dir, "bin", b) for b in spec.get("build", ()) + spec.get("cuda_build", ())
                   if not os.path.exists(os.path.join(bin_dir, "bin", b))]
        missing += [p for p in spec.get("needs", ()) if not os.path.exists(os.path.join(ROOT, p))]
        if missing:
            why = f"missing {', '.join(missing)}" + (f"; {spec['note']}" if spec.get("note") else "")
            plan.append((rel, None, None, why))
            continue
        args, extra = mode
        env = dict(os.environ, BUILD_DIR=bin_dir, **spec.get("env", {}), **extra)
        plan.append((rel, ["bash", script] + list(args), env, None))
    return plan


def run_others(quick, build, cuda_build):
    """Other engineers' benchmarks: the benchmarks/*.sh of OTHERS, each as it says."""
    res = {}
    for rel, argv, env, why in others_plan(quick, build, cuda_build):
        if argv is None:
            log(f"not run: {rel} ({why})")
            res[rel] = {"skipped": why}
            continue
        log(f"running {rel} {' '.join(argv[2:])}".rstrip())
        t0 = time.time()
        p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env)
        res[rel] = {"rc": p.returncode, "seconds": time.time() - t0, "tail": (p.stdout + p.stderr)[-1500:]}
    return res


def per_rep_medians(times, reps):
    """The median of each repetition's steps (times: every repetition's steps, in order)."""
    steps = len(times) // reps
    return [statistics.median(times[i * steps:(i + 1) * steps]) for i in range(reps)]


def env_of(env):
    """The environment of a result, from bench.py's environment()."""
    out = {k: v for k, v in env.items() if v is not None}
    if env.get("uptime") and "load average:" in env["uptime"]:
        out["load_before"] = [float(x) for x in env["uptime"].split("load average:")[1].split(",")]
    if env.get("uptime_end") and "load average:" in env["uptime_end"]:
        out["load_after"] = [float(x) for x in env["uptime_end"].split("load average:")[1].split(",")]
    return out


def loads_range(loads):
    loads = [x for x in loads if x is not None]
    return f"{min(loads):.1f}–{max(loads):.1f}" if loads else "—"


def rec_rave_cpu_step(nvr, env, command):
    e0 = next(iter(nvr.values()))
    re_ = e0["rave_env"]
    b = benchlib.Blocks()
    b.text("The Python side is RAVE itself: acids-rave " + str(re_.get("acids-rave")) + " with pytorch-lightning "
           + str(re_.get("pytorch-lightning")) + ", torchaudio " + str(re_.get("torchaudio")) + " and numpy "
           + str(re_.get("numpy")) + ", its model built from its own gin file, stepped through its own "
           "`training_step` with Lightning's per-batch callbacks (`benchmarks/rave_gpu_step.py --device cpu`; "
           "stand-ins for " + (", ".join(re_.get("replaced_imports") or []) or "nothing") + ", which the step "
           "never calls; PQMF prototype: " + str(re_.get("pqmf_prototype")) + "). Both sides run torch "
           + str(re_.get("torch")) + "'s LibTorch on the CPU: the native one is `build-cuda/` "
           "(`scripts/check_cuda_build.sh`), whose binaries load that wheel's libraries"
           + ("; its own products (the convolutions' forward and backward) call "
              + str(e0["native_gemm"]) + ", as train does (models/common/row_linear.h: the wheel's "
              "LibTorch keeps its oneDNN's symbols hidden and hands its own products to MKL)"
              if e0.get("native_gemm") else "") + ". "
           "`benchmarks/rave_cpu_env.sh` makes the venv. That the two compute the same step is "
           "the business of the golden tests (`tests/models/rave_oracle_test.cpp`, docs/rave_fidelity.md).")
    b.text("Phase-1 training step (forward + losses + backward + Adam), batch 4 × 32768, without the "
           "receptive-field crop (at full size it needs more than 32768 samples):")
    rows, targets, derived = [], [], {}
    for k, e in nvr.items():
        ph = e["native_phase_medians"]
        reps = len(e["native"]["loads"])
        per_rep = [n / r for n, r in zip(per_rep_medians(e["native"]["times"], reps),
                                         per_rep_medians(e["rave"]["times"], reps))]
        derived[k] = {"ratio_native_over_rave": e["ratio_native_over_rave"], "per_repetition": per_rep}
        rows.append([e["version"], e["threads"], fmt_s(e["native"]["stats"]), fmt_s(e["rave"]["stats"]),
                     f"**{e['ratio_native_over_rave']:.3f}**",
                     f"{ph['forward']:.2f} / {ph['loss']:.2f} / {ph['backward']:.2f} / {ph['optimizer']:.2f}",
                     loads_range(e["native"]["loads"] + e["rave"]["loads"])])
        # The goal: 0.6 of RAVE's own step, v2 and v3, 1 and 2 threads, in every repetition.
        targets.append(benchlib.target(
            f"RAVE {e['version']} phase-1 step on the CPU, ours / the real RAVE's training_step, "
            f"{e['threads']} thread(s)",
            "≤ 0.6", "<=", 0.6, per_rep, value=e["ratio_native_over_rave"], fmt="{:.3f}", over="repetitions"))
    b.table(["model", "threads", "native s/step", "RAVE s/step", "native/RAVE",
             "native phases (fwd / loss / bwd / adam, s)", "load (1-min avg)"], rows)
    b.text("Commands (per repetition, interleaved): " + "; ".join(
        f"{k}: `{e['native']['command']}` ↔ `{e['rave']['command']}`" for k, e in nvr.items()) + ".")
    return benchlib.record("rave_cpu_step", "Native vs the real RAVE: same model, same LibTorch", command,
                           dict(env, host=e0.get("host")), b, raw=nvr, derived=derived, targets=targets,
                           analysis="docs/perf/rave_cpu.md",
                           commands=[c for e in nvr.values() for c in (e["native"]["command"], e["rave"]["command"])])


def rec_whole_run(wr, env, command):
    b = benchlib.Blocks()
    b.text("Whole run including data loading (v2, batch 4 × 32768 without the crop, 2 threads, "
           f"{wr['reps']} interleaved repetitions × {wr['steps']} steps after one warm-up step), on the same "
           "database (written by our `preprocess`, read by RAVE's own `rave/dataset.py`): native `train` with its "
           "loader (default 2 worker threads, and 0 workers = loading on the training thread) vs RAVE's own "
           "`rave train` (its Lightning loop, its DataLoader with `--workers 2` and its augmentations: random "
           "crop, phase mangle, dequantize; `benchmarks/rave_train.py --step_times`). Step times include the "
           "wait for data on both sides: the native one is `data_time` from the timing profile, RAVE's the time "
           "from `on_train_batch_end` to the next `on_train_batch_start`.")
    rows = []
    for n, label in (("native", "native, 2 workers"), ("native_w0", "native, 0 workers"),
                     ("rave", "`rave train`, 2 workers")):
        e = wr[n]
        rows.append([label, f"{e['examples_per_second']:.3f}", fmt_s(e["stats"]),
                     f"{1000 * e['data_stats']['median']:.2f} ms", f"{100 * e['data_fraction']:.2f} %",
                     loads_range(e["loads"]), f"`{e['command']}`"])
    b.table(["", "examples/s (4 / median step)", "s/step", "data wait per step (median)", "data wait, % of wall",
             "load (1-min avg)", "command"], rows)
    b.text(f"Native / `rave train` whole-run step ratio (medians): **{wr['ratio_native_over_rave']:.3f}**.")
    # Examples/s ours over RAVE's, repetition by repetition (the same number of steps each).
    per_rep = [r / n for n, r in zip(per_rep_medians(wr["native"]["times"], wr["reps"]),
                                     per_rep_medians(wr["rave"]["times"], wr["reps"]))]
    n_eps, r_eps = wr["native"]["examples_per_second"], wr["rave"]["examples_per_second"]
    target = benchlib.target("RAVE v2 whole run on the CPU (data loading included), examples/s: ours / `rave train`",
                             "> 1 (ours higher)", ">", 1.0, per_rep, value=n_eps / r_eps, fmt="{:.2f}",
                             over="repetitions", note=f"{n_eps:.2f} vs {r_eps:.2f} examples/s")
    return benchlib.record("rave_cpu_whole_run", "Native vs the real RAVE: whole run", command,
                           dict(env, host=wr.get("host")), b, raw=wr,
                           derived={"ours_over_rave_examples_per_second_per_repetition": per_rep},
                           targets=[target], commands=[wr[n]["command"] for n in ("native", "native_w0", "rave")])


def rec_op_counts(oc, env, command):
    b = benchlib.Blocks()
    b.text("Operator calls per phase-1 step (RecordFunction counter, tiny v2 shape; used to look for needless copies):")
    b.table(["phase", "calls", "aten::_to_copy", "top operators"],
            [[ph, n, oc["to_copy"].get(ph, 0), ", ".join(f"{k} {v}" for k, v in oc["top"][ph][:5])]
             for ph, n in oc["totals"].items()])
    return benchlib.record("op_counts", "Operator calls per step", command, env, b, raw=oc, commands=[oc["command"]])


def rec_flops(fl, env, command):
    b = benchlib.Blocks()
    b.text("Convolution FLOPs of a v2 phase-1 step at 4 × 32768, counted from `aten::convolution` input shapes "
           f"({fl['v2']['conv_calls']} calls): forward {fl['v2']['forward_conv_flops'] / 1e9:.2f} GFLOP, "
           f"step ≈ 3 × forward = {fl['v2']['step_conv_flops'] / 1e9:.2f} GFLOP (backward = grad-input + grad-weight; "
           f"STFTs, element-wise ops and Adam not counted). Command: `{fl['v2']['command']}`.")
    rows = []
    for t, p in fl["peak"].items():
        e = fl["efficiency"].get(t) or fl["efficiency"].get(str(t))
        rows.append([t, f"{p['gflops']:.1f}"] + ([f"{e['step_seconds']:.3f}", f"{e['achieved_gflops']:.1f}",
                                                  f"{100 * e['fraction_of_peak']:.1f} %"] if e else ["–", "–", "–"]))
    b.table(["threads", "sgemm peak (torch::mm 2048², GFLOP/s)", "v2 step s (median)", "achieved conv GFLOP/s",
             "fraction of peak"], rows)
    b.text("Peak commands: " + ", ".join(f"`{p['command']}`" for p in fl["peak"].values()) + ".")
    return benchlib.record("compute_efficiency", "Compute efficiency", command, env, b, raw=fl,
                           commands=[fl["v2"]["command"]] + [p["command"] for p in fl["peak"].values()])


def rec_scaling(sc, env, command):
    b = benchlib.Blocks()
    b.text(f"v2 structure at capacity {sc['capacity']}, phase-1 step, {sc.get('threads', 2)} thread(s).")
    rows = []
    for e in sc["batch"] + sc["n_signal"]:
        per = e["stats"]["median"] / (e["batch"] * e["n_signal"] / 32768)
        rows.append([e["batch"], e["n_signal"], fmt_s(e["stats"]), f"{per:.4f}", f"`{e['command']}`"])
    b.table(["batch", "n_signal", "s/step", "s per example·32768 samples", "command"], rows)
    b.text(f"n_signal: {sc.get('n_signal_note', '')}.")
    return benchlib.record("scaling", "Scaling", command, env, b, raw=sc,
                           commands=[e["command"] for e in sc["batch"] + sc["n_signal"]])


def rec_data(dp, env, command):
    b = benchlib.Blocks()
    rows, ratios = [], []
    cons = dp.get("v2_step_examples_per_second_4x32768")
    for k in ("loader_4x32768", "loader_8x131072"):
        for run in dp.get(k, {}).get("runs", []):
            rows.append([f"loader {k[7:]}, {run['workers']} worker(s)", f"{run['examples_per_second']:.1f} examples/s",
                         f"`{dp[k]['command']}`"])
            if cons:
                ratios.append(run["examples_per_second"] / cons)
    lazy_ratios = []
    for k, what in (("loader_8x131072_lazy", "lazy database, 512 MiB of decoded files kept"),
                    ("loader_8x131072_lazy_nocache", "lazy database, every draw decodes its file")):
        for run in dp.get(k, {}).get("runs", []):
            vs = f" ({run['examples_per_second'] / cons:.0f}× the step's consumption)" if cons else ""
            rows.append([f"loader 8x131072, {what}, {run['workers']} worker(s)",
                         f"{run['examples_per_second']:.1f} examples/s{vs}", f"`{dp[k]['command']}`"])
            if cons:
                lazy_ratios.append(run["examples_per_second"] / cons)
    if cons:
        rows.append([f"v2 phase-1 step consumption, 4 × 32768, {dp.get('v2_step_threads', 2)} thread(s) (fastest native "
                     "median)", f"{cons:.2f} examples/s",
                     f"(native step median of {dp.get('v2_step_source', 'the RAVE step section')})"])
    rows.append([f"preprocess ({dp['audio_files']} files, {dp['audio_seconds']:.0f} s of audio)",
                 f"{dp['preprocess']['audio_s_per_wall_s']:.0f} audio s / wall s ({fmt_s(dp['preprocess']['stats'])})",
                 f"`{dp['preprocess']['command']}`"])
    rows.append(["sox decode of the same files",
                 f"{dp['sox']['audio_s_per_wall_s']:.0f} audio s / wall s ({fmt_s(dp['sox']['stats'])})",
                 f"`{dp['sox']['command']}`"])
    if "stats" in dp["ffmpeg"]:
        rows.append(["ffmpeg decode of the same files", f"{dp['ffmpeg']['audio_s_per_wall_s']:.0f} audio s / wall s",
                     f"`{dp['ffmpeg']['command']}`"])
    else:
        rows.append(["ffmpeg", f"skipped: {dp['ffmpeg']['skipped']}", ""])
    b.table(["measurement", "figure", "command"], rows)
    targets = []
    if ratios:
        targets.append(benchlib.target("Loader throughput / v2 step consumption", "≥ 20×", ">=", 20.0, ratios,
                                       value=min(ratios), fmt="{:.0f}×", over="loader rows",
                                       note="slowest loader row"))
    if lazy_ratios:
        targets.append(benchlib.target("Lazy database loader throughput / v2 step consumption", "≥ 20×", ">=", 20.0,
                                       lazy_ratios, value=min(lazy_ratios), fmt="{:.0f}×", over="lazy loader rows",
                                       note="slowest lazy row (every draw decoding its file)"))
    return benchlib.record("data_path", "Data path", command, env, b, raw=dp, targets=targets,
                           derived={"loader_over_consumption": ratios, "lazy_loader_over_consumption": lazy_ratios})


def rec_defaults(df, env, command):
    b = benchlib.Blocks()
    b.text(f"BLAS: `update-alternatives` libblas.so.3 → `{env.get('blas_alternative')}`; `ldd build/bin/train`: "
           f"`{(env.get('ldd_blas') or '(no direct BLAS dependency)').replace(chr(10), ' ').replace(chr(9), '')}`; "
           f"libtorch_cpu: `{(env.get('ldd_torch_blas') or '').replace(chr(10), ' ').replace(chr(9), '')}`.")
    b.text(f"Threads: `train --config tiny_rave` used {df['train_default_threads']} thread(s) (its `train.threads = 1`) "
           f"on this {env.get('nproc')}-core machine (`{df['train_default_threads_command']}`); `train.threads = 0` (the "
           "full-size configs) means all cores; Debian's Python torch starts with "
           f"`{env.get('python_torch')}` (version, threads, mkldnn).")
    b.text("Loader workers (resolved v2 config): `" + " / ".join(
        line.split("#")[0].strip() for line in df["print_config_workers"].splitlines()) + "`.")
    mk = df["mkldnn"]
    b.text(f"oneDNN (mkldnn) for convolutions, v2 step 4 × 32768, 2 threads: on {fmt_s(mk['mkldnn_on']['stats'])}, "
           f"off {fmt_s(mk['mkldnn_off']['stats'])} (`{mk['mkldnn_on']['command']}` ↔ `--mkldnn 0`).")
    vg = df["validation_guard"]
    b.text(f"Validation pass (v2, 4 × 32768, 2 threads): NoGradGuard {fmt_s(vg['no_grad'])}, InferenceMode "
           f"{fmt_s(vg['inference_mode'])} (`{vg['command']}`).")
    b.text("Channels-last: a memory format for 4-D (NCHW) tensors; the RAVE autoencoder is all 1-D convolutions "
           "(3-D tensors), so it does not apply to a phase-1 step.")
    if df.get("threads") and "default/1" in next(iter(df["threads"].values())):
        b.text("Intra-op threads per config under both OpenMP wait policies (steps/s of short `train` runs, median "
               "over logging intervals after the first, 2 interleaved repetitions): libgomp's default (threads spin "
               "a while, then sleep) and `OMP_WAIT_POLICY=PASSIVE` (sleep at once; what the scripts export, and what "
               "a shared machine needs).")
        defaults = {"tiny_rave": "1", "s5_maze": "1", "foundational": "0 (all cores)"}
        rows = []
        for cfg, v in df["threads"].items():
            med = {k: statistics.median(e["rates"]) for k, e in v.items()}
            best = max(med.values())
            cell = lambda k: (f"**{med[k]:.1f}**" if med[k] == best else f"{med[k]:.1f}") if k in med else "—"  # noqa: E731
            rows.append([cfg, cell("default/1"), cell("default/2"), cell("PASSIVE/1"), cell("PASSIVE/2"),
                         defaults.get(cfg, "?"), loads_range([x for e in v.values() for x in e["loads"]]),
                         f"`{v['default/1']['command']}`"])
        b.table(["config", "default, 1 thread", "default, 2 threads", "PASSIVE, 1 thread", "PASSIVE, 2 threads",
                 "config default", "load (1-min avg)", "command (1 thread)"], rows)
    return benchlib.record("defaults", "Defaults", command, env, b, raw=df, analysis="docs/perf/defaults.md")


# The result each section of bench.py's measurements becomes: (key in R, builder).
BUILDERS = (("native_vs_rave", rec_rave_cpu_step), ("whole_run", rec_whole_run), ("op_counts", rec_op_counts),
            ("flops", rec_flops), ("scaling", rec_scaling), ("data", rec_data), ("defaults", rec_defaults))


def records(R, env, command):
    """bench.py's measurements (R, keyed as BUILDERS says) -> the results they make."""
    out = []
    for key, build in BUILDERS:
        if R.get(key) and not (key == "whole_run" and "rave" not in R[key]):
            out.append(build(R[key], env, command))
    return out


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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cuda_build", default=os.path.join(ROOT, "build-cuda"),
                    help="the build against torch 2.11.0's LibTorch (scripts/check_cuda_build.sh), for the "
                    "comparisons with the real RAVE")
    ap.add_argument("--cuda_lib", default=CUDA_LIB,
                    help="put before LD_LIBRARY_PATH for the --cuda_build binaries (the CUDA toolkit's lib64, "
                    "which libtorch_cuda.so links); empty: leave LD_LIBRARY_PATH as it is")
    ap.add_argument("--reps", type=int, help="repetitions of the interleaved sections (default 3; --quick 2)")
    ap.add_argument("--steps", type=int, help="timed steps per process in the step sections (default 3; --quick 1)")
    ap.add_argument("--versions", help="comma list of RAVE versions for the step sections (default v2,v3; --quick v2)")
    ap.add_argument("--whole_steps", type=int, help="timed steps per whole run (default 12; --quick 8)")
    ap.add_argument("--rave_python", default=os.path.join(ROOT, ".venv-rave-cpu", "bin", "python"),
                    help="the Python with the real RAVE on that same torch (benchmarks/rave_cpu_env.sh)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--results_dir", default=benchlib.RESULTS_DIR,
                    help="where each section's result JSON is written (and read by the rendering)")
    ap.add_argument("--md", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--only", default="", help="comma list of sections: rave,ops,flops,scaling,data,whole,defaults,"
                    "others (the results of the others stay as they are)")
    ap.add_argument("--render_only", action="store_true",
                    help="rewrite BENCHMARKS.md from the results JSON alone (no measurement)")
    ap.add_argument("--check", action="store_true",
                    help="with --render_only: write nothing, fail with a diff unless --md is what the results render")
    a = ap.parse_args()
    if a.render_only:
        sys.exit(render(a.results_dir, a.md, a.check))
    only = set(filter(None, a.only.split(","))) or set(SECTIONS)
    have = lambda d, *bins: all(os.path.exists(os.path.join(d, "bin", b)) for b in bins)  # noqa: E731
    why = {}  # the sections that cannot run, and why
    if not (have(a.cuda_build, "rave_bench", "train") and os.path.exists(a.rave_python)):
        why.update(dict.fromkeys(("rave", "flops", "whole"), f"{a.cuda_build}/bin/rave_bench and train, or "
                                 f"{a.rave_python}, are missing: benchmarks/rave_cpu_env.sh makes them"))
    for section, bins in (("data", ("preprocess", "loader_bench")), ("whole", TRAIN), ("defaults", TRAIN)):
        if not have(a.build, *bins):
            why.setdefault(section, f"their programs are not built in {a.build}")
    for section in sorted(only & set(why)):
        log(f"not run: {section} ({why[section]})")
    want = lambda s: s in only and s not in why  # noqa: E731
    tmp = tempfile.mkdtemp(prefix="rt_bench_")
    runner = Runner(a.build, tmp)
    crunner = Runner(a.cuda_build, tmp)  # its binaries load the CUDA toolkit's libraries, even on the CPU
    if a.cuda_lib:
        os.environ["LD_LIBRARY_PATH"] = a.cuda_lib + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")
    if benchlib.openblas_coretype():  # every arm on the BLAS kernels the CPU allows (benchlib)
        os.environ["OPENBLAS_CORETYPE"] = benchlib.openblas_coretype()
    env = bench_environment(a.build)
    env["git"] = benchlib.git_describe()
    command = "benchmarks/bench.py" + "".join(f" {x}" for x in sys.argv[1:] if not x.startswith("/"))
    R = {}
    t_start = time.time()
    # --quick: v2 only, one timed step per process (a full-size v2 step is ~12 s of CPU here).
    versions = ["v2"] if a.quick else ["v2", "v3"]
    versions = a.versions.split(",") if a.versions else versions
    reps, steps = (2, 1) if a.quick else (3, 3)
    reps, steps = a.reps or reps, a.steps or steps
    try:
        if want("rave"):
            R["native_vs_rave"] = bench_native_vs_rave(crunner, a.rave_python, versions, reps, steps)
        if want("ops"):
            R["op_counts"] = bench_op_counts(runner, "v2")
        medians = {}
        for t in (1, 2):
            e = R.get("native_vs_rave", {}).get(f"v2_t{t}")
            if e:
                medians[t] = e["native"]["stats"]["median"]
        if want("flops") and medians:  # the same build as the step medians it divides
            R["flops"] = bench_flops(crunner, a.quick, medians)
        if want("scaling"):
            R["scaling"] = bench_scaling(runner, a.quick)
        step_source = None
        if want("data") and not medians:
            # The step section not rerun: its last result's medians, named as such.
            prev = os.path.join(a.results_dir, "rave_cpu_step.json")
            if os.path.exists(prev):
                p = json.load(open(prev))
                for t in (1, 2):
                    e = p.get("raw", {}).get(f"v2_t{t}")
                    if e:
                        medians[t] = e["native"]["stats"]["median"]
                step_source = f"the RAVE step section's result of {p['date'][:10]} at {p['environment'].get('git')}"
        if want("data"):
            R["data"] = bench_data(runner, a.quick, a.build, min(medians.items(), key=lambda kv: kv[1]) if medians else None)
            if step_source and "v2_step_examples_per_second_4x32768" in R["data"]:
                R["data"]["v2_step_source"] = step_source
        if want("whole"):
            R["whole_run"] = bench_whole_run(crunner, a.rave_python, a.quick, a.build, a.cuda_build, a.reps,
                                             a.whole_steps)
        if want("defaults"):
            R["defaults"] = bench_defaults(runner, a.quick, a.build)
        if want("others"):
            # Each writes its own result into the results directory.
            os.environ["BENCH_RESULTS_DIR"] = a.results_dir
            for script, o in run_others(a.quick, a.build, a.cuda_build).items():
                if "rc" in o:
                    log(f"{script}: exit {o['rc']}, {o['seconds']:.0f} s" + ("" if o["rc"] == 0 else "\n" + o["tail"]))
    finally:
        env["uptime_end"] = sh("uptime")
        for r in records(R, env_of(env), command):
            log(f"wrote {benchlib.write_result(r, a.results_dir)}")
        shutil.rmtree(tmp, ignore_errors=True)
    render(a.results_dir, a.md)
    log(f"done in {time.time() - t_start:.0f} s: {a.results_dir}, {a.md}")


if __name__ == "__main__":
    main()
