"""The training-loop benchmarks of bench.py: descriptions and drivers (standard library only):
the cost of timing + memory profiling and of detailed tracing, freed memory kept for reuse, a
long run's memory and profile size, and data-parallel training against torch's DDP."""
import collections
import glob
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import time

import benchlib

S = benchlib.sections()
NO_VAL = ["--val_every", "1000000", "--save_every", "1000000"]


def train(ctx, cfg, db, out, *args, nproc=1):
    launch = ["--nproc_per_node", nproc] if nproc > 1 else []
    return [os.path.join(ctx.bin, "train"), *map(str, [*launch, "--config", cfg, "--db_path", db, "--out_path", out, *args])]


def mean_rate(log):
    """The mean steps/s of a train log's intervals after the first (warm-up)."""
    rates = [float(m) for m in re.findall(r"\| ([0-9.e+]+) steps/s(?: \|.*)?$", log, re.M)][1:]
    return sum(rates) / len(rates) if rates else 0.0


# The symbols that count as profiling code: our timers, phase scopes, memory reporter and
# counting allocator, profile writers and their JSON, and c10's memory hooks.
PROFILING_SYMBOLS = (r"rt::prof::|rt::PhaseScope|counting_delete|counting_raw_delete|CountingCpuAllocator|record_cpu|"
                     r"ProfiledCPUMemoryReporter|reportMemoryUsage|memoryProfilingEnabled|ThreadLocalDebugInfo|"
                     r"nlohmann|_Map_base<void\*, std::pair<void\* const, unsigned long>|"
                     r"_Hashtable<void\*, std::pair<void\* const, unsigned long>")


def perf_share(text):
    """(samples as perf prints them, total % in profiling symbols, [(pct, symbol)] best first) of a
    `perf report --no-children --sort symbol --stdio` text."""
    m = re.search(r"^# Samples: ([0-9.]+)([KM]?)", text, re.M)
    top = sorted(((float(mm.group(1)), mm.group(2)[:60].strip()) for mm in
                  (re.match(r"\s+([0-9.]+)%\s+\[\.\]\s+(.*\S)", line) for line in text.splitlines())
                  if mm and re.search(PROFILING_SYMBOLS, mm.group(2))), reverse=True)
    return (m.group(1) + m.group(2) if m else "?"), sum(p for p, _ in top), top


