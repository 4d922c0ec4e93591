#include "trainer/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "util/error.h"

namespace rt {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[64];
  if (s >= 86400) {
    std::snprintf(buf, sizeof buf, "%lldd %02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  } else if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  }
  return buf;
}

namespace {

std::vector<SchedulePhase> sorted(std::vector<SchedulePhase> phases) {
  if (phases.empty()) phases.push_back({0, "", 2});
  std::stable_sort(phases.begin(), phases.end(), [](const SchedulePhase& a, const SchedulePhase& b) {
    return a.first_step < b.first_step;
  });
  return phases;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

Progress::Progress(std::vector<SchedulePhase> phases, int64_t max_steps)
    : phases_(sorted(std::move(phases))), max_steps_(max_steps) {}

void Progress::interval(int64_t /*step*/, int64_t steps, double seconds) {
  if (steps <= 0 || seconds <= 0) return;
  const double r = static_cast<double>(steps) / seconds;
  rate_ = rate_ == 0.0 ? r : 0.7 * rate_ + 0.3 * r;
}

std::string Progress::phase_at(int64_t step) const {
  if (phases_.size() < 2) return "";
  std::string name = phases_.front().name;
  for (const auto& p : phases_) {
    if (step >= p.first_step) name = p.name;
  }
  return name;
}

std::string Progress::percent(int64_t step) const {
  if (max_steps_ <= 0) return "";
  const double pct = 100.0 * static_cast<double>(step) / static_cast<double>(max_steps_);
  char buf[32];
  std::snprintf(buf, sizeof buf, pct < 10 ? " (%.2f %%)" : " (%.1f %%)", pct);
  return buf;
}

std::string Progress::timing(int64_t step, double elapsed_seconds) const {
  std::string out = "elapsed " + format_duration(elapsed_seconds);
  if (rate_ > 0 && step < max_steps_) {
    out += " | ETA " + format_duration(static_cast<double>(max_steps_ - step) / rate_);
  }
  return out;
}

SmokeTest::SmokeTest(std::vector<SchedulePhase> phases, int64_t max_steps) : max_steps_(max_steps) {
  phases = sorted(std::move(phases));
  for (size_t i = 0; i < phases.size(); ++i) {
    if (phases[i].first_step >= max_steps) break;
    const int64_t next = i + 1 < phases.size() ? std::min(phases[i + 1].first_step, max_steps) : max_steps;
    Planned p;
    p.phase = phases[i];
    p.end_step = std::min(next, phases[i].first_step + 1 + std::max<int64_t>(1, phases[i].smoke_steps));
    p.last_step = next;
    plan_.push_back(p);
  }
  if (plan_.empty())
    throw Error("--smoke_test: train.max_steps = " + std::to_string(max_steps) + " leaves no step to run");
}

int64_t SmokeTest::first_step() const { return plan_.front().phase.first_step; }
int64_t SmokeTest::end_step() const { return plan_.back().end_step; }

int64_t SmokeTest::after_step(int64_t step, double seconds) {
  for (size_t i = 0; i < plan_.size(); ++i) {
    Planned& p = plan_[i];
    if (step < p.phase.first_step || step >= p.end_step) continue;
    if (step == p.phase.first_step) {
      p.warmup = seconds;
    } else {
      p.times.push_back(seconds);
    }
    if (step + 1 < p.end_step) return step + 1;
    return i + 1 < plan_.size() ? plan_[i + 1].phase.first_step : p.end_step;
  }
  return step + 1;
}

bool SmokeTest::starts_later_phase(int64_t step) const {
  for (size_t i = 1; i < plan_.size(); ++i) {
    if (plan_[i].phase.first_step == step) return true;
  }
  return false;
}

void SmokeTest::add_forecast(int64_t first_step, std::string text, bool fits) {
  for (Planned& p : plan_) {
    if (p.phase.first_step == first_step) p.forecast = std::move(text);
  }
  unfit_ = unfit_ || !fits;
}

std::string SmokeTest::report(const std::string& peak_memory) const {
  std::ostringstream out;
  out << "smoke test:\n";
  double total = 0.0;
  bool complete = true;
  for (const Planned& p : plan_) {
    const double t = median(p.times.empty() ? std::vector<double>{p.warmup} : p.times);
    const int64_t steps = p.last_step - p.phase.first_step;
    total += t * static_cast<double>(steps);
    complete = complete && !p.times.empty();
    char line[256];
    std::snprintf(line, sizeof line,
                  "  %-24s steps %lld..%lld: first %.3f s, then median %.3f s/step over %zu steps\n",
                  (p.phase.name.empty() ? std::string("training") : p.phase.name).c_str(),
                  static_cast<long long>(p.phase.first_step), static_cast<long long>(p.end_step - 1),
                  p.warmup, t, p.times.size());
    out << line << "  " << std::string(24, ' ') << " → " << steps
        << " steps of it: " << format_duration(t * steps) << "\n";
    if (!p.forecast.empty()) {
      std::istringstream lines(p.forecast);
      for (std::string l; std::getline(lines, l);) out << "  " << l << "\n";
    }
  }
  out << "  peak memory: " << peak_memory << "\n";
  out << "  the whole run (train.max_steps = " << max_steps_ << ") at these rates: " << format_duration(total)
      << (complete ? "" : " (from single steps: give the phases more steps for a steadier figure)")
      << " of steps, validation and checkpoints not counted\n";
  return out.str();
}

std::string Progress::line(int64_t step, int64_t max_steps, double loss,
                           const std::map<std::string, double>& means, double steps_per_second,
                           double elapsed_seconds) const {
  std::ostringstream line;
  line << "step " << step << "/" << max_steps << (elapsed_seconds < 0 ? "" : percent(step));
  if (const std::string phase = phase_at(step - 1); !phase.empty()) line << " | " << phase;
  line << " | loss " << std::setprecision(5) << loss << " |" << std::setprecision(4);
  for (const auto& [tag, mean] : means) {
    if (tag.rfind("train/", 0) != 0 || tag == "train/loss") line << " " << tag << "=" << mean;
  }
  line << " | " << std::setprecision(3) << steps_per_second << " steps/s";
  if (elapsed_seconds >= 0) line << " | " << timing(step, elapsed_seconds);
  return line.str();
}

}  // namespace rt
