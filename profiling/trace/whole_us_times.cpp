#include "profiling/trace/whole_us_times.h"

#include <algorithm>
#include <limits>

namespace rt::prof {

namespace {

// The µs being filled and what it holds so far, in nesting order: closes, then opens, then
// at most one zero-length leaf (after which the µs is full).
struct Slot {
  int64_t us = std::numeric_limits<int64_t>::min();
  bool has_close = false;
  bool has_zero = false;
};

class Layout {
 public:
  Layout(const Timeline& t, int64_t base_ns, WholeUsTimes& out) : t_(t), base_(base_ns), out_(out) {}

  void open(size_t i) {
    const int64_t want = nearest_us(t_.activities[i].start_ns);
    if (want > slot_.us) {
      slot_ = {want, false, false};
    } else if (slot_.has_zero) {
      next_slot();
    }
    out_.start_us[i] = slot_.us;
    note_shift(want);
    last_open_ = static_cast<int64_t>(i);
  }

  void close(size_t i) {
    const int64_t want = nearest_us(t_.activities[i].end_ns);
    const bool leaf = last_open_ == static_cast<int64_t>(i);
    last_open_ = -1;
    if (want > slot_.us) {
      slot_ = {want, true, false};
    } else if (slot_.has_zero) {
      next_slot();
      slot_.has_close = true;
    } else if (out_.start_us[i] < slot_.us) {
      slot_.has_close = true;
    } else if (leaf && !slot_.has_close) {
      slot_.has_zero = true;  // a zero-length leaf: the one this µs may hold
    } else {
      next_slot();
      slot_.has_close = true;
    }
    out_.end_us[i] = slot_.us;
    note_shift(want);
  }

  void new_thread() {
    slot_ = Slot{};
    last_open_ = -1;
  }

  int64_t nearest_us(int64_t ns) const { return (ns - base_ + 500) / 1000; }

 private:
  void next_slot() { slot_ = {slot_.us + 1, false, false}; }
  void note_shift(int64_t want) { out_.max_shift_us = std::max(out_.max_shift_us, slot_.us - want); }

  const Timeline& t_;
  int64_t base_;
  WholeUsTimes& out_;
  Slot slot_;
  int64_t last_open_ = -1;
};

}  // namespace

WholeUsTimes whole_us_times(const Timeline& t, int64_t base_ns) {
  const auto& acts = t.activities;
  WholeUsTimes out;
  out.start_us.assign(acts.size(), 0);
  out.end_us.assign(acts.size(), 0);
  Layout layout(t, base_ns, out);

  // Walk each thread in nesting order (finalize_timeline's parent links): before a span
  // opens, the spans that are not its ancestors close.
  std::vector<size_t> open;
  for (size_t i = 0; i <= acts.size(); ++i) {
    const bool thread_ends =
        i == acts.size() || (i > 0 && (acts[i].pid != acts[i - 1].pid || acts[i].tid != acts[i - 1].tid));
    if (thread_ends) {
      while (!open.empty()) {
        layout.close(open.back());
        open.pop_back();
      }
      if (i == acts.size()) break;
      layout.new_thread();
    }
    while (!open.empty() && static_cast<int64_t>(open.back()) != acts[i].parent) {
      layout.close(open.back());
      open.pop_back();
    }
    layout.open(i);
    open.push_back(i);
  }

  int64_t last = layout.nearest_us(std::max(t.end_ns, base_ns));
  for (int64_t e : out.end_us) last = std::max(last, e);
  out.memory_us.reserve(t.memory.size());
  for (const auto& m : t.memory) {
    int64_t us = layout.nearest_us(m.time_ns);
    if (m.owner >= 0 && static_cast<size_t>(m.owner) < acts.size()) {
      us = std::clamp(us, out.start_us[m.owner], out.end_us[m.owner]);
    }
    out.memory_us.push_back(us);
    last = std::max(last, us);
  }
  out.window_end_us = last;
  return out;
}

}  // namespace rt::prof
