#include "trainer/run_profilers.h"

#include <iostream>

#include "profiling/cuda_memory_snapshot.h"
#include "profiling/timers.h"
#include "tensorboard/tensorboard_writer.h"
#include "training/fused_adam.h"
#include "training/model_family.h"
#include "training/phases.h"
#include "util/error.h"
#include "util/profile_schema.h"

#ifdef RT_HAS_CUPTI
#include "profiling/cupti/cupti_collector.h"
#endif

namespace rt {
namespace {

namespace fs = std::filesystem;

// Adapts the TensorBoard writer to the profiling library's ScalarSink, which the timers and the
// memory scalars are logged through (their tags are the profiling library's).
class TensorBoardSink final : public prof::ScalarSink {
 public:
  explicit TensorBoardSink(TensorBoardWriter& tb) : tb_(tb) {}
  void add_scalar(const std::string& tag, double value, int64_t step) override {
    tb_.add_scalar(tag, static_cast<float>(value), step);
  }

 private:
  TensorBoardWriter& tb_;
};

// Where the op tables of ranks other than 0 go: nowhere (rank 0 prints the console).
std::ostream& null_stream() {
  static std::ostream discard(nullptr);
  return discard;
}

// Rank 0 of a job keeps the plain name too: a relative link to its rank file.
void link_plain_name(const fs::path& dir, const std::string& stem, const std::string& extension,
                     const RankInfo& rank) {
  if (rank.world_size == 1 || rank.rank != 0) return;
  const fs::path plain = dir / (stem + extension);
  std::error_code ec;
  fs::remove(plain, ec);
  fs::create_symlink(rank_file_name(stem, extension, rank), plain, ec);
  if (ec) std::cerr << "warning: could not link " << plain.string() << ": " << ec.message() << "\n";
}

// The detailed-profiling schedule the profiling.* keys describe (Config::finalize has written
// --profile_steps and the guides' aliases into them).
prof::ProfilerSchedule schedule_of(const ProfilingKeys& p) {
  prof::ProfilerSchedule s;
  s.wait = p.wait;
  s.warmup = p.warmup;
  s.active = p.active;
  s.repeat = p.repeat;
  s.skip_first = p.skip_first;
  return s;
}

prof::TraceSessionOptions trace_options(const ProfilingKeys& p, const fs::path& out_dir) {
  prof::TraceSessionOptions o;
  o.schedule = schedule_of(p);
  o.tracer.record_shapes = p.record_shapes;
  o.tracer.profile_memory = p.profile_memory;
  o.tracer.with_stack = p.with_stack;
  o.tracer.with_modules = p.with_modules;
  o.output_dir = out_dir;
  o.gzip = p.gzip;
  o.trace.whole_us = p.whole_us_timestamps;
  o.sort_by = p.sort_by;
  o.row_limit = static_cast<int>(p.row_limit);
  return o;
}

}  // namespace

std::string rank_file_name(const std::string& stem, const std::string& extension, const RankInfo& rank) {
  if (rank.world_size == 1) return stem + extension;
  return stem + ".rank" + std::to_string(rank.rank) + extension;
}

RunProfilers::RunProfilers(const ProfilingKeys& c, int64_t train_log_every, torch::Device device,
                           const fs::path& dir, TensorBoardWriter* tb, RankInfo rank, int64_t first_step)
    : device_(device), rank_(std::move(rank)) {
  const bool timing = c.timing;
  const bool memory = c.memory;
  const bool detailed = c.enabled;
  const bool profile_memory = detailed && c.profile_memory;
  log_every_ = c.log_every > 0 ? c.log_every : train_log_every;
  if (tb != nullptr) sink_ = std::make_unique<TensorBoardSink>(*tb);
  // The bound of each per-step profile (profiling/profile_writers.h: rotation).
  prof::RotationPolicy rotation;
  rotation.part_bytes = c.profile_part_mb * (int64_t{1} << 20);
  rotation.parts = c.profile_parts;
  start_memory_history(c, dir);  // first: a key this run cannot honour fails before any file is made

  prof::timers().reset();
  prof::timers().set_enabled(timing);
  if (device_.is_cuda()) prof::timers().set_synchronize([] { torch::cuda::synchronize(); });
  if (timing) {
    timing_ =
        std::make_unique<prof::TimingProfileWriter>(dir / rank_file_name("timing_profile", ".json", rank_),
                                                    c.timing_every, prof::FlushPolicy{}, rotation);
    timing_->continue_from(first_step);
    link_plain_name(dir, "timing_profile", ".json", rank_);
  }
  if (memory || profile_memory) {
    reporter_ = prof::default_memory_reporter();
    tracking_ = std::make_unique<prof::MemoryTrackingScope>(reporter_);
  }
  if (memory) {
    memory_ =
        std::make_unique<prof::MemoryProfileWriter>(dir / rank_file_name("memory_profile", ".json", rank_),
                                                    c.memory_every, prof::FlushPolicy{}, rotation);
    memory_->continue_from(first_step);
    link_plain_name(dir, "memory_profile", ".json", rank_);
  }
  if (!detailed) return;
  auto options = trace_options(c, dir);
  options.trace.backend = rank_.backend;
  options.trace.rank = rank_.rank;
  options.trace.world_size = rank_.world_size;
  if (rank_.rank != 0) {
    options.table_out = &null_stream();
    options.file_tag = ".rank" + std::to_string(rank_.rank);
  }
  if (profile_memory) {
    auto reporter = reporter_;
    options.cpu_bytes_in_use = [reporter] { return reporter->cpu_bytes_in_use(); };
  }
  trace_ = std::make_unique<prof::TraceSession>(std::move(options));
#ifdef RT_HAS_CUPTI
  if (device_.is_cuda()) {
    if (auto cupti = prof::CuptiCollector::create()) trace_->add_source(std::move(cupti));
  }
#endif
  if (profile_memory) {
    // Blocks are tagged only with profiling.memory (watch_memory_categories); without it an
    // untagged free says nothing about what the block held.
    const bool tagged = memory;
    reporter_->set_listener([tagged](void* ptr, int64_t bytes, int64_t total_alloc, int64_t total_reserved,
                                     c10::Device d, prof::MemoryCategory category) {
      if (auto* t = prof::OpTracer::current()) {
        t->record_memory(ptr, bytes, total_alloc, total_reserved, d.is_cuda() ? 1 : 0,
                         d.has_index() ? d.index() : 0,
                         tagged && d.is_cpu() && bytes < 0 ? prof::memory_category_name(category) : nullptr);
      }
    });
  }
}

RunProfilers::~RunProfilers() { finish(); }

void RunProfilers::start_memory_history(const ProfilingKeys& c, const fs::path& dir) {
  snapshot_dir_ = dir;
  snapshot_step_ = c.memory_snapshot_step;
  snapshot_on_oom_ = c.memory_snapshot_on_oom;
  if (snapshot_step_ < 0 && !snapshot_on_oom_) return;
  const std::string key = snapshot_step_ >= 0
                              ? "profiling.memory_snapshot_step = " + std::to_string(snapshot_step_)
                              : std::string("profiling.memory_snapshot_on_oom = true");
  if (!device_.is_cuda()) {
    throw Error(key + " needs a CUDA device, but this run trains on " + device_.str() +
                ": a memory snapshot is the CUDA caching allocator's history (unset it, or train with "
                "--device cuda)");
  }
  if (const auto why = prof::cuda_memory_history_unavailable_reason(); !why.empty()) {
    throw Error(key + ": " + why);
  }
  prof::start_cuda_memory_history(static_cast<size_t>(c.memory_snapshot_entries));
  recording_history_ = true;
}

std::string RunProfilers::write_oom_snapshot() {
  if (!recording_history_ || !snapshot_on_oom_) return "";
  const fs::path path = snapshot_dir_ / rank_file_name("memory_snapshot_oom", ".pickle", rank_);
  try {
    prof::write_cuda_memory_snapshot(path);
  } catch (const std::exception& e) {
    std::cerr << "warning: could not write the out-of-memory snapshot " << path.string() << ": " << e.what()
              << "\n";
    return "";
  }
  return path.string();
}

void RunProfilers::watch_memory_categories(ModelFamily& family) {
  if (!memory_) return;
  prof::MemoryCategorySource source;
  source.parameters = [&family] { return family.memory_holders().parameters; };
  source.buffers = [&family] { return family.memory_holders().buffers; };
  source.optimizer_state = [&family] {
    std::vector<torch::Tensor> out;
    for (const auto* opt : family.memory_holders().optimizers) {
      auto state = optimizer_state_tensors(*opt);
      out.insert(out.end(), state.begin(), state.end());
    }
    return out;
  };
  categories_ = std::make_unique<prof::MemoryCategories>(std::move(source), reporter_);
  // The first interval starts with the model's blocks tagged, not during its construction.
  reporter_->take_interval_peak();
}

void RunProfilers::step_begin(int64_t step) {
  if (trace_) trace_->step_begin(step);
}

void RunProfilers::step_end() {
  if (trace_) trace_->step_end();
}

void RunProfilers::after_step(int64_t step, int64_t batch_idx, int64_t examples, int64_t samples_per_example,
                              double step_seconds) {
  if (recording_history_ && step == snapshot_step_) {
    const fs::path path =
        snapshot_dir_ / rank_file_name("memory_snapshot_step" + std::to_string(step), ".pickle", rank_);
    guarded("the memory snapshot", [&] {
      prof::write_cuda_memory_snapshot(path);
      if (rank_.rank == 0)
        std::cout << "memory snapshot: " << terminal_safe(path.string())
                  << " (https://pytorch.org/memory_viz)\n";
    });
  }
  if (timing_ && timing_->wants(step)) {
    const auto& t = current_step_phase_times();
    prof::TimingEntry e;
    e.step = step;
    e.batch_idx = batch_idx;
    e.total_batch_time = t[Phase::kStep] > 0 ? t[Phase::kStep] : step_seconds;
    e.examples_per_second = static_cast<double>(examples) / e.total_batch_time;
    e.samples_per_second = e.examples_per_second * static_cast<double>(samples_per_example);
    e.data_time = t[Phase::kData];
    e.forward_time = t[Phase::kForward];
    e.backward_time = t[Phase::kBackward];
    e.optimizer_time = t[Phase::kOptimizer];
    e.extra[profile_schema::timing::kLossTime] = t[Phase::kLoss];
    e.extra[profile_schema::timing::kMakeStepTime] = t[Phase::kMakeStep];
    pending_timing_.push_back(std::move(e));
  }
  if (memory_ && memory_->wants(step)) {
    prof::MemoryMeasurement m;
    m.cuda_device = device_.is_cuda();
    m.sample = prof::sample_memory(reporter_.get(), m.cuda_device ? device_.index() : -1);
    if (categories_) {
      m.split =
          categories_->measure(m.cuda_device ? m.sample.cuda.allocated_bytes : m.sample.cpu_bytes_in_use);
      // CPU only: the CUDA allocator's peaks come without a composition.
      if (!m.cuda_device) m.interval_peak = reporter_->take_interval_peak();
    }
    memory_->record(step, batch_idx, m);
    if (sink_) log_memory_scalars(std::move(m), step);
  }
}

void RunProfilers::log_memory_scalars(prof::MemoryMeasurement m, int64_t step) {
  if (m.interval_peak && tb_peak_ && tb_peak_->bytes_in_use > m.interval_peak->bytes_in_use)
    m.interval_peak = tb_peak_;
  if (step % log_every_ != 0) {
    tb_peak_ = m.interval_peak;
    tb_pending_ = std::make_pair(std::move(m), step);
    return;
  }
  prof::log_memory_metrics(m, *sink_, step);
  tb_peak_.reset();
  tb_pending_.reset();
}

void RunProfilers::flush_profiles() {
  if (finished_) return;  // closed already (the final last.ckpt comes after finish())
  if (timing_) timing_->flush();
  if (memory_) memory_->flush();
}

void RunProfilers::resolve_losses(const std::vector<std::pair<int64_t, double>>& losses,
                                  int64_t first_nonfinite_step) {
  if (!timing_) return;
  auto l = losses.begin();
  for (auto& e : pending_timing_) {
    if (first_nonfinite_step >= 0 && e.step >= first_nonfinite_step) break;
    while (l != losses.end() && l->first < e.step) ++l;
    if (l != losses.end() && l->first == e.step) e.extra[profile_schema::timing::kLoss] = l->second;
    timing_->record(e);
  }
  pending_timing_.clear();
}

void RunProfilers::log_timers(int64_t step, bool force) {
  if (!prof::timers().enabled() || !sink_ || !(force || step % log_every_ == 0)) return;
  std::cout << prof::timers().format_metrics(step) << std::flush;
  prof::timers().log_metrics(*sink_, step);
}

// Runs `fn`; a failure is named on stderr and kept in lost_ ("<what>: <why>"), so one writer
// does not lose the others and the trainer can fail the run for it.
void RunProfilers::guarded(const char* what, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    std::cerr << "error: could not write " << what << ": " << e.what() << "\n";
    lost_.push_back(std::string(what) + ": " + e.what());
  }
}

