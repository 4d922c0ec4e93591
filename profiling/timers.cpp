#include "profiling/timers.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "util/clock.h"
#include "util/error.h"

namespace rt::prof {
namespace {

constexpr const char* kBuiltinNames[] = {
    timer_names::kDataBatchProduction, timer_names::kForward,
    timer_names::kLossFnComputation,   timer_names::kBackward,
    timer_names::kOptimizerStep,       timer_names::kMakeStepTotal,
    timer_names::kTrainingStep,        timer_names::kValidation,
    timer_names::kCheckpoint,
};
static_assert(sizeof(kBuiltinNames) / sizeof(kBuiltinNames[0]) == kCheckpointTimer.index + 1,
              "every built-in timer id needs its name, in id order");

std::string format_double(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, value);
  return buf;
}

}  // namespace

int64_t steady_clock_ns() { return rt::steady_ns(); }

TimerRegistry::TimerRegistry() : slots_(new Slot[kMaxTimers]) {
  for (const char* name : kBuiltinNames) id(name);
}

TimerId TimerRegistry::id(std::string_view name) {
  if (name.empty()) throw Error("timer name must not be empty");
  std::lock_guard<std::mutex> lock(names_mutex_);
  auto it = ids_.find(std::string(name));
  if (it != ids_.end()) return TimerId{it->second};
  const uint32_t index = size_.load(std::memory_order_relaxed);
  if (index >= kMaxTimers) {
    throw Error("too many timer names (limit " + std::to_string(kMaxTimers) + ") registering '" +
                std::string(name) + "'");
  }
  names_.push_back(std::make_unique<std::string>(name));
  ids_.emplace(std::string(name), index);
  size_.store(index + 1, std::memory_order_release);
  return TimerId{index};
}

const std::string& TimerRegistry::name(TimerId id) const {
  std::lock_guard<std::mutex> lock(names_mutex_);
  if (!id.valid() || id.index >= names_.size()) {
    throw Error("unknown timer id " + std::to_string(id.index));
  }
  return *names_[id.index];
}

void TimerRegistry::set_synchronize(std::function<void()> sync) {
  if (sync) {
    std::atomic_store(&sync_, std::make_shared<const std::function<void()>>(std::move(sync)));
    has_sync_.store(true, std::memory_order_release);
  } else {
    has_sync_.store(false, std::memory_order_release);
    std::atomic_store(&sync_, std::shared_ptr<const std::function<void()>>());
  }
}

void TimerRegistry::run_synchronize() const {
  auto sync = std::atomic_load(&sync_);
  if (sync) (*sync)();
}

void TimerRegistry::end_timer(TimerId id, TimerToken token) {
  if (!token.valid || !id.valid() || id.index >= size_.load(std::memory_order_acquire)) return;
  const int64_t elapsed = now_ns() - token.start_ns;
  Slot& slot = slots_[id.index];
  slot.total_ns.fetch_add(elapsed, std::memory_order_relaxed);
  slot.count.fetch_add(1, std::memory_order_relaxed);
  slot.last_ns.store(elapsed, std::memory_order_relaxed);
}

void TimerRegistry::record(TimerId id, double seconds) {
  if (!id.valid() || id.index >= size_.load(std::memory_order_acquire)) {
    throw Error("unknown timer id " + std::to_string(id.index));
  }
  const auto ns = static_cast<int64_t>(std::llround(seconds * 1e9));
  Slot& slot = slots_[id.index];
  slot.total_ns.fetch_add(ns, std::memory_order_relaxed);
  slot.count.fetch_add(1, std::memory_order_relaxed);
  slot.last_ns.store(ns, std::memory_order_relaxed);
}

double TimerRegistry::last_seconds(TimerId id) const {
  if (!id.valid() || id.index >= size_.load(std::memory_order_acquire)) return 0.0;
  return static_cast<double>(slots_[id.index].last_ns.load(std::memory_order_relaxed)) * 1e-9;
}

TimerStats TimerRegistry::stats(TimerId id) const {
  TimerStats s;
  if (!id.valid() || id.index >= size_.load(std::memory_order_acquire)) return s;
  const Slot& slot = slots_[id.index];
  s.count = slot.count.load(std::memory_order_relaxed);
  s.total_time = static_cast<double>(slot.total_ns.load(std::memory_order_relaxed)) * 1e-9;
  s.avg_time = s.count > 0 ? s.total_time / static_cast<double>(s.count) : 0.0;
  return s;
}

std::vector<std::pair<std::string, TimerStats>> TimerRegistry::ordered_stats() const {
  std::vector<std::pair<std::string, TimerStats>> out;
  std::lock_guard<std::mutex> lock(names_mutex_);
  for (uint32_t i = 0; i < names_.size(); ++i) {
    TimerStats s = stats(TimerId{i});
    if (s.count > 0) out.emplace_back(*names_[i], s);
  }
  return out;
}

std::map<std::string, TimerStats> TimerRegistry::get_summary() const {
  std::map<std::string, TimerStats> out;
  for (auto& [name, s] : ordered_stats()) out.emplace(name, s);
  return out;
}

void TimerRegistry::reset() {
  const uint32_t n = size_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) {
    slots_[i].total_ns.store(0, std::memory_order_relaxed);
    slots_[i].count.store(0, std::memory_order_relaxed);
    slots_[i].last_ns.store(0, std::memory_order_relaxed);
  }
}

std::string TimerRegistry::format_metrics(int64_t step) const {
  // Layout of foundational_ssm's log_profiling_metrics (SSM guide): 4 decimals avg, 2 total.
  std::string out = "--- Profiling Metrics (Step " + std::to_string(step) + ") ---\n";
  for (const auto& [name, s] : ordered_stats()) {
    out += name + ": avg=" + format_double("%.4f", s.avg_time) +
           "s, total=" + format_double("%.2f", s.total_time) + "s, count=" + std::to_string(s.count) + "\n";
  }
  return out;
}

void TimerRegistry::log_metrics(ScalarSink& sink, int64_t step) const {
  for (const auto& [name, s] : ordered_stats()) {
    sink.add_scalar("profiling/" + name + "_avg_time", s.avg_time, step);
    sink.add_scalar("profiling/" + name + "_total_time", s.total_time, step);
    sink.add_scalar("profiling/" + name + "_count", static_cast<double>(s.count), step);
  }
}

TimerRegistry& timers() {
  static TimerRegistry registry;
  return registry;
}

}  // namespace rt::prof
