#include "profiling/trace/trace_session.h"

#include <algorithm>
#include <iostream>

#include "profiling/trace/collapsed_stacks.h"
#include "profiling/trace/op_table.h"
#include "util/error.h"

namespace rt::prof {

std::vector<std::unique_ptr<TraceOutput>> standard_trace_outputs(const TraceSessionOptions& options) {
  std::vector<std::unique_ptr<TraceOutput>> outputs;
  outputs.push_back(std::make_unique<ChromeTraceOutput>(options.gzip, options.trace));
  if (options.tracer.with_stack) outputs.push_back(std::make_unique<CollapsedStacksOutput>());
  OpTableOptions table;
  table.sort_by = options.sort_by;
  table.row_limit = options.row_limit;
  table.profile_memory = options.tracer.profile_memory;
  outputs.push_back(std::make_unique<OpTableOutput>(table, options.tracer.record_shapes));
  return outputs;
}

const OutputResult* WindowResult::output(std::string_view name) const {
  for (const auto& o : outputs) {
    if (o.output == name) return &o;
  }
  return nullptr;
}

TraceSession::TraceSession(TraceSessionOptions options)
    : options_(std::move(options)), tracer_(options_.tracer) {
  options_.schedule.validate();
  for (auto& output : standard_trace_outputs(options_)) add_output(std::move(output));
}

TraceSession::~TraceSession() {
  try {
    finish();
  } catch (const std::exception& e) {
    std::cerr << "profiling: could not save the open trace window: " << e.what() << "\n";
  }
}

void TraceSession::add_source(std::unique_ptr<ActivitySource> source) {
  sources_.push_back(std::move(source));
}

void TraceSession::add_output(std::unique_ptr<TraceOutput> output) {
  for (const auto& o : outputs_) {
    if (std::string_view(o->name()) == output->name()) {
      throw Error("profiling: a trace output named '" + std::string(output->name()) + "' is already added");
    }
  }
  outputs_.push_back(std::move(output));
}

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
  r.dropped_records = timeline.dropped_records;
  for (const auto& a : timeline.activities) {
    if (a.kind == ActivityKind::kCpuOp) ++r.cpu_ops;
    if (!is_cpu_kind(a.kind)) ++r.gpu_activities;
  }
  const WindowContext context{options_.output_dir, options_.file_tag};
  for (auto& output : outputs_) {
    OutputResult& result = r.outputs.emplace_back();
    result.output = output->name();
    try {
      output->write(timeline, context, result);
    } catch (const std::exception& e) {
      // One format failing (a full disk, a bad path) must not cost the window's other files.
      result.error = e.what();
      std::cerr << "profiling: warning: trace output '" << result.output << "' failed for steps "
                << r.first_step << "-" << r.last_step << ": " << result.error << "\n";
    }
  }
  print_window(r);
  windows_.push_back(std::move(r));
}

// "--- Profiler window: steps F-L (N CPU ops) → <main file> ---", then each output's text.
void TraceSession::print_window(const WindowResult& r) const {
  std::ostream& out = options_.table_out != nullptr ? *options_.table_out : std::cout;
  out << "--- Profiler window: steps " << r.first_step << "-" << r.last_step << " (" << r.cpu_ops
      << " CPU ops";
  if (r.gpu_activities > 0) out << ", " << r.gpu_activities << " GPU activities";
  if (r.dropped_records > 0) out << ", " << r.dropped_records << " GPU records dropped";
  out << ")";
  // The window's main file: the first one written (the Chrome trace unless it failed).
  auto main = std::find_if(r.outputs.begin(), r.outputs.end(),
                           [](const OutputResult& o) { return !o.files.empty(); });
  if (main != r.outputs.end()) out << " → " << main->files.front().string();
  out << " ---\n";
  for (const auto& o : r.outputs) out << o.text;
  out << std::flush;
}

}  // namespace rt::prof