std::vector<std::string> RunProfilers::lost_outputs() const {
  std::vector<std::string> out;
  if (trace_) {
    for (const auto& w : trace_->windows()) {
      for (const auto& o : w.outputs) {
        if (o.error.empty()) continue;
        out.push_back("the trace output '" + o.output + "' of steps " + std::to_string(w.first_step) + "-" +
                      std::to_string(w.last_step) + ": " + o.error);
      }
    }
  }
  out.insert(out.end(), lost_.begin(), lost_.end());
  return out;
}

void RunProfilers::finish() {
  if (finished_) return;
  finished_ = true;
  if (trace_) guarded("the profiler trace", [&] { trace_->finish(); });
  if (reporter_) reporter_->set_listener(nullptr);
  if (timing_) {
    guarded("timing_profile.json", [&] {
      resolve_losses({});
      timing_->close();
    });
  }
  if (memory_) guarded("memory_profile.json", [&] { memory_->close(); });
  if (tb_pending_ && sink_) {  // the last measurement, when it fell between two logged steps
    guarded("the memory scalars",
            [&] { prof::log_memory_metrics(tb_pending_->first, *sink_, tb_pending_->second); });
    tb_pending_.reset();
  }
  if (recording_history_) {
    recording_history_ = false;
    guarded("the memory history", [] { prof::stop_cuda_memory_history(); });
  }
}

Json RunProfilers::timers_json() const {
  if (!prof::timers().enabled()) return Json();
  Json j = Json::object();
  for (const auto& [name, s] : prof::timers().get_summary()) {
    namespace key = profile_schema::summary;
    j[name] = {{key::kAvgTime, s.avg_time}, {key::kTotalTime, s.total_time}, {key::kCount, s.count}};
  }
  return j;
}

void RunProfilers::warn_of_missed_trace(const ProfilingKeys& keys, int64_t max_steps, int64_t from,
                                        const char* when) {
  if (!keys.enabled) return;
  const std::string w = schedule_of(keys).missed_window(from, max_steps);
  if (!w.empty()) std::cerr << "warning: " << w << " " << when << " written\n";
}

}  // namespace rt
