#!/usr/bin/python3
"""profiling_overhead.sh's runs -> benchmarks/results/profiling.json: steps/s of every A/B pair
(WORK/off.CONFIG.THREADS, WORK/on.CONFIG.THREADS, one mean per run), their overheads, and the
share of perf samples in profiling code (WORK/perf.CONFIG.txt: `perf report --stdio`)."""
import os
import re
import statistics

import benchlib

# The symbols that count as profiling code: our timers, phase scopes, memory reporter and
# counting allocator, profile writers and their JSON, and c10's memory hooks.
PROFILING_SYMBOLS = (r"rt::prof::|rt::PhaseScope|counting_delete|counting_raw_delete|CountingCpuAllocator|record_cpu|"
                     r"ProfiledCPUMemoryReporter|reportMemoryUsage|memoryProfilingEnabled|ThreadLocalDebugInfo|"
                     r"nlohmann|_Map_base<void\*, std::pair<void\* const, unsigned long>|"
                     r"_Hashtable<void\*, std::pair<void\* const, unsigned long>")


def perf_share(path):
    """(samples as perf prints them, total % in profiling symbols, [(pct, symbol)] best first)
    from a `perf report --no-children --sort symbol --stdio` text (not Markdown)."""
    with open(path, errors="replace") as f:
        text = f.read()
    m = re.search(r"^# Samples: ([0-9.]+)([KM]?)", text, re.M)
    samples = m.group(1) + m.group(2) if m else "?"
    rx = re.compile(PROFILING_SYMBOLS)
    total, top = 0.0, []
    for line in text.splitlines():
        mm = re.match(r"\s+([0-9.]+)%\s+\[\.\]\s+(.*\S)", line)
        if mm and rx.search(mm.group(2)):
            pct = float(mm.group(1))
            total += pct
            top.append((pct, mm.group(2)[:60].strip()))
    top.sort(reverse=True)
    return samples, total, top


def main():
    a = benchlib.summary_parser(__doc__, "work configs pairs:int steps:int every:int").parse_args()
    configs = a.configs.split()

    def numbers(name):
        with open(os.path.join(a.work, name)) as f:
            return [float(x) for x in f if x.strip()]

    b = benchlib.Blocks()
    b.text(f"{a.pairs} interleaved A/B pairs of {a.steps}-step runs, steps/s averaged over the intervals after the "
           f"first (log_every {a.every}).")
    raw, rows, derived, targets = {"pairs": {}, "perf": {}}, [], {}, []
    for cfg in configs:
        for threads in (1, 2):
            off, on = numbers(f"off.{cfg}.{threads}"), numbers(f"on.{cfg}.{threads}")
            pairs = [(x / y - 1.0) * 100.0 for x, y in zip(off, on)]  # step-time ratio on/off − 1
            raw["pairs"][f"{cfg}/{threads}"] = {"off_steps_per_second": off, "on_steps_per_second": on,
                                                "overhead_pct": pairs}
            derived[f"{cfg}/{threads}/overhead_pct"] = benchlib.summary(pairs)
            rows.append([cfg, threads, benchlib.spread(off, "{:.2f}"), benchlib.spread(on, "{:.2f}"),
                         f"{statistics.median(pairs):+.2f}% (pairs {min(pairs):+.1f}…{max(pairs):+.1f}%)"])
    b.table(["job", "threads", "off: steps/s (median, min–max)", "timing+memory: steps/s",
             "overhead (median of pairs)"], rows)
    b.text(f"Attribution by sampling (`perf record -F 4999` on one run with both flags, {a.steps} steps, whole process "
           "including start-up): share of CPU samples in profiling code — our timers, phase scopes, memory "
           "reporter and counting allocator, profile writers and their JSON, and c10's memory hooks (regex "
           f"`{PROFILING_SYMBOLS}`). Self time only, so the malloc/free behind a hook is not included.")
    prows = []
    for cfg in configs:
        report = os.path.join(a.work, f"perf.{cfg}.txt")
        failed = os.path.join(a.work, f"perf_failed.{cfg}")
        if os.path.exists(report):
            samples, total, top = perf_share(report)
            raw["perf"][cfg] = {"samples": samples, "profiling_pct": total, "symbols": top}
            names = "; ".join(f"{n} {p:.2f}%" for p, n in top[:3]) or "—"
            prows.append([cfg, 1, samples, f"**{total:.2f} %**", names])
            targets.append(benchlib.target(f"Timing + memory profiling overhead, {cfg} (share of CPU samples)",
                                           "≤ 1 %", "<=", 1.0, [total], fmt="{:.2f} %", over="perf runs"))
        elif os.path.exists(failed):
            with open(failed) as f:
                prows.append([cfg, 1, "—", f"perf record failed: {f.read().strip()}", ""])
    if prows:
        b.table(["job", "threads", "samples", "in profiling code", "top profiling symbols"], prows)
    else:
        b.text("(perf is not installed: `apt-get install linux-perf` to add this table.)")
    benchlib.write_summary(a, "profiling", "Timing + memory profiling overhead", b, raw=raw, derived=derived,
                           targets=targets,
                           commands=[f"build/bin/train --config CONFIG --max_steps {a.steps} --log_every {a.every} "
                                     "--threads T [--enable_timing_profiling --enable_memory_profiling]",
                                     "perf record -F 4999 -- build/bin/train ... --threads 1 "
                                     "--enable_timing_profiling --enable_memory_profiling"])


if __name__ == "__main__":
    main()
