// Checks of a written Chrome trace against Kineto's schema (libkineto output_json.cpp,
// libkineto output_json.cpp) and what its consumers require (HTA, TensorBoard's
// plugin: "What the trace consumers actually require"), shared by the unit tests
// (tests/profiling/trace_schema_test.cpp) and the end-to-end tests on a real training run
// (tests/e2e/trace_e2e_test.cpp). Header-only; failures are reported through gtest.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "util/json.h"

namespace rt::testing {

// Top level: Kineto's key order, free metadata before traceEvents (HTA stops reading metadata
// there), `"rank": N` with whitespace (HTA's regex), schemaVersion 1, ms display unit.
// `rank` and `world_size`: the process's place in a data-parallel job (distributedInfo).
inline void check_kineto_top_level(const std::string& text, int rank = 0, int world_size = 1) {
  const std::vector<std::string> required = {
      "\"schemaVersion\"",       "\"deviceProperties\"", "\"distributedInfo\"", "\"displayTimeUnit\"",
      "\"baseTimeNanoseconds\"", "\"traceEvents\"",      "\"traceName\""};
  size_t pos = 0;
  for (const auto& key : required) {
    const size_t at = text.find(key, pos);
    ASSERT_NE(at, std::string::npos) << key << " missing or out of order";
    pos = at;
  }
  const size_t shapes = text.find("\"record_shapes\"");
  ASSERT_NE(shapes, std::string::npos);
  EXPECT_LT(shapes, text.find("\"displayTimeUnit\""));
  EXPECT_GT(shapes, text.find("\"distributedInfo\""));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("\"rank\":\\s+(\\d+)")));
  EXPECT_EQ(m[1].str(), std::to_string(rank));
  const Json j = Json::parse(text);
  EXPECT_EQ(j["schemaVersion"], 1);
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  EXPECT_EQ(j["distributedInfo"]["world_size"], world_size);
  EXPECT_GT(j["baseTimeNanoseconds"].get<int64_t>(), int64_t{1'600'000'000} * 1'000'000'000);
  // ts/dur: whole µs (profiling.whole_us_timestamps, the default) or µs with 3 decimals.
  const bool whole_us = j.contains("whole_us_timestamps");
  EXPECT_TRUE(std::regex_search(text, std::regex(whole_us ? R"("ts": \d+, "dur": \d+[,}])"
                                                          : R"("ts": \d+\.\d{3}, "dur": \d+\.\d{3})")));
}

struct TraceEventCounts {
  std::map<std::string, size_t> by_cat;  // X events by category
  std::set<std::string> metadata_names;
  size_t memory = 0;  // "[memory]" instant events
};

// Every event: a name, ph, integer pid/tid, numeric ts; X events a category and dur ≥ 0;
// cpu_ops their ids (and shape args when `expect_shapes`); metadata events args; "[memory]"
// events Kineto's args; the process/thread metadata present; "Record Window End" last.
inline TraceEventCounts check_kineto_events(const Json& trace, bool expect_shapes) {
  TraceEventCounts c;
  const Json& events = trace["traceEvents"];
  EXPECT_TRUE(events.is_array());
  if (!events.is_array() || events.empty()) return c;
  for (const auto& e : events) {
    if (!(e.contains("name") && e["name"].is_string() && e.contains("ph") && e["pid"].is_number_integer() &&
          e["tid"].is_number_integer() && e["ts"].is_number())) {
      ADD_FAILURE() << "event lacks name/ph/integer pid,tid/ts: " << e.dump();
      return c;
    }
    const std::string ph = e["ph"];
    if (ph == "X") {
      if (!e["cat"].is_string() || !e["dur"].is_number()) {
        ADD_FAILURE() << "X event without cat/dur: " << e.dump();
        continue;
      }
      EXPECT_GE(e["dur"].get<double>(), 0.0) << e.dump();
      EXPECT_GE(e["ts"].get<double>(), 0.0) << e.dump();
      c.by_cat[e["cat"]]++;
      if (e["cat"] == "cpu_op") {
        EXPECT_TRUE(e["args"]["External id"].is_number_integer()) << e.dump();
        EXPECT_TRUE(e["args"]["Record function id"].is_number_integer()) << e.dump();
        if (expect_shapes) {
          EXPECT_TRUE(e["args"].contains("Input Dims")) << e.dump();
          EXPECT_TRUE(e["args"].contains("Input type")) << e.dump();
        }
      }
    } else if (ph == "M") {
      EXPECT_TRUE(e["args"].is_object()) << e.dump();
      c.metadata_names.insert(e["name"].get<std::string>());
    } else if (ph == "i" && e["name"] == "[memory]") {
      EXPECT_EQ(e["cat"], "cpu_instant_event");
      EXPECT_EQ(e["s"], "t");
      for (const char* k :
           {"Addr", "Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id"}) {
        EXPECT_TRUE(e["args"].contains(k)) << k << " in " << e.dump();
      }
      ++c.memory;
    }
  }
  for (const char* name :
       {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}) {
    EXPECT_TRUE(c.metadata_names.count(name)) << name;
  }
  const Json& last = events.back();
  EXPECT_EQ(last["name"], "Record Window End");
  EXPECT_EQ(last["ph"], "i");
  EXPECT_EQ(last["s"], "g");
  return c;
}

