#include "profiling/report/series_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rt::report {

double percentile_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return 0.0;
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

Distribution describe(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.n = static_cast<int64_t>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.median = percentile_sorted(values, 0.5);
  d.p90 = percentile_sorted(values, 0.9);
  d.min = values.front();
  d.max = values.back();
  return d;
}

int64_t warmup_count(int64_t n) {
  if (n < 5) return 0;
  return std::max<int64_t>(1, static_cast<int64_t>(std::llround(0.1 * static_cast<double>(n))));
}

double slope(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 2) return 0.0;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += y[i];
  mx /= static_cast<double>(n);
  my /= static_cast<double>(n);
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  return sxx > 0 ? sxy / sxx : 0.0;
}

MemoryTrend analyse_memory_trend(const std::string& name, const std::vector<double>& steps,
                                 const std::vector<double>& values, const LeakOptions& o) {
  MemoryTrend t;
  t.name = name;
  t.samples = static_cast<int64_t>(values.size());
  if (values.empty()) return t;
  t.first = values.front();
  t.last = values.back();
  t.peak = *std::max_element(values.begin(), values.end());
  t.enough_samples = t.samples >= std::max<int64_t>(o.min_samples, 4);
  if (!t.enough_samples) return t;

  const size_t half = values.size() / 2;
  const std::vector<double> xs(steps.begin() + static_cast<std::ptrdiff_t>(half), steps.end());
  const std::vector<double> ys(values.begin() + static_cast<std::ptrdiff_t>(half), values.end());
  t.slope_per_step = slope(xs, ys);
  t.last_half_growth = t.slope_per_step * (xs.back() - xs.front());
  int64_t rising = 0, changes = 0;
  for (size_t i = 1; i < ys.size(); ++i) {
    if (ys[i] != ys[i - 1]) ++changes;
    if (ys[i] > ys[i - 1]) ++rising;
  }
  t.rising_fraction = changes > 0 ? static_cast<double>(rising) / static_cast<double>(changes) : 0.0;
  const double mean = std::accumulate(ys.begin(), ys.end(), 0.0) / static_cast<double>(ys.size());
  const double threshold = std::max(o.min_absolute_growth, o.min_relative_growth * std::abs(mean));
  // The quarters share their middle sample, so that each has at least two points.
  const size_t mid = (ys.size() - 1) / 2;
  bool sustained = true;
  for (int q = 0; q < 2; ++q) {
    const size_t begin = q == 0 ? 0 : mid, end = q == 0 ? mid + 1 : ys.size();
    const std::vector<double> qx(xs.begin() + static_cast<std::ptrdiff_t>(begin),
                                 xs.begin() + static_cast<std::ptrdiff_t>(end));
    const std::vector<double> qy(ys.begin() + static_cast<std::ptrdiff_t>(begin),
                                 ys.begin() + static_cast<std::ptrdiff_t>(end));
    t.quarter_growth[q] = slope(qx, qy) * (qx.back() - qx.front());
    sustained = sustained && t.quarter_growth[q] > o.min_sustained_share * threshold;
  }
  t.leak_suspected =
      t.last_half_growth > threshold && t.rising_fraction >= o.min_rising_fraction && sustained;
  return t;
}

}  // namespace rt::report
