// profile-report's judgement of a loaded run (run_files.h): memory growth with the leak verdict,
// each phase's share of the step and the bottleneck, and the findings carrying the profiling
// guides' advice. No I/O: each function reads and completes a RunAnalysis, in this order.
#pragma once

#include "profiling/report/run_report.h"
#include "profiling/report/series_stats.h"

namespace rt::report {

// One MemoryTrend per memory series except the peaks (rising by construction). RSS series must
// grow by at least 10% of their level (malloc's free lists and library caches move RSS in steps
// of MiB); with RSS split, file-backed pages are never a leak and total RSS is judged through its
// anonymous part.
void judge_memory(RunAnalysis& a, const LeakOptions& leak);

// Fills each phase's share of the step and names the largest one a.bottleneck ("" without a
// breakdown).
void find_bottleneck(RunAnalysis& a);

// The findings, given the phases, step statistics, memory trends and operators already filled
// in.
void add_findings(RunAnalysis& a);

}  // namespace rt::report
