#include "profiling/trace/trace_session.h"

#include <iostream>

#include "util/error.h"
#include "profiling/trace/collapsed_stacks.h"

namespace rt::prof {

TraceSession::TraceSession(TraceSessionOptions options)
    : options_(std::move(options)), tracer_(options_.tracer) {
  options_.schedule.validate();
  op_table({}, {options_.sort_by, options_.row_limit, false, "CUDA"});  // validates sort_by
  if (options_.row_limit < 1) {
    throw Error("profiling.row_limit = " + std::to_string(options_.row_limit) + " is invalid: expected an integer >= 1");
  }
  if (options_.gzip && !chrome_trace_gzip_available()) {
    throw Error("profiling.gzip = true but this build has no zlib; set profiling.gzip = false");
  }
}

TraceSession::~TraceSession() {
  try {
    finish();
  } catch (const std::exception& e) {
    std::cerr << "profiling: could not save the open trace window: " << e.what() << "\n";
  }
}

void TraceSession::add_source(std::unique_ptr<ActivitySource> source) { sources_.push_back(std::move(source)); }

void TraceSession::apply(const Transition& t) {
  if (t.stop && t.save) {
    save_window();
  } else if (t.stop) {
    tracer_.stop();
    Timeline discarded;
    for (auto& s : sources_) s->stop_into(discarded);
  }
  if (t.discard) {
    tracer_.clear();
    for (auto& s : sources_) s->clear();
  }
  if (t.start) {
    tracer_.start();
    for (auto& s : sources_) s->start();
  }
  if ((t.start || t.discard) && options_.cpu_bytes_in_use) window_start_bytes_ = options_.cpu_bytes_in_use();
}

void TraceSession::step_begin(int64_t step) {
  if (in_step_) step_end();
  const ProfilerAction next = options_.schedule.action(step);
  apply(transition(action_, next));
  action_ = next;
  in_step_ = true;
  tracer_.step_begin(step);
}

void TraceSession::step_end() {
  if (!in_step_) return;
  in_step_ = false;
  tracer_.step_end();
  if (action_ == ProfilerAction::kRecordAndSave) {
    // The window's last step is over: save now rather than at the next step_begin, so the
    // files exist even when training stops here.
    apply(transition(action_, ProfilerAction::kNone));
    action_ = ProfilerAction::kNone;
  }
}

void TraceSession::finish() {
  if (in_step_) step_end();
  apply(transition_at_exit(action_));
  action_ = ProfilerAction::kNone;
}

void TraceSession::save_window() {
  Timeline timeline = tracer_.stop();
  if (options_.cpu_bytes_in_use) {
    timeline.metadata["cpu_bytes_in_use_window_start"] = window_start_bytes_;
    timeline.metadata["cpu_bytes_in_use_window_end"] = options_.cpu_bytes_in_use();
  }
  for (auto& s : sources_) s->stop_into(timeline);
  finalize_timeline(timeline);
  WindowResult r;
  r.first_step = timeline.first_step;
  r.last_step = timeline.last_step;
  for (const auto& a : timeline.activities) {
    if (a.kind == ActivityKind::kCpuOp) ++r.cpu_ops;
    if (!is_cpu_kind(a.kind)) ++r.gpu_activities;
  }
  r.files = write_chrome_trace(timeline, options_.output_dir, options_.gzip, options_.trace);
  if (options_.tracer.with_stack) {
    r.stacks = options_.output_dir / ("profile_step_" + std::to_string(std::max<int64_t>(r.first_step, 0)) + "_stacks.txt");
    write_collapsed_stacks(timeline, r.stacks);
  }
  OpTableOptions table_options;
  table_options.sort_by = options_.sort_by;
  table_options.row_limit = options_.row_limit;
  table_options.profile_memory = options_.tracer.profile_memory;
  r.table = op_table(key_averages(timeline, options_.tracer.record_shapes), table_options);
  std::ostream& out = options_.table_out != nullptr ? *options_.table_out : std::cout;
  out << "--- Profiler window: steps " << r.first_step << "-" << r.last_step << " (" << r.cpu_ops << " CPU ops";
  if (r.gpu_activities > 0) out << ", " << r.gpu_activities << " GPU activities";
  if (timeline.dropped_records > 0) out << ", " << timeline.dropped_records << " GPU records dropped";
  out << ") → " << r.files.trace.string() << " ---\n" << r.table << std::flush;
  windows_.push_back(std::move(r));
}

}  // namespace rt::prof
