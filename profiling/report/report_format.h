// Renderings of a RunAnalysis (run_report.h): the console report, its JSON form, and the
// side-by-side comparison of two runs with ratios (B / A).
#pragma once

#include <string>

#include "profiling/report/run_report.h"
#include "util/json.h"

namespace rt::report {

// The console report: Run, Throughput, Step time, Time per step by phase (with the bottleneck),
// Memory, Top operators, Findings (each with its advice), Files.
std::string format_report(const RunAnalysis& a);

// The same analysis as JSON. Top-level keys: run_dir, name, identity{...}, files[],
// step_time{source, warmup_steps, all, warmup, steady: {n, mean, median, p90, min, max}},
// throughput{...}, phases{source, step_seconds, bottleneck, items[{key,label,seconds,share}]},
// memory{samples, trends[...], peak_cpu_memory_percent, gpu{...}}, top_operators{cpu[], device[]},
// findings[{code, severity, message, advice}], warnings[].
Json to_json(const RunAnalysis& a);

// Side by side: one row per metric with A, B and B/A ("-" when either side lacks it).
std::string format_comparison(const RunAnalysis& a, const RunAnalysis& b);
// {"a": to_json(a), "b": to_json(b), "ratios": {metric: B/A, ...}}.
Json comparison_json(const RunAnalysis& a, const RunAnalysis& b);

// "12.3 ms", "1.23 s", "850 us".
std::string format_seconds(double seconds);
// "512 B", "12.0 KiB", "1.5 MiB", "2.00 GiB".
std::string format_bytes(double bytes);

}  // namespace rt::report
