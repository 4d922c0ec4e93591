// Named accumulated timers (the SSM training guide's Timer API): {avg_time, total_time, count} per name, a
// scoped API, the console block printed every log_every steps and `profiling/<name>_*` scalars.
//
// One process-wide registry, `timers()`. Names are interned once into a TimerId; the hot path
// (ScopedTimer, start_timer/end_timer by id) is two relaxed atomic loads, two clock reads and
// three relaxed atomic updates — no string hashing, no locks. When disabled (the default) a timer
// reads no clock at all: it checks one relaxed atomic flag and returns.
//
// On CUDA the trainer installs torch::cuda::synchronize with set_synchronize(): the hook runs
// before each clock read, so a timer measures the work, not its asynchronous dispatch (the
// reference Python profiler timed JAX's async dispatch without blocking; we must not).
//
// Thread-safety: every function may be called from any thread. Accumulation is lock-free;
// a summary read while timers run may see a count and a total that differ by one interval.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "profiling/scalar_sink.h"
#include "util/profile_schema.h"

namespace rt::prof {

// Index of an interned timer name. Cheap to copy; valid for the life of the process.
struct TimerId {
  uint32_t index = UINT32_MAX;
  bool valid() const { return index != UINT32_MAX; }
  friend bool operator==(TimerId a, TimerId b) { return a.index == b.index; }
};

// Built-in names (the trainer's phases), pre-registered in this order, so their ids are constants.
// Named in util/profile_schema.h: they are training_summary.json's "timers" keys, which
// profile-report reads.
namespace timer_names = profile_schema::timer_names;

inline constexpr TimerId kDataBatchProductionTimer{0};
inline constexpr TimerId kForwardTimer{1};
inline constexpr TimerId kLossFnComputationTimer{2};
inline constexpr TimerId kBackwardTimer{3};
inline constexpr TimerId kOptimizerStepTimer{4};
inline constexpr TimerId kMakeStepTotalTimer{5};
inline constexpr TimerId kTrainingStepTimer{6};
inline constexpr TimerId kValidationTimer{7};
inline constexpr TimerId kCheckpointTimer{8};

// What start_timer returns and end_timer consumes: the start time, or nothing when timing was
// disabled at start (end_timer then ignores it, so enabling mid-interval records nothing).
struct TimerToken {
  int64_t start_ns = 0;
  bool valid = false;
};

struct TimerStats {
  double avg_time = 0.0;    // seconds
  double total_time = 0.0;  // seconds
  int64_t count = 0;
};

// A monotonic clock in nanoseconds. Replaceable for tests (set_clock).
using ClockFn = int64_t (*)();
int64_t steady_clock_ns();

class TimerRegistry {
 public:
  static constexpr size_t kMaxTimers = 4096;

  TimerRegistry();
  TimerRegistry(const TimerRegistry&) = delete;
  TimerRegistry& operator=(const TimerRegistry&) = delete;

  // Interns `name` (registering it on first use). Takes a lock: call once, keep the id.
  // Throws rt::Error when more than kMaxTimers distinct names are registered or name is empty.
  TimerId id(std::string_view name);
  const std::string& name(TimerId id) const;

