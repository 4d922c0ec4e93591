#!/usr/bin/python3
"""The figures of benchmarks/ddp.sh (standard library only).

  summarize_ddp.py run_summary RUN_OUT     one train run's training_summary.json -> a JSON line
  summarize_ddp.py pair A B                two concurrent 1-rank runs' lines -> their sum
  summarize_ddp.py report --results DIR …  every run (DIR/ROW.ARM, JSON lines) and the traces ->
                                           benchmarks/results/ddp.json
"""
import collections
import glob
import json
import os
import statistics
import sys

import benchlib

ROWS = (("tiny_rave", "tiny_rave"), ("s5_maze", "s5_maze (BatchNorm sync)"),
        ("s5_maze_local", "s5_maze (BatchNorm local)"))
ARMS = ("one", "two", "pas", "ind", "ring", "loop", "py1", "py2")


def run_summary(out):
    s, eps = benchlib.job_examples_per_second(out)
    d = s.get("distributed", {})
    per_rank = d.get("per_rank", [])
    step_eps = sum(r["step_examples_per_second"] for r in per_rank) if per_rank else s["step_examples_per_second"]
    return {"eps": eps, "step_eps": step_eps, "comm_wait_share": d.get("comm_wait_share", 0.0),
            "collectives": per_rank[0]["collectives"] if per_rank else 0,
            "comm_busy_share": max((r["comm_busy_share"] for r in per_rank), default=0.0)}


def pair(a_path, b_path):
    a, b = benchlib.last_json_line(a_path), benchlib.last_json_line(b_path)
    return {"eps": a["eps"] + b["eps"], "step_eps": a["step_eps"] + b["step_eps"]}


def med(rs, k):
    return statistics.median(r[k] for r in rs)


def paired(arm, base, k):
    """The median over reps of run r's figure over run r's base figure, and their range."""
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
    per_step = []
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        opt = sum(self_time[id(e)] for e in ops if lo <= e["ts"] < hi)
        wait = sum(e["dur"] for e in ev if e.get("ph") == "X" and e["name"] == "gradient_sync_wait" and lo <= e["ts"] < hi)
        per_step.append((s["dur"], opt, wait))
    call = lambda name: statistics.mean(e["dur"] for e in ops if e["name"] == name)  # noqa: E731
    m = lambda k: statistics.median(p[k] for p in per_step) / 1000  # noqa: E731
    return m(0), m(1), m(2), call("aten::convolution"), call("aten::stft")


