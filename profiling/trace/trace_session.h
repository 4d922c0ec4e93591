// Detailed profiling for the training loop: the schedule drives the op tracer and
// any extra sources (CUPTI), and at the end of each window its outputs (trace_output.h) run in
// order over the finalized timeline — by default (standard_trace_outputs) the Chrome trace
// (profiler_traces/…pt.trace.json + profile_step_<N>.json), collapsed stacks
// (profile_step_<N>_stacks.txt, with_stack) and the top-N operator table on the console.
//
// Use from the training thread:
//   TraceSession session(options);              // nothing traced yet
//   for (step…) { session.step_begin(step); …train…; session.step_end(); }
//   session.finish();                           // at exit (also on Ctrl-C): saves an open window
// Trainer phases: rt::prof::ScopedAnnotation anywhere (profiling/annotation.h).
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "profiling/trace/activity_source.h"
#include "profiling/trace/chrome_trace.h"
#include "profiling/trace/op_tracer.h"
#include "profiling/trace/schedule.h"
#include "profiling/trace/trace_output.h"

namespace rt::prof {

struct TraceSessionOptions {
  ProfilerSchedule schedule;
  OpTracerOptions tracer;
  std::filesystem::path output_dir;  // the run directory (or profiling.output_dir)
  std::string file_tag;              // WindowContext::file_tag
  bool gzip = false;                 // gzip the profiler_traces/ copy
  std::string sort_by = "self_cpu_time_total";
  int row_limit = 10;
  // Where each window's line and the outputs' text go (nullptr: std::cout).
  std::ostream* table_out = nullptr;
  ChromeTraceOptions trace;
  // With profile_memory: the allocator's CPU bytes in use (MemoryReporter::cpu_bytes_in_use),
  // read where a window starts recording and where it ends; written to the trace as
  // "cpu_bytes_in_use_window_start"/"_end", so the window's CPU "[memory]" events can be
  // checked to sum to the difference. Empty = not written.
  std::function<int64_t()> cpu_bytes_in_use;
};

// The outputs a session with `options` runs, in order: the Chrome trace, the collapsed stacks
// (with_stack) and the op table. A new format is a TraceOutput in a file of its own plus one
// line in this function (trace_session.cpp), or TraceSession::add_output for one session.
// Throws rt::Error naming the key when an output's setting is invalid (profiling.gzip,
// sort_by, row_limit).
std::vector<std::unique_ptr<TraceOutput>> standard_trace_outputs(const TraceSessionOptions& options);

struct WindowResult {
  int64_t first_step = -1;
  int64_t last_step = -1;
  size_t cpu_ops = 0;
  size_t gpu_activities = 0;
  int64_t dropped_records = 0;        // GPU records the sources lost
  std::vector<OutputResult> outputs;  // one per output, in the session's order

  // The result of the output named `name`, or nullptr.
  const OutputResult* output(std::string_view name) const;
};

class TraceSession {
 public:
  // Validates the schedule and adds standard_trace_outputs(options) (rt::Error naming the key).
  explicit TraceSession(TraceSessionOptions options);
  ~TraceSession();  // finish(), errors swallowed
  TraceSession(const TraceSession&) = delete;
  TraceSession& operator=(const TraceSession&) = delete;

  // Adds an extra event source (e.g. CuptiCollector); call before the first step.
  void add_source(std::unique_ptr<ActivitySource> source);
  // Adds an output, run after those added before it; call before the first step. Throws
  // rt::Error when an output of the same name() is already there.
  void add_output(std::unique_ptr<TraceOutput> output);

  // Call at the start of step `step` (the schedule's step number, ≥ 0, increasing).
  void step_begin(int64_t step);
  // Call at the end of the step; writes the window when this step was its last.
  void step_end();
  // End of training: a window still recording is saved, one still warming up dropped.
  void finish();

  ProfilerAction current_action() const { return action_; }
  OpTracer& tracer() { return tracer_; }
  const std::vector<WindowResult>& windows() const { return windows_; }

 private:
  void apply(const Transition& t);
  void save_window();
  void print_window(const WindowResult& r) const;

  TraceSessionOptions options_;
  OpTracer tracer_;
  std::vector<std::unique_ptr<ActivitySource>> sources_;
  std::vector<std::unique_ptr<TraceOutput>> outputs_;
  ProfilerAction action_ = ProfilerAction::kNone;
  bool in_step_ = false;
  int64_t window_start_bytes_ = 0;
  std::vector<WindowResult> windows_;
};

}  // namespace rt::prof