  // Off by default. When off, start_timer/ScopedTimer read no clock.
  void set_enabled(bool enabled) { enabled_.store(enabled, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // Called before every clock read when set (e.g. torch::cuda::synchronize); empty = none.
  void set_synchronize(std::function<void()> sync);
  // nullptr restores the steady clock. For tests (fake clocks, counting clock reads).
  void set_clock(ClockFn clock) { clock_.store(clock ? clock : &steady_clock_ns, std::memory_order_relaxed); }

  TimerToken start_timer(TimerId id) const {
    (void)id;
    if (!enabled()) return {};
    return {now_ns(), true};
  }
  void end_timer(TimerId id, TimerToken token);
  // The SSM guide's name-based API (interns the name on each call; prefer ids in loops).
  TimerToken start_timer(std::string_view name) { return start_timer(id(name)); }
  void end_timer(std::string_view name, TimerToken token) { end_timer(id(name), token); }
  // Adds an externally measured interval.
  void record(TimerId id, double seconds);

  // Duration of the most recent interval of `id` in seconds (0 before the first). Lets the
  // trainer fill per-step fields (forward_time, ...) of timing_profile.json.
  double last_seconds(TimerId id) const;
  TimerStats stats(TimerId id) const;

  // Every timer with count > 0, by name.
  std::map<std::string, TimerStats> get_summary() const;
  // Zeroes every timer; names and ids stay.
  void reset();

  // "--- Profiling Metrics (Step N) ---" then "name: avg=0.0234s, total=2.34s, count=100" per
  // timer with count > 0 in registration order (built-ins first), each line ending in '\n'.
  std::string format_metrics(int64_t step) const;
  // profiling/<name>_avg_time, profiling/<name>_total_time, profiling/<name>_count per timer
  // with count > 0.
  void log_metrics(ScalarSink& sink, int64_t step) const;

 private:
  struct Slot {
    std::atomic<int64_t> total_ns{0};
    std::atomic<int64_t> count{0};
    std::atomic<int64_t> last_ns{0};
  };

  int64_t now_ns() const {
    if (has_sync_.load(std::memory_order_relaxed)) run_synchronize();
    return clock_.load(std::memory_order_relaxed)();
  }
  void run_synchronize() const;
  std::vector<std::pair<std::string, TimerStats>> ordered_stats() const;

  std::atomic<bool> enabled_{false};
  std::atomic<bool> has_sync_{false};
  std::atomic<ClockFn> clock_{&steady_clock_ns};
  std::shared_ptr<const std::function<void()>> sync_;  // Accessed with std::atomic_load/store.

  mutable std::mutex names_mutex_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::unique_ptr<std::string>> names_;  // Stable addresses for name().
  std::atomic<uint32_t> size_{0};
  std::unique_ptr<Slot[]> slots_;
};

// The process-wide registry.
TimerRegistry& timers();

// Times its own lifetime (or until stop()) into one timer.
class ScopedTimer {
 public:
  explicit ScopedTimer(TimerId id) : id_(id), token_(timers().start_timer(id)) {}
  // Interns the name on construction; prefer the TimerId form in hot loops.
  explicit ScopedTimer(std::string_view name) : ScopedTimer(timers().id(name)) {}
  ~ScopedTimer() { stop(); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

  void stop() {
    if (token_.valid) timers().end_timer(id_, token_);
    token_.valid = false;
  }

 private:
  TimerId id_;
  TimerToken token_;
};

// Runs fn() under timer `id` and returns its result (the SSM guide's decorators).
template <class Fn>
decltype(auto) timed_call(TimerId id, Fn&& fn) {
  ScopedTimer timer(id);
  return std::forward<Fn>(fn)();
}

// Fetches the next batch through fn() as `data_batch_production` (the guide's
// profile_data_loader for a pull-style loader: `auto batch = timed_next([&]{ return loader.next(); });`).
template <class Fn>
decltype(auto) timed_next(Fn&& fn) {
  return timed_call(kDataBatchProductionTimer, std::forward<Fn>(fn));
}

// Wraps a range so that producing each element (begin() and every ++) is timed as
// `data_batch_production` (or `id`): `for (auto& batch : TimedRange(loader)) ...`.
// Works with torch::data's DataLoader, whose begin() and ++ fetch a batch.
template <class Range>
class TimedRange {
 public:
  using Inner = decltype(std::declval<Range&>().begin());
  using InnerEnd = decltype(std::declval<Range&>().end());

  class iterator {
   public:
    iterator(Inner it, TimerId id) : it_(std::move(it)), id_(id) {}
    decltype(auto) operator*() { return *it_; }
    iterator& operator++() {
      ScopedTimer timer(id_);
      ++it_;
      return *this;
    }
    bool operator!=(const InnerEnd& end) { return it_ != end; }
    bool operator==(const InnerEnd& end) { return it_ == end; }

   private:
    Inner it_;
    TimerId id_;
  };

  explicit TimedRange(Range& range, TimerId id = kDataBatchProductionTimer) : range_(range), id_(id) {}
  iterator begin() {
    ScopedTimer timer(id_);
    return iterator(range_.begin(), id_);
  }
  InnerEnd end() { return range_.end(); }

 private:
  Range& range_;
  TimerId id_;
};

}  // namespace rt::prof