def profiling(ctx):
    """Timing + memory profiling: interleaved A/B runs of each job, then the share of CPU samples in
    profiling code (perf record), which separate processes (spread: several %) cannot resolve."""
    o, flags = ctx.o, ["--enable_timing_profiling", "--enable_memory_profiling"]
    jobs = {"tiny_rave": ctx.audio_db("audio_db", 30, "--num_signal", 16384, "--max_db_size", 1),
            "s5_maze": ctx.neural_db("neural_db", 182)}
    run = lambda cfg, t, *f: train(ctx, cfg, jobs[cfg], ctx.path("runs"), "--max_steps", o.steps, "--log_every",  # noqa: E731
                                   o.every, "--val_every", 100000, "--save_every", 100000, "--threads", t, *f)
    b, raw, rows, prows, derived, targets = benchlib.Blocks(S["profiling"]["text"]), {"pairs": {}, "perf": {}}, [], [], {}, []
    for cfg in jobs:
        for t in (1, 2):
            off, on = [], []
            for _ in range(o.pairs):
                off.append(mean_rate(ctx.run(run(cfg, t)).stdout))
                on.append(mean_rate(ctx.run(run(cfg, t, *flags)).stdout))
            pairs = [(x / y - 1.0) * 100.0 for x, y in zip(off, on)]  # step-time ratio on/off − 1
            raw["pairs"][f"{cfg}/{t}"] = {"off_steps_per_second": off, "on_steps_per_second": on, "overhead_pct": pairs}
            derived[f"{cfg}/{t}/overhead_pct"] = benchlib.summary(pairs)
            rows.append([cfg, t, benchlib.spread(off, "{:.2f}"), benchlib.spread(on, "{:.2f}"),
                         f"{statistics.median(pairs):+.2f}% (pairs {min(pairs):+.1f}…{max(pairs):+.1f}%)"])
        if not (o.perf and shutil.which("perf")):
            continue
        data = ctx.path("perf.data")
        p = ctx.run(["perf", "record", "-q", "-F", 4999, "-o", data, "--", *run(cfg, 1, *flags)], check=False)
        if p.returncode:
            prows.append([cfg, 1, "—", f"perf record failed: {(p.stdout + p.stderr).strip().splitlines()[-1:]}", ""])
            continue
        samples, total, top = perf_share(ctx.run(["perf", "report", "-i", data, "--no-children", "--sort", "symbol",
                                                  "--stdio"], check=False).stdout)
        raw["perf"][cfg] = {"samples": samples, "profiling_pct": total, "symbols": top}
        prows.append([cfg, 1, samples, f"**{total:.2f} %**", "; ".join(f"{n} {p:.2f}%" for p, n in top[:3]) or "—"])
        targets.append(benchlib.target(b.line("target", cfg=cfg), "≤ 1 %", "<=", 1.0, [total], fmt="{:.2f} %",
                                       over="perf runs"))
    b.say("pairs", o=o).table("columns", rows).say("perf", o=o, symbols=PROFILING_SYMBOLS)
    b.table("perf_columns", prows) if prows else b.say("no_perf")
    return dict(blocks=b, raw=raw, derived=derived, targets=targets)


TRACE_ARMS = {"off": [], "traced": [], "shapes": ["--profiling.record_shapes"], "stack": ["--profiling.with_stack"],
              "modules": ["--profiling.with_modules"]}
TRACE_LABEL = {"off": "off", "traced": "traced", "shapes": "+ record_shapes", "stack": "+ with_stack",
               "modules": "+ with_modules"}


