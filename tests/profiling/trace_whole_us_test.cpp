// Whole-µs trace times (whole_us_times.h, profiling.whole_us_timestamps): the nesting of
// every thread, rebuilt by Holistic Trace Analysis's rule and by TensorBoard's plugin's rule
// from the written times, is the timeline's own, for bursts of sub-µs operators too.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "profiling/trace/chrome_trace.h"
#include "profiling/trace/whole_us_times.h"
#include "util/json.h"

namespace rt::prof {
namespace {

struct Span {
  int64_t start = 0, end = 0;
};

// HTA's order of span ends (hta/common/trace_call_stack.py _less_than): by time; at equal
// times a span's open before its close, zero-length spans after the opens and before the
// closes of others, longer opens first, shorter closes first, then by index.
struct End {
  int64_t index, dur, kind, time;  // kind: -1 open, 1 close
};

bool hta_less(const End& x, const End& y) {
  if (x.time != y.time) return x.time < y.time;
  if (x.index == y.index) return x.kind == -1;
  if (x.dur == 0 || y.dur == 0) {
    if (x.dur == 0 && y.dur > 0) return y.kind == 1;
    if (x.dur > 0 && y.dur == 0) return x.kind == -1;
    if (x.dur == 0 && y.dur == 0) {
      if (x.kind == -1 && y.kind == -1) return x.index < y.index;
      if (x.kind == 1 && y.kind == 1) return x.index > y.index;
      return x.kind == -1;
    }
    ADD_FAILURE() << "negative duration: HTA raises 'Unexpected case'";
    return false;
  }
  if (x.kind == 1 && y.kind == -1) return true;
  if (x.kind == -1 && y.kind == 1) return false;
  if (x.dur != y.dur) return x.kind == -1 ? x.dur > y.dur : x.dur < y.dur;
  return x.kind == -1 ? x.index < y.index : x.index > y.index;
}

// Parents as HTA's call stack builds them (a stack over the sorted ends); -1 = root.
std::vector<int64_t> hta_parents(const std::vector<Span>& spans) {
  std::vector<End> ends;
  for (size_t i = 0; i < spans.size(); ++i) {
    const int64_t dur = spans[i].end - spans[i].start;
    ends.push_back({static_cast<int64_t>(i), dur, -1, spans[i].start});
    ends.push_back({static_cast<int64_t>(i), dur, 1, spans[i].end});
  }
  std::stable_sort(ends.begin(), ends.end(), [](const End& a, const End& b) { return a.time < b.time; });
  for (size_t i = 1; i < ends.size(); ++i) {  // insertion sort: the comparator need not be a strict order
    for (size_t j = i; j > 0 && hta_less(ends[j], ends[j - 1]); --j) std::swap(ends[j], ends[j - 1]);
  }
  for (size_t i = 1; i < ends.size(); ++i) {
    EXPECT_TRUE(hta_less(ends[i - 1], ends[i])) << "HTA: 'the events array is not sorted' at end " << i;
  }
  std::vector<int64_t> parent(spans.size(), -2), stack;
  for (const End& e : ends) {
    if (e.kind == -1) {
      parent[e.index] = stack.empty() ? -1 : stack.back();
      stack.push_back(e.index);
    } else if (!stack.empty()) {
      stack.pop_back();
    }
  }
  return parent;
}

// Parents as TensorBoard's plugin builds its operator tree
// (torch_tb_profiler/profiler/op_tree.py): sorted by (start, -end), nested when start < end of
// the open span.
std::vector<int64_t> tensorboard_parents(const std::vector<Span>& spans) {
  std::vector<size_t> order(spans.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return spans[a].start != spans[b].start ? spans[a].start < spans[b].start : spans[a].end > spans[b].end;
  });
  std::vector<int64_t> parent(spans.size(), -2), stack;
  for (size_t i : order) {
    while (!stack.empty() && !(spans[i].start < spans[stack.back()].end)) stack.pop_back();
    if (!stack.empty() && spans[i].end > spans[stack.back()].end) {
      ADD_FAILURE() << "span " << i << " partially overlaps span " << stack.back();
      continue;
    }
    parent[i] = stack.empty() ? -1 : stack.back();
    stack.push_back(static_cast<int64_t>(i));
  }
  return parent;
}

// A finalized timeline on one thread from [start, end) ns spans (any order).
Timeline timeline_of(const std::vector<Span>& spans) {
  Timeline t;
  for (const Span& s : spans) {
    Activity a;
    a.name = "op";
    a.start_ns = s.start;
    a.end_ns = s.end;
    a.pid = 1;
    a.tid = 7;
    t.activities.push_back(a);
  }
  t.end_ns = 0;
  for (const Span& s : spans) t.end_ns = std::max(t.end_ns, s.end);
  finalize_timeline(t);
  return t;
}

std::vector<int64_t> timeline_parents(const Timeline& t) {
  std::vector<int64_t> p;
  for (const auto& a : t.activities) p.push_back(a.parent);
  return p;
}

void expect_nesting_kept(const Timeline& t, const WholeUsTimes& us) {
  std::vector<Span> rounded;
  for (size_t i = 0; i < t.activities.size(); ++i) {
    ASSERT_LE(us.start_us[i], us.end_us[i]) << i;
    // Never earlier than plain rounding to the nearest µs.
    EXPECT_GE(us.start_us[i], (t.activities[i].start_ns + 500) / 1000) << i;
    EXPECT_LE(us.start_us[i] - (t.activities[i].start_ns + 500) / 1000, us.max_shift_us) << i;
    EXPECT_LE(us.end_us[i], us.window_end_us) << i;
    rounded.push_back({us.start_us[i], us.end_us[i]});
  }
  const auto expected = timeline_parents(t);
  EXPECT_EQ(hta_parents(rounded), expected);
  EXPECT_EQ(tensorboard_parents(rounded), expected);
}

TEST(WholeUsTimes, SubMicrosecondBurstKeepsItsNestingForHtaAndTensorBoard) {
  // A 3 µs parent holding back-to-back sub-µs leaves, a zero-length op, touching siblings and
  // a nested pair inside one µs: plain rounding would collapse these onto shared µs.
  const Timeline t = timeline_of({{0, 3000},
                                  {100, 300},
                                  {300, 450},
                                  {450, 450},
                                  {460, 480},
                                  {600, 900},
                                  {650, 880},
                                  {700, 720},
                                  {1000, 1400},
                                  {1400, 2600},
                                  {1500, 1500},
                                  {2600, 3000},
                                  {3000, 3100},
                                  {3100, 3101}});
  const WholeUsTimes us = whole_us_times(t, 0);
  expect_nesting_kept(t, us);
  EXPECT_GT(us.max_shift_us, 0);  // the burst does not fit its 3 µs: later times move
}

// Random trees of spans with durations from 0 to a few µs, gaps of 0 to a few hundred ns.
void random_children(std::mt19937& rng, int64_t begin, int64_t end, int depth, std::vector<Span>& out) {
  std::uniform_int_distribution<int64_t> gap(0, 400), len(0, 3000), coin(0, 3);
  int64_t at = begin;
  while (true) {
    at += coin(rng) == 0 ? 0 : gap(rng);
    const int64_t e = at + (coin(rng) == 0 ? 0 : len(rng));
    if (e > end) return;
    out.push_back({at, e});
    if (depth < 4 && e - at > 200) random_children(rng, at, e, depth + 1, out);
    at = e;
  }
}

TEST(WholeUsTimes, RandomSubMicrosecondTreesKeepTheirNesting) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    std::vector<Span> spans;
    random_children(rng, 0, 50'000, 0, spans);
    const Timeline t = timeline_of(spans);
    SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(spans.size()) + " spans");
    expect_nesting_kept(t, whole_us_times(t, 0));
  }
}