def report(a):
    def runs(name):
        path = os.path.join(a.results, name)
        return benchlib.read_jsonl(path) if os.path.exists(path) else []

    raw = {row: {arm: runs(f"{row}.{arm}") for arm in ARMS} for row, _ in ROWS}
    for row in ("tiny_rave", "s5_maze"):
        raw[row]["lockstep"] = runs(f"{row}.lockstep")
    py_rave = raw["tiny_rave"]["py1"][0]
    torch_version = py_rave["torch"].split("+")[0]
    rave_version = py_rave["sizes"]["rave"].split()[-1]
    pl_version = py_rave["sizes"]["pytorch_lightning"]
    host = f"this {os.cpu_count()}-core machine"
    b = benchlib.Blocks()
    b.text(f"2 ranks vs 1 on {host}. Ratios are what to compare across hosts; absolute figures differ by host.")
    b.text(f"`train --nproc_per_node 2` vs one process, 1 intra-op thread per rank and `--workers {a.workers}` (loading "
           "on the training thread: one core per rank), the config's batch per rank (so 2 ranks train twice the "
           f"examples per step), Gloo over loopback; job examples/s over the training loop, median of {a.reps} "
           f"alternating runs ({a.rave_steps} steps tiny_rave, {a.ssm_steps} steps s5_maze); a 2/1 ratio is the median "
           f"of the {a.reps} ratios of runs made one after the other, the range theirs. Native: the build against torch "
           f"{torch_version}'s LibTorch (`build-cuda/`, on the CPU). Python: `benchmarks/ddp_bench.py` on that same "
           f"torch (`DistributedDataParallel`, Gloo, same model and sizes, {a.py_steps} timed steps after 3 warm-up "
           f"steps, synthetic input, no loader; median of {a.reps} runs): tiny_rave is the real RAVE (acids-rave "
           f"{rave_version}) built from its own v2.gin with the config's sizes bound, stepped by its own "
           f"`training_step`, callbacks, optimizers and LR scheduler, wrapped as PyTorch Lightning {pl_version}'s "
           "`strategy=\"ddp\"` wraps it; s5_maze is the SSM reference `tests/oracle/s5_maze.py` under "
           "`DistributedDataParallel` with DDP's defaults. What each column measures: docs/perf/ddp.md.")
    rows, derived, targets, native_ratio = [], {}, [], {}
    for row, name in ROWS:
        r = raw[row]
        o, t, i, q, g, n = r["one"], r["two"], r["ind"], r["pas"], r["ring"], r["loop"]
        p1, p2 = med(r["py1"], "examples_per_second"), med(r["py2"], "examples_per_second")
        e1, e2 = med(o, "eps"), med(t, "eps")
        s1, s2 = med(o, "step_eps"), med(t, "step_eps")
        (job, lo, hi, job_runs), (step, _, _, _) = paired(t, o, "eps"), paired(t, o, "step_eps")
        native_ratio[row] = (job, step, p2 / p1, r["py1"])
        ji, si = paired(i, o, "eps")[0], paired(i, o, "step_eps")[0]
        derived[row] = {"two_over_one_job": job, "two_over_one_job_runs": job_runs, "two_over_one_step": step,
                        "host_ceiling_job": ji, "native_step_over_python_2_ranks": s2 / p2}
        rows.append([name, f"{e1:.0f} ({s1:.0f}) ex/s", f"{e2:.0f} ({s2:.0f}) ex/s", f"**{job:.2f}×** ({step:.2f}×)",
                     f"{lo:.2f}–{hi:.2f}×", f"{ji:.2f}× ({si:.2f}×)", f"{med(q, 'eps'):.0f} ex/s, {paired(q, o, 'eps')[0]:.2f}×",
                     f"{med(g, 'eps'):.0f} ex/s, {paired(g, o, 'eps')[0]:.2f}×",
                     f"{med(n, 'eps'):.0f} ex/s, {paired(n, o, 'eps')[0]:.2f}×",
                     f"{100 * med(t, 'comm_wait_share'):.1f} % of step time (collectives running: "
                     f"{100 * med(t, 'comm_busy_share'):.1f} %)", f"{p1:.0f} ex/s", f"{p2:.0f} ex/s", f"{p2 / p1:.2f}×",
                     f"**{s2 / p2:.2f}×**"])
        targets.append(benchlib.target(f"Data parallel, {name}: 2 ranks / 1 rank, 1 thread each (job examples/s)",
                                       "≥ 1.8×", ">=", 1.8, job_runs, value=job, fmt="{:.2f}×", over="paired runs",
                                       note=f"host ceiling {ji:.2f}×"))
        # Python's 2-rank runs are not paired with the native ones: the ratio of medians, n = 1.
        targets.append(benchlib.target(f"Data parallel, {name}: native / Python DDP, 2 ranks (step examples/s)",
                                       "≥ 1.0×", ">=", 1.0, [s2 / p2], fmt="{:.2f}×", over="ratios of medians"))
    b.table(["model", "native 1 rank: job (step)", "native 2 ranks: job (step)", "native 2/1: job (step)",
             "2/1 job, paired runs' range", "host ceiling: 2 independent 1-rank jobs / 1",
             "2 ranks, passive waits: job, 2/1", "2 ranks, every all-reduce on Gloo's ring: job, 2/1",
             "2 ranks, Gloo's event loop under the default policy: job, 2/1", "exposed comm (2 ranks)",
             "Python DDP 1 rank", "Python DDP 2 ranks", "Python 2/1", "native step/Python (2 ranks)"], rows)
    b.heading("Lock-step alone (Python)")
    b.text("The Python side's 2 ranks without DDP (`ddp_bench.py --lockstep_only 1`): each rank trains its own "
           "model, and the ranks meet only in a 1-element Gloo all-reduce after every step. Against the same step in "
           "one process without DDP (the 1-rank run's `plain_steps_per_second`), run by run; what remains below the "
           "host ceiling is what keeping 2 ranks in step costs on this host, before any gradient is sent.")
    lrows = []
    for row in ("tiny_rave", "s5_maze"):
        if not raw[row]["lockstep"]:
            continue
        lock = [{"eps": x["examples_per_second"]} for x in raw[row]["lockstep"]]
        job, step, py_ratio, py1_runs = native_ratio[row]
        plain = [{"eps": x["plain_steps_per_second"] * x["batch_per_rank"]} for x in py1_runs]
        mid, lo, hi, _ = paired(lock, plain, "eps")
        lrows.append([row, f"{med(plain, 'eps'):.0f} ex/s", f"{med(lock, 'eps'):.0f} ex/s",
                      f"**{mid:.2f}×** ({lo:.2f}–{hi:.2f}×)", f"{py_ratio:.2f}×", f"{step:.2f}×"])
    b.table(["model", "Python 1 rank, no DDP", "Python 2 ranks, lock-step only", "lock-step only 2/1 (paired runs' range)",
             "Python DDP 2/1 (step)", "native 2/1 (step)"], lrows)
    b.heading("Where a 2-rank step's time goes (tiny_rave)")
    b.text("Rank 0's trace of steps 31–50 of a 60-step run (`--enable_profiling --profile_steps 20 "
           "--profiling.skip_first 30`), one process against 2 ranks with each wait policy; per step, medians over the "
           "20 steps. Operators: the self time of every operator on the training thread (what the CPU computes; a "
           "wait inside a collective is not an operator).")
    orows, base, raw["op_profile"] = [], None, {}
    for arm, label in (("one", "1 process"), ("passive", "2 ranks, passive waits"), ("active", "2 ranks, active waits")):
        found = sorted(glob.glob(os.path.join(a.ops, arm, "*", "profiler_traces", "*.pt.trace.json")))
        paths = []
        for p in found:
            with open(p) as f:
                if json.load(f).get("distributedInfo", {}).get("rank", 0) == 0:
                    paths.append(p)
        if not paths:
            continue
        step, opt, wait, conv, stft = op_profile(paths[0])
        raw["op_profile"][arm] = {"step_ms": step, "operators_ms": opt, "gradient_sync_wait_ms": wait,
                                  "convolution_us": conv, "stft_us": stft}
        base = base or (opt, conv, stft)
        orows.append([label, f"{step:.1f} ms", f"{opt:.1f} ms ({opt / base[0]:.2f}×)", f"{wait:.1f} ms",
                      f"{conv:.0f} µs ({conv / base[1]:.2f}×), {stft:.0f} µs ({stft / base[2]:.2f}×)"])
    b.table(["run", "step", "operators", "gradient_sync_wait", "per call: convolution, stft"], orows)
    b.heading("Gradient bucket caps, tiny_rave, 2 ranks")
    b.text(f"`train.distributed.first_bucket_mb` / `bucket_mb` (DDP's defaults 1 / 25 MiB); job examples/s, median of "
           f"{a.reps} alternating runs of {a.rave_steps} steps; collectives per step include the spectral denominators' "
           "all-reduce (the stop flag rides in the last bucket).")
    brows, raw["buckets"] = [], {}
    for caps in a.buckets.split():
        runs_ = runs(f"bucket.{caps}")
        raw["buckets"][caps] = runs_
        brows.append([caps.replace("_", " / "), f"{med(runs_, 'eps'):.0f}",
                      f"{med(runs_, 'collectives') / int(a.rave_steps):.1f}",
                      f"{100 * med(runs_, 'comm_wait_share'):.1f} %"])
    b.table(["first / other bucket cap (MiB)", "job ex/s", "collectives per step", "exposed comm"], brows)
    b.heading("Overlap: all-reduce starts while backward is still running")
    b.text("RAVE v2 (`--config v2 --batch 1 --n_signal 32768 --train.valid_signal_crop false`, 2 ranks, steps 3–4 "
           "traced). Per traced step: the gradient buckets' `gloo:all_reduce` spans (`gloo:all_gather` for the 1 MiB "
           "first bucket, a small all-reduce), how many started before `gradient_sync_wait` (the end of autograd's "
           "backward, where the trainer starts waiting), and how much of their running time lay before it.")
    vrows, raw["overlap"] = [], []
    for path in sorted(glob.glob(os.path.join(a.v2, "*", "profiler_traces", "*.pt.trace.json"))):
        with open(path) as f:
            t = json.load(f)
        rank = t["distributedInfo"]["rank"]
        ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
        for s in sorted((e for e in ev if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"]):
            lo, hi = s["ts"], s["ts"] + s["dur"]
            waits = [e for e in ev if e["name"] == "gradient_sync_wait" and lo <= e["ts"] <= hi]
            ars = [e for e in ev if e["name"] in ("gloo:all_reduce", "gloo:all_gather") and lo <= e["ts"] <= hi
                   and e["args"].get("In msg nelems", 0) > 1]
            if not waits or not ars:
                continue
            w = min(e["ts"] for e in waits)
            before = sum(1 for e in ars if e["ts"] < w)
            busy = sum(e["dur"] for e in ars)
            busy_before = sum(max(0.0, min(e["ts"] + e["dur"], w) - e["ts"]) for e in ars)
            step_no = s["name"].split("#")[1]
            raw["overlap"].append({"rank": rank, "step": step_no, "all_reduces": len(ars), "started_before": before,
                                   "busy_before_pct": 100 * busy_before / busy})
            vrows.append([rank, step_no, len(ars), f"**{before}**", f"{100 * busy_before / busy:.0f} %"])
    b.table(["rank", "step", "all-reduces", "started during backward", "all-reduce time before backward ended"], vrows)
    benchlib.write_summary(a, "ddp", "Data-parallel training", b,
                           env=benchlib.environment(a.load_before, git=a.commit),
                           raw=raw, derived=derived, targets=targets, analysis="docs/perf/ddp.md",
                           commands=["build-cuda/bin/train [--nproc_per_node 2] --device cpu --config CONFIG "
                                     f"--threads 1 --workers {a.workers} ...",
                                     "benchmarks/ddp_bench.py --model CONFIG --world {1,2} --threads 1 ..."])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "run_summary":
        print(json.dumps(run_summary(sys.argv[2])))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "pair":
        print(json.dumps(pair(sys.argv[2], sys.argv[3])))
        return
    ap = benchlib.summary_parser(__doc__, "results v2 ops commit workers buckets reps:int rave_steps:int "
                                 "ssm_steps:int py_steps:int")
    ap.add_argument("what", choices=["report"])
    report(ap.parse_args())


if __name__ == "__main__":
    main()