def tracing(ctx):
    """Detailed tracing: interleaved A/B runs of tiny_rave, then the same arms inside one process
    (every other step traced), and op_cost_bench's per-operator cost when built."""
    o, arms = ctx.o, ctx.o.arms.split()
    ctx.bin = os.path.join(o.build_dir, "bin") if o.build_dir else ctx.bin
    db = ctx.audio_db("db", 10, "--num_signal", 8192)
    every = f"--profiling.wait 0 --profiling.warmup 0 --profiling.active {o.steps} --profiling.repeat 1"
    alternate = "--profiling.wait 1 --profiling.warmup 0 --profiling.active 1 --profiling.repeat 0"

    def steps_of(name, steps, arm, schedule):
        flags = [] if arm == "off" else ["--enable_profiling", *schedule.split(), "--profiling.skip_first", "0"]
        out = ctx.path("runs", name)
        ctx.run(train(ctx, "tiny_rave", db, out, "--name", name, "--max_steps", steps, "--train.threads", o.threads,
                      "--data.workers", o.workers, "--train.val_every", 100000, "--train.save_every", 100000,
                      "--train.log_every", 1000, "--enable_timing_profiling", *flags, *TRACE_ARMS[arm]))
        with open(os.path.join(benchlib.latest_run(out), "timing_profile.json")) as f:
            return [[e["step"], e["total_batch_time"]] for e in json.load(f) if e["step"] >= o.warmup]
    raw = {"ab": {arm: [] for arm in arms}, "alternating": {}}
    for rep in range(o.reps):
        for arm in arms:
            raw["ab"][arm].append(steps_of(f"ab_{arm}_{rep}", o.steps, arm, every))
    # In-process alternation: traced and untraced steps share the process, its memory layout and
    # its CPU, which separate processes do not (their medians differ by several %).
    for arm in arms:
        if arm != "off":
            raw["alternating"][arm] = steps_of(f"alt_{arm}", 4 * o.steps, arm, alternate)
    run_medians = {arm: [statistics.median(t for _, t in s) for s in raw["ab"][arm]] for arm in arms}
    base = statistics.median(run_medians["off"]) if "off" in run_medians else None
    b, rows, alt_rows, derived, targets = benchlib.Blocks(S["tracing"]["text"]), [], [], {}, []
    for arm in arms:
        m = statistics.median(run_medians[arm])
        derived[f"ab_{arm}_ms"] = benchlib.summary([v * 1e3 for v in run_medians[arm]])
        rows.append([TRACE_LABEL[arm], f"{m * 1e3:.2f}", " ".join(f"{v * 1e3:.1f}" for v in run_medians[arm]),
                     "—" if base is None or arm == "off" else f"{(m / base - 1) * 100:+.1f}%"])
    for arm, steps in raw["alternating"].items():
        on = statistics.median(t for s, t in steps if s % 2 == 1)
        off = statistics.median(t for s, t in steps if s % 2 == 0)
        over = derived[f"alternating_{arm}_pct"] = (on / off - 1) * 100
        n_on = sum(s % 2 for s, _ in steps)
        alt_rows.append([TRACE_LABEL[arm], f"{off * 1e3:.2f}", f"{on * 1e3:.2f}", f"{len(steps) - n_on} / {n_on}",
                         f"**{over:+.1f}%**"])
        if arm in ("traced", "shapes"):
            label = ("Detailed tracing overhead, tiny_rave (one process, every other step traced)" if arm == "traced"
                     else "… with record_shapes")
            targets.append(benchlib.target(label, "≤ 10 %", "<=", 10.0, [over], fmt="{:+.1f} %", over="in-process runs"))
    b.say("ab", o=o).table("columns", rows)
    b.say("alternating", o=o, steps=4 * o.steps, alternate=alternate).table("alt_columns", alt_rows)
    op_cost = os.path.join(ctx.bin, "op_cost_bench")
    if os.path.exists(op_cost):
        out = ctx.run([op_cost, "--benchmark_min_time=0.2", "--benchmark_format=json"]).stdout
        costs = raw["op_cost_ns"] = {x["name"]: x["cpu_time"] for x in json.loads(out)["benchmarks"]}
        b.say("op_cost", command=ctx.rel([op_cost]))
        base_ns = costs.get("BM_AddUntraced")
        b.table("op_columns", [[name, f"{ns:.0f}", f"+{ns - base_ns:.0f} ns" if base_ns and name.startswith("BM_AddTraced") else "—"]
                 for name, ns in costs.items()])
    return dict(blocks=b, raw=raw, derived=derived, targets=targets)