TEST(WholeUsTimes, ShiftIsAbsorbedByAnIdleGap) {
  // Ten 100 ns leaves in 1 µs need ten µs; a leaf after a 1 ms gap is back at its own time.
  std::vector<Span> spans;
  for (int i = 0; i < 10; ++i) spans.push_back({i * 100, i * 100 + 100});
  spans.push_back({1'000'000, 1'002'000});
  const Timeline t = timeline_of(spans);
  const WholeUsTimes us = whole_us_times(t, 0);
  expect_nesting_kept(t, us);
  EXPECT_EQ(us.start_us.back(), 1000);
  EXPECT_EQ(us.end_us.back(), 1002);
}

// The default Chrome trace: integer ts/dur (HTA then skips its inward rounding), nesting as
// the timeline's, the largest shift in the metadata; whole_us = false keeps ns resolution.
TEST(WholeUsTimes, DefaultChromeTraceWritesWholeUsThatNestAsTheTimeline) {
  const Timeline t = timeline_of({{1000, 4000}, {1100, 1300}, {1300, 1450}, {1450, 1450}, {1500, 1700}});
  const Json j = Json::parse(chrome_trace_json(t, ChromeTraceOptions{}));
  ASSERT_TRUE(j.contains("whole_us_timestamps"));
  EXPECT_GE(j["whole_us_timestamps"]["max_shift_us"].get<int64_t>(), 1);
  std::vector<Span> written;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e["ts"].is_number_integer()) << e.dump();
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e["dur"].is_number_integer()) << e.dump();
    written.push_back({e["ts"].get<int64_t>(), e["ts"].get<int64_t>() + e["dur"].get<int64_t>()});
  }
  ASSERT_EQ(written.size(), t.activities.size());  // written in timeline order
  EXPECT_EQ(hta_parents(written), timeline_parents(t));
  EXPECT_EQ(tensorboard_parents(written), timeline_parents(t));

  ChromeTraceOptions ns;
  ns.whole_us = false;
  const Json k = Json::parse(chrome_trace_json(t, ns));
  EXPECT_FALSE(k.contains("whole_us_timestamps"));
  bool fractional = false;
  for (const auto& e : k["traceEvents"]) fractional = fractional || !e["ts"].is_number_integer();
  EXPECT_TRUE(fractional);
}

}  // namespace
}  // namespace rt::prof