// A complete ("X") event's extent in integer ns (ts/dur are µs with exactly 3 decimals).
struct Span {
  int64_t begin = 0, end = 0;
  std::string name, cat;
  const Json* event = nullptr;
};

inline int64_t us_to_ns(double us) { return static_cast<int64_t>(std::llround(us * 1000.0)); }

// The X events of each (pid, tid), sorted by start then longest first.
inline std::map<std::pair<int64_t, int64_t>, std::vector<Span>> spans_by_thread(const Json& trace) {
  std::map<std::pair<int64_t, int64_t>, std::vector<Span>> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    Span s;
    s.begin = us_to_ns(e["ts"].get<double>());
    s.end = s.begin + us_to_ns(e["dur"].get<double>());
    s.name = e["name"];
    s.cat = e["cat"];
    s.event = &e;
    out[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}].push_back(s);
  }
  for (auto& [key, v] : out) {
    std::stable_sort(v.begin(), v.end(), [](const Span& a, const Span& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
    });
  }
  return out;
}

// Exact nesting per thread (TensorBoard's plugin drops operators that partially overlap a
// sibling): any two spans of a thread are disjoint or one contains the other.
inline void check_exact_nesting(const Json& trace) {
  for (const auto& [thread, spans] : spans_by_thread(trace)) {
    std::vector<const Span*> stack;
    for (const Span& s : spans) {
      while (!stack.empty() && stack.back()->end <= s.begin) stack.pop_back();
      if (!stack.empty() && s.end > stack.back()->end) {
        ADD_FAILURE() << "thread " << thread.second << ": '" << s.name << "' [" << s.begin << ", " << s.end
                      << "] partially overlaps '" << stack.back()->name << "' [" << stack.back()->begin
                      << ", " << stack.back()->end << "]";
        return;
      }
      stack.push_back(&s);
    }
  }
}

// On every thread that has ProfilerStep#N spans, every cpu_op lies inside one of them.
// Returns the number of such threads.
inline int check_ops_inside_steps(const Json& trace) {
  int threads_with_steps = 0;
  for (const auto& [thread, spans] : spans_by_thread(trace)) {
    std::vector<const Span*> steps;
    for (const Span& s : spans) {
      if (s.cat == "user_annotation" && s.name.rfind("ProfilerStep#", 0) == 0) steps.push_back(&s);
    }
    if (steps.empty()) continue;
    ++threads_with_steps;
    size_t outside = 0;
    std::string example;
    for (const Span& s : spans) {
      if (s.cat != "cpu_op") continue;
      bool inside = false;
      for (const Span* st : steps) inside = inside || (s.begin >= st->begin && s.end <= st->end);
      if (!inside && outside++ == 0) example = s.name;
    }
    EXPECT_EQ(outside, 0u) << "thread " << thread.second << ": " << outside
                           << " cpu_ops outside every ProfilerStep span, e.g. " << example;
  }
  return threads_with_steps;
}

}  // namespace rt::testing