def heap_retention(ctx):
    """train.retain_freed_memory off and on, alternating: examples/s and minor page faults per step
    (getrusage of the train processes, start-up included)."""
    o, res = ctx.o, {}
    dbs = {"tiny_rave": ctx.audio_db("adb", 6, "--num_signal", 8192), "s5_maze": ctx.neural_db("ndb", 182, 512)}
    rows_ = (("tiny_rave", 1), ("s5_maze", 1), ("tiny_rave", 2))
    for k in ("GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):  # glibc's own defaults
        os.environ.pop(k, None)
    for _ in range(o.reps):
        for cfg, n in rows_:
            for retain in ("false", "true"):
                out = ctx.path(f"runs_{cfg}_{n}_{retain}_{len(res.get(f'{cfg}/{n}/{retain}', []))}")
                before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
                ctx.run(train(ctx, cfg, dbs[cfg], out, "--threads", 1, "--workers", 0, "--max_steps", o.steps, *NO_VAL,
                              "--log_every", o.steps, "--train.retain_freed_memory", retain, nproc=n))
                faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before
                s, eps = benchlib.job_examples_per_second(out)
                res.setdefault(f"{cfg}/{n}/{'retained' if retain == 'true' else 'defaults'}", []).append(
                    {"examples_per_second": eps, "page_faults_per_step": faults / (o.steps * n), "heap": s.get("heap", "")})
    med = lambda key, field: statistics.median(x[field] for x in res[key])  # noqa: E731
    b, rows, derived = benchlib.Blocks(S["heap_retention"]["text"]).say("intro", o=o), [], {}
    for cfg, n in rows_:
        d, k = f"{cfg}/{n}/defaults", f"{cfg}/{n}/retained"
        ratio = derived[f"{cfg}/{n}/retained_over_defaults"] = med(k, "examples_per_second") / med(d, "examples_per_second")
        rows.append([f"{cfg}, {n} rank{'s' if n > 1 else ''}", f"{med(d, 'examples_per_second'):.0f}",
                     f"{med(d, 'page_faults_per_step'):,.0f}", f"{med(k, 'examples_per_second'):.0f}",
                     f"{med(k, 'page_faults_per_step'):,.0f}", f"**{ratio:.2f}×**"])
    b.table("columns", rows)
    two = {k: med(f"tiny_rave/2/{k}", "examples_per_second") / med(f"tiny_rave/1/{k}", "examples_per_second")
           for k in ("defaults", "retained")}
    b.say("ranks", two=two)
    return dict(blocks=b, raw={"runs": res}, derived=derived)


def long_run_rss(ctx):
    """A long tiny_ssm run logging every step: does its RSS (VmRSS every 5 s) stay flat, and its
    profile files within part_mb × parts? --memory 1 adds --enable_memory_profiling."""
    o, memory = ctx.o, str(ctx.o.memory) == "1"
    steps, log_path = o.steps, ctx.path("train.log")
    argv = train(ctx, "tiny_ssm", ctx.neural_db("ndb", 32, 64), ctx.path("runs"), "--threads", 1, "--workers", 0,
                 "--batch", 8, "--max_steps", steps, "--log_every", 1, "--enable_timing_profiling", "--val_every", steps,
                 "--save_every", steps, "--profiling.profile_part_mb", o.part_mb, "--profiling.profile_parts", o.parts)
    argv += ["--enable_memory_profiling"] if memory else []
    samples, t0 = [], time.time()  # [step, rss KiB]
    with open(log_path, "w") as log:
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        while p.poll() is None:
            time.sleep(5)
            try:
                rss = next(int(x.split()[1]) for x in open(f"/proc/{p.pid}/status") if x.startswith("VmRSS:"))
                with open(log_path, "rb") as f:
                    f.seek(max(0, os.path.getsize(log_path) - 4096))
                    tail = [x for x in f.read().decode(errors="replace").splitlines() if x.startswith("step ")]
                samples.append([int(tail[-1].split()[1].split("/")[0]) if tail else 0, rss])
            except (OSError, StopIteration, ValueError, IndexError):
                pass
        rc = p.wait()
    wall = time.time() - t0
    run = os.path.dirname(glob.glob(ctx.path("runs", "*", "training_summary.json"))[0])
    early = [s for s in samples if s[0] >= steps // 100] or samples
    start, end, peak = early[0], samples[-1], max(r for _, r in samples)
    b = benchlib.Blocks(S["long_run_rss"]["text"])
    b.say("intro", steps=steps, profiles="timing and memory profiles" if memory else "timing profile", rc=rc,
          minutes=wall / 60, rate=steps / wall, o=o)
    b.table(["", "step", "RSS"], [
        [f"start (first sample past step {steps // 100:,})", f"{start[0]:,}", f"{start[1] / 1024:.1f} MiB"],
        ["end (last sample)", f"{end[0]:,}", f"{end[1] / 1024:.1f} MiB"],
        [f"peak of {len(samples)} samples", "", f"{peak / 1024:.1f} MiB"]])
    b.say("change", kib=end[1] - start[1], steps=end[0] - start[0],
          per=(end[1] - start[1]) / max(1, end[0] - start[0]) * 1000)
    files = {}
    for kind in ("timing", "memory") if memory else ("timing",):
        paths = sorted(glob.glob(os.path.join(run, f"{kind}_profile*.json")))
        files[kind] = {os.path.basename(f): os.path.getsize(f) for f in paths}
        b.text(f"{kind.capitalize()} profile files: {len(paths)} ({', '.join(files[kind])}), "
               f"{sum(files[kind].values()) / 2**20:.1f} MiB in all (bound {o.part_mb * o.parts} MiB).")
    return dict(blocks=b, derived={"rss_start_kib": start[1], "rss_end_kib": end[1], "rss_peak_kib": peak},
                raw={"rss_samples_step_kib": samples, "profile_files_bytes": files, "exit": rc, "wall_seconds": wall},
                commands=[ctx.rel(argv).replace(ctx.bin, "build/bin")])


DDP_ROWS = (("tiny_rave", "tiny_rave"), ("s5_maze", "s5_maze (BatchNorm sync)"),
            ("s5_maze_local", "s5_maze (BatchNorm local)"))
BUCKETS = ("1 25", "0.03 0.06", "0.01 0.02")


def run_summary(out):
    """One train run's figures: job and step examples/s, exposed communication, collectives."""
    s, eps = benchlib.job_examples_per_second(out)
    d = s.get("distributed", {})
    per_rank = d.get("per_rank", [])
    return {"eps": eps, "comm_wait_share": d.get("comm_wait_share", 0.0),
            "step_eps": sum(r["step_examples_per_second"] for r in per_rank) if per_rank else s["step_examples_per_second"],
            "collectives": per_rank[0]["collectives"] if per_rank else 0,
            "comm_busy_share": max((r["comm_busy_share"] for r in per_rank), default=0.0)}


def med(rs, k):
    return statistics.median(r[k] for r in rs)


def paired(arm, base, k):
    """The median over reps of run r's figure over run r's base figure, its range, the ratios."""
    ratios = sorted(a[k] / b[k] for a, b in zip(arm, base))
    return statistics.median(ratios), ratios[0], ratios[-1], ratios


def op_profile(path):
    """Per step medians (ms) of a trace: step, self time of the training thread's operators, the
    gradient_sync_wait; mean µs per call of aten::convolution and aten::stft."""
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    steps = sorted((e for e in ev if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    main = collections.Counter(e["tid"] for e in steps).most_common(1)[0][0]
    ops = sorted((e for e in ev if e.get("ph") == "X" and e.get("tid") == main and e.get("cat") == "cpu_op"),
                 key=lambda e: (e["ts"], -e["dur"]))
    self_time, stack = {}, []
    for e in ops:
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        if stack:
            self_time[id(stack[-1])] -= e["dur"]
        self_time[id(e)] = e["dur"]
        stack.append(e)
    per_step = [(s["dur"], sum(self_time[id(e)] for e in ops if s["ts"] <= e["ts"] < s["ts"] + s["dur"]),
                 sum(e["dur"] for e in ev if e.get("ph") == "X" and e["name"] == "gradient_sync_wait"
                     and s["ts"] <= e["ts"] < s["ts"] + s["dur"])) for s in steps]
    call = lambda name: statistics.fmean([e["dur"] for e in ops if e["name"] == name] or [0.0])  # noqa: E731
    m = lambda k: statistics.median(p[k] for p in per_step) / 1000  # noqa: E731
    return m(0), m(1), m(2), call("aten::convolution"), call("aten::stft")


def ddp(ctx):
    """Data-parallel training, native (`train --nproc_per_node 2`) and Python (ddp_bench.py): the runs
    ([ddp.text] says what each measures); ddp_section makes the section of them."""
    o = ctx.o
    dbs = {"tiny_rave": ctx.audio_db("adb", 6, "--num_signal", 8192), "s5_maze": ctx.neural_db("ndb", 182, 512)}
    adb32 = ctx.audio_db("adb32", 6, "--num_signal", 32768)
    n = [0]

    def native(cfg, steps, nproc, *extra, out=None):
        n[0] += 1
        out = out or ctx.path(f"runs{n[0]}")
        return train(ctx, cfg, dbs.get(cfg, cfg), out, "--device", "cpu", "--threads", 1, "--max_steps", steps, *NO_VAL,
                     "--log_every", steps, "--workers", o.workers, *extra, nproc=nproc), out

    def summary(cfg, steps, nproc, *extra):
        argv, out = native(cfg, steps, nproc, *extra)
        ctx.run(argv)
        return run_summary(out)

    def pair(cfg, steps):
        # Two independent one-rank jobs at once: their summed examples/s is the most 2 ranks can
        # reach on this host, whatever the collectives cost (shared cores, memory bandwidth, turbo).
        (a1, o1), (a2, o2) = native(cfg, steps, 1), native(cfg, steps, 1)
        procs = [subprocess.Popen([str(x) for x in a], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for a in (a1, a2)]
        if any(p.wait() for p in procs):
            raise RuntimeError(f"ddp: two concurrent train --config {cfg} runs failed")
        s1, s2 = run_summary(o1), run_summary(o2)
        return {"eps": s1["eps"] + s2["eps"], "step_eps": s1["step_eps"] + s2["step_eps"]}

    raw = {row: collections.defaultdict(list) for row, _ in DDP_ROWS}
    for row, _ in DDP_ROWS:
        cfg = row.replace("_local", "")
        steps = o.rave_steps if cfg == "tiny_rave" else o.ssm_steps
        extra = ["--train.distributed.batch_norm", "local"] if row.endswith("_local") else []
        r = raw[row]
        for _ in range(o.reps):
            r["one"].append(summary(cfg, steps, 1))
            r["two"].append(summary(cfg, steps, 2, *extra))
            r["pas"].append(summary(cfg, steps, 2, *extra, "--train.distributed.wait", "passive"))
            r["ring"].append(summary(cfg, steps, 2, *extra, "--train.distributed.small_all_reduce_kib", 0))
            r["loop"].append(summary(cfg, steps, 2, *extra, "--train.distributed.gloo_loop", "normal"))
            if not extra:
                r["ind"].append(pair(cfg, steps))
        py = [ctx.a.rave_python, os.path.join(benchlib.HERE, "ddp_bench.py"), "--model", cfg, "--steps", o.py_steps,
              "--warmup", 3, "--threads", 1]
        for _ in range(o.reps):
            r["py1"] += ctx.jsonl(py + ["--world", 1])
            r["py2"] += ctx.jsonl(py + ["--world", 2] + (["--sync_bn", 0] if extra else []))
            if not extra:  # the same 2 ranks without DDP, meeting once per step: what lock-stepping costs
                r["lockstep"] += ctx.jsonl(py + ["--world", 2, "--lockstep_only", 1])
    raw["s5_maze_local"]["ind"] = raw["s5_maze"]["ind"]
    raw = {row: dict(v) for row, v in raw.items()}
    # Bucket caps (first_bucket_mb / bucket_mb) on tiny_rave, 2 ranks, alternating.
    raw["buckets"] = {caps.replace(" ", "_"): [] for caps in BUCKETS}
    for _ in range(o.reps):
        for caps in BUCKETS:
            first, rest = caps.split()
            raw["buckets"][caps.replace(" ", "_")].append(summary("tiny_rave", o.rave_steps, 2, "--train.distributed."
                                                                  "first_bucket_mb", first, "--train.distributed.bucket_mb", rest))
    # Where a 2-rank step's time goes, tiny_rave: rank 0's trace of steps 31-50 (60-step runs).
    for arm in ("one", "passive", "active"):
        argv, _ = native("tiny_rave", 60, 1 if arm == "one" else 2, *([] if arm == "one" else [
            "--train.distributed.wait", arm]), "--enable_profiling", "--profile_steps", 20, "--profiling.skip_first",
            30, "--profiling.warmup", 1, out=ctx.path("ops", arm))
        ctx.run(argv)
    # Overlap: RAVE v2 (many 25 MiB buckets) on 2 ranks, steps 3-4 traced, without the crop (at full
    # size it leaves nothing of 32768 samples; the gradients' buckets are the same).
    dbs["v2"] = adb32
    argv, _ = native("v2", 5, 2, "--batch", 1, "--n_signal", 32768, "--train.valid_signal_crop", "false",
                     "--enable_profiling", "--profile_steps", 2, "--profiling.skip_first", 2, "--profiling.warmup", 1,
                     out=ctx.path("v2"))
    ctx.run(argv)
    return ddp_section(ctx, raw)


def ddp_section(ctx, raw):
    o = ctx.o
    py_rave = raw["tiny_rave"]["py1"][0]
    b = benchlib.Blocks(S["ddp"]["text"]).say("hosts", nproc=os.cpu_count())
    b.say("setup", o=o, torch=py_rave["torch"].split("+")[0], rave=py_rave["sizes"]["rave"].split()[-1],
          lightning=py_rave["sizes"]["pytorch_lightning"])
    rows, derived, targets, native_ratio = [], {}, [], {}
    for row, name in DDP_ROWS:
        r = raw[row]
        one, two = r["one"], r["two"]
        p1, p2 = med(r["py1"], "examples_per_second"), med(r["py2"], "examples_per_second")
        s1, s2 = med(one, "step_eps"), med(two, "step_eps")
        (job, lo, hi, job_runs), step = paired(two, one, "eps"), paired(two, one, "step_eps")[0]
        native_ratio[row] = (step, p2 / p1, r["py1"])
        ji, si = paired(r["ind"], one, "eps")[0], paired(r["ind"], one, "step_eps")[0]
        derived[row] = {"two_over_one_job": job, "two_over_one_job_runs": job_runs, "two_over_one_step": step,
                        "host_ceiling_job": ji, "native_step_over_python_2_ranks": s2 / p2}
        arm = lambda k: f"{med(r[k], 'eps'):.0f} ex/s, {paired(r[k], one, 'eps')[0]:.2f}×"  # noqa: E731
        rows.append([name, f"{med(one, 'eps'):.0f} ({s1:.0f}) ex/s", f"{med(two, 'eps'):.0f} ({s2:.0f}) ex/s",
                     f"**{job:.2f}×** ({step:.2f}×)", f"{lo:.2f}–{hi:.2f}×", f"{ji:.2f}× ({si:.2f}×)", arm("pas"),
                     arm("ring"), arm("loop"), f"{100 * med(two, 'comm_wait_share'):.1f} % of step time (collectives "
                     f"running: {100 * med(two, 'comm_busy_share'):.1f} %)", f"{p1:.0f} ex/s", f"{p2:.0f} ex/s",
                     f"{p2 / p1:.2f}×", f"**{s2 / p2:.2f}×**"])
        targets.append(benchlib.target(b.line("target_ratio", name=name), "≥ 1.8×", ">=", 1.8, job_runs, value=job, fmt="{:.2f}×", over="paired runs",
                                       note=f"host ceiling {ji:.2f}×"))
        # Python's 2-rank runs are not paired with the native ones: the ratio of medians, n = 1.
        targets.append(benchlib.target(b.line("target_python", name=name), "≥ 1.0×", ">=", 1.0, [s2 / p2], fmt="{:.2f}×", over="ratios of medians"))
    b.table("columns", rows).heading("Lock-step alone (Python)").say("lockstep")
    lrows = []
    for row in ("tiny_rave", "s5_maze"):
        step, py_ratio, py1_runs = native_ratio[row]
        lock = [{"eps": x["examples_per_second"]} for x in raw[row]["lockstep"]]
        plain = [{"eps": x["plain_steps_per_second"] * x["batch_per_rank"]} for x in py1_runs]
        mid, lo, hi, _ = paired(lock, plain, "eps")
        lrows.append([row, f"{med(plain, 'eps'):.0f} ex/s", f"{med(lock, 'eps'):.0f} ex/s",
                      f"**{mid:.2f}×** ({lo:.2f}–{hi:.2f}×)", f"{py_ratio:.2f}×", f"{step:.2f}×"])
    b.table("lockstep_columns", lrows).heading("Where a 2-rank step's time goes (tiny_rave)").say("trace")
    orows, base, raw["op_profile"] = [], None, {}
    for arm, label in (("one", "1 process"), ("passive", "2 ranks, passive waits"), ("active", "2 ranks, active waits")):
        paths = [p for p in sorted(glob.glob(ctx.path("ops", arm, "*", "profiler_traces", "*.pt.trace.json")))
                 if json.load(open(p)).get("distributedInfo", {}).get("rank", 0) == 0]
        if not paths:
            continue
        step, opt, wait, conv, stft = op_profile(paths[0])
        raw["op_profile"][arm] = {"step_ms": step, "operators_ms": opt, "gradient_sync_wait_ms": wait,
                                  "convolution_us": conv, "stft_us": stft}
        base = base or (opt, conv, stft)
        x = lambda v, b: f"{v / b:.2f}×" if b else "—"  # noqa: E731
        orows.append([label, f"{step:.1f} ms", f"{opt:.1f} ms ({x(opt, base[0])})", f"{wait:.1f} ms",
                      f"{conv:.0f} µs ({x(conv, base[1])}), {stft:.0f} µs ({x(stft, base[2])})"])
    b.table("trace_columns", orows).heading("Gradient bucket caps, tiny_rave, 2 ranks").say("buckets", o=o)
    b.table("bucket_columns", [[caps.replace("_", " / "), f"{med(runs, 'eps'):.0f}", f"{med(runs, 'collectives') / o.rave_steps:.1f}",
              f"{100 * med(runs, 'comm_wait_share'):.1f} %"] for caps, runs in raw["buckets"].items()])
    b.heading("Overlap: all-reduce starts while backward is still running").say("overlap")
    vrows, raw["overlap"] = [], []
    for path in sorted(glob.glob(ctx.path("v2", "*", "profiler_traces", "*.pt.trace.json"))):
        t = json.load(open(path))
        ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
        for s in sorted((e for e in ev if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"]):
            inside = lambda e: s["ts"] <= e["ts"] <= s["ts"] + s["dur"]  # noqa: E731
            waits = [e["ts"] for e in ev if e["name"] == "gradient_sync_wait" and inside(e)]
            ars = [e for e in ev if e["name"] in ("gloo:all_reduce", "gloo:all_gather") and inside(e)
                   and e["args"].get("In msg nelems", 0) > 1]
            if not waits or not ars:
                continue
            w = min(waits)
            before, busy = sum(1 for e in ars if e["ts"] < w), sum(e["dur"] for e in ars)
            busy_before = sum(max(0.0, min(e["ts"] + e["dur"], w) - e["ts"]) for e in ars)
            rank, step_no = t["distributedInfo"]["rank"], s["name"].split("#")[1]
            raw["overlap"].append({"rank": rank, "step": step_no, "all_reduces": len(ars), "started_before": before,
                                   "busy_before_pct": 100 * busy_before / busy})
            vrows.append([rank, step_no, len(ars), f"**{before}**", f"{100 * busy_before / busy:.0f} %"])
    b.table("overlap_columns", vrows)
    return dict(blocks=b, raw=raw, derived=derived, targets=targets)

