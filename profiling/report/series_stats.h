// Small statistics over per-step series for profile-report: distributions of step times, the
// warm-up vs steady-state split, and the memory-growth (leak) detector. Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rt::report {

// Summary of a sample. All fields 0 when n == 0. Percentiles interpolate linearly between order
// statistics (numpy's default), so median of {1,2,3,4} is 2.5 and p90 of 1..10 is 9.1.
struct Distribution {
  int64_t n = 0;
  double mean = 0, median = 0, p90 = 0, min = 0, max = 0;
};
Distribution describe(std::vector<double> values);
// REQUIRES: values sorted ascending, q in [0, 1]. 0 for an empty vector.
double percentile_sorted(const std::vector<double>& values, double q);

// How many leading entries of a series of n per-step samples count as warm-up: the first 10%
// (at least 1), and none when n < 5 (too few to split).
int64_t warmup_count(int64_t n);

// Least-squares slope of y over x; 0 when fewer than 2 points or x is constant.
double slope(const std::vector<double>& x, const std::vector<double>& y);

// Memory-growth detector (JAX guide "Memory Leaks: memory usage increases over time").
// A leak is suspected when, over the last half of the samples, memory keeps rising: the
// least-squares growth across that half exceeds both `min_relative_growth` of the half's mean
// and `min_absolute_growth`, at least `min_rising_fraction` of the non-zero changes there
// are increases, and the growth continues: each quarter of the run (the last half's two
// halves) grows by at least `min_sustained_share` of those thresholds on its own. Growth
// confined to the first half (allocator warm-up, caches filling) is not a leak, and neither is
// one step up later (a training phase that brings new modules or optimizer state in: RAVE's
// discriminator at phase 2), after which memory stays level.
struct LeakOptions {
  int64_t min_samples = 8;
  double min_relative_growth = 0.05;
  double min_absolute_growth = 4.0 * 1024 * 1024;  // bytes
  double min_rising_fraction = 0.6;
  // A steady leak grows half its last-half growth in each quarter; noise allows less.
  double min_sustained_share = 0.25;
};

struct MemoryTrend {
  std::string name;  // e.g. "rss_bytes", "cpu bytes_in_use", "cuda:0 bytes_in_use"
  int64_t samples = 0;
  double first = 0, last = 0, peak = 0;
  double slope_per_step = 0;          // over the last half, value units per step
  double last_half_growth = 0;        // slope × the last half's step span
  double rising_fraction = 0;         // share of non-zero changes in the last half that are increases
  double quarter_growth[2] = {0, 0};  // least-squares growth of the last half's two halves
  bool enough_samples = false;
  bool leak_suspected = false;
  // Set by the run analysis: a file-backed series (RSS of memory-mapped files), which is never
  // a leak; `grew` keeps whether it met the growth criteria above.
  bool file_backed = false;
  bool grew = false;
};

// REQUIRES: steps.size() == values.size(), steps ascending.
MemoryTrend analyse_memory_trend(const std::string& name, const std::vector<double>& steps,
                                 const std::vector<double>& values, const LeakOptions& options = {});

}  // namespace rt::report
