#include "trainer/trainer.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>

#include "data/loader.h"
#include "util/error.h"
#include "util/signals.h"
#include "profiling/memory.h"
#include "profiling/profile_writers.h"
#include "profiling/timers.h"
#include "profiling/trace/trace_session.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/model_family.h"
#include "trainer/phases.h"
#include "trainer/run_dir.h"
#include "tensorboard/tensorboard_writer.h"

#ifdef RT_HAS_CUPTI
#include "profiling/cupti/cupti_collector.h"
#endif

namespace rt {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The global CPU generator (reparameterisation noise, dropout). Its state is part of a
// checkpoint, and validation runs on a copy, so that a resumed run, or one validating at
// another cadence, draws the same training noise as an uninterrupted one.
torch::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cpu_rng_state(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

constexpr const char* kRngKey = "trainer_cpu_rng_state";

torch::Device resolve_device(const std::string& requested) {
  if (requested == "cuda" && !torch::cuda::is_available()) {
    throw Error("train.device = 'cuda' but no CUDA device is available (this LibTorch " +
                std::string(torch::cuda::is_available() ? "has" : "has no usable") + " CUDA); use --device cpu");
  }
  if (requested == "cuda" || (requested == "auto" && torch::cuda::is_available())) return torch::Device(torch::kCUDA, 0);
  return torch::Device(torch::kCPU);
}

// Adapts the TensorBoard writer to the profiling library's ScalarSink.
class TensorBoardSink final : public prof::ScalarSink {
 public:
  explicit TensorBoardSink(TensorBoardWriter& tb) : tb_(tb) {}
  void add_scalar(const std::string& tag, double value, int64_t step) override {
    tb_.add_scalar(tag, static_cast<float>(value), step);
  }

 private:
  TensorBoardWriter& tb_;
};

// Means of the scalars logged between two log steps.
class ScalarAccumulator {
 public:
  void add(const std::string& tag, double v) {
    auto& [sum, n] = sums_[tag];
    sum += v;
    ++n;
  }
  void flush(TensorBoardWriter& tb, int64_t step) {
    for (const auto& [tag, sn] : sums_) tb.add_scalar(tag, static_cast<float>(sn.first / sn.second), step);
    sums_.clear();
  }
  std::string line() const {
    std::ostringstream s;
    s << std::setprecision(4);
    for (const auto& [tag, sn] : sums_) {
      if (tag.rfind("train/", 0) == 0 && tag != "train/loss") continue;
      s << " " << tag << "=" << sn.first / sn.second;
    }
    return s.str();
  }

 private:
  std::map<std::string, std::pair<double, int64_t>> sums_;
};

prof::TraceSessionOptions trace_options(const Config& c, const fs::path& out_dir) {
  prof::TraceSessionOptions o;
  if (c.was_set("profiling.profile_steps")) {
    o.schedule = prof::ProfilerSchedule::for_profile_steps(c.get_int("profiling.profile_steps"),
                                                           c.get_int("profiling.skip_first"),
                                                           c.get_int("profiling.warmup"));
  } else {
    o.schedule.wait = c.get_int("profiling.wait");
    o.schedule.warmup = c.get_int("profiling.warmup");
    o.schedule.active = c.get_int("profiling.active");
    o.schedule.repeat = c.get_int("profiling.repeat");
    o.schedule.skip_first = c.get_int("profiling.skip_first");
  }
  o.tracer.record_shapes = c.get_bool("profiling.record_shapes");
  o.tracer.profile_memory = c.get_bool("profiling.profile_memory");
  o.tracer.with_stack = c.get_bool("profiling.with_stack");
  o.tracer.with_modules = c.get_bool("profiling.with_modules");
  o.output_dir = out_dir;
  o.gzip = c.get_bool("profiling.gzip");
  o.sort_by = c.get_string("profiling.sort_by");
  o.row_limit = static_cast<int>(c.get_int("profiling.row_limit"));
  return o;
}

// Everything one job holds; the loop below is a short list of calls on it.
class TrainingJob {
 public:
  explicit TrainingJob(const Config& config) : config_(config) {}

  int run() {
    install_stop_signal_handlers();
    setup();
    std::string status = "completed";
    int exit_code = 0;
    try {
      loop();
      if (stop_requested()) {
        status = "interrupted";
        exit_code = 128 + stop_signal();
      }
    } catch (const c10::Error& e) {
      status = "failed: " + std::string(e.what_without_backtrace());
      std::cerr << "error: " << e.what_without_backtrace() << "\n";
      exit_code = 1;
    } catch (const std::exception& e) {
      status = failure_.empty() ? "failed: " + std::string(e.what()) : failure_;
      std::cerr << "error: " << (failure_.empty() ? e.what() : failure_) << "\n";
      exit_code = 1;
    }
    finish(status);
    return exit_code;
  }

 private:
  void setup() {
    const int64_t threads = config_.get_int("train.threads");
    const int n_threads = threads > 0 ? static_cast<int>(threads) : static_cast<int>(std::thread::hardware_concurrency());
    torch::set_num_threads(std::max(1, n_threads));
    device_ = resolve_device(config_.get_string("train.device"));
    torch::manual_seed(static_cast<uint64_t>(config_.get_int("train.seed")));

    family_ = make_model_family(config_);
    data_ = family_->make_data(config_);
    family_->build(device_, &data_);

    run_ = prepare_run_dir(config_);
    std::cout << "run directory: " << run_.path.string() << std::endl;
    prof_dir_ = config_.get_string("profiling.output_dir").empty() ? run_.path
                                                                   : fs::path(config_.get_string("profiling.output_dir"));
    tb_ = std::make_unique<TensorBoardWriter>(run_.path);
    sink_ = std::make_unique<TensorBoardSink>(*tb_);

    meta_.family = config_.get_string("model.family");
    meta_.signature = config_.architecture_signature();
    meta_.config_toml = config_.to_toml();
    if (!run_.checkpoint.empty()) {
      CheckpointMeta m = load_checkpoint(run_.checkpoint, meta_, [&](torch::serialize::InputArchive& a) {
        family_->load(a);
        torch::Tensor rng;
        if (a.try_read(kRngKey, rng)) set_cpu_rng_state(rng);
      });
      step_ = m.step;
      if (m.has_best) {
        best_ = m.best;
        has_best_ = true;
      }
      std::cout << "resumed from " << run_.checkpoint.string() << " at step " << step_ << std::endl;
    }

    setup_profilers();

    summary_.set_info("model_family", meta_.family);
    summary_.set_info("model", family_->describe());
    summary_.set_info("config", config_.get_string("train.name"));
    summary_.set_info("device", device_.str());
    summary_.set_info("threads", torch::get_num_threads());
    summary_.set_info("batch", config_.get_int("train.batch"));
    summary_.set_info("sample_unit", data_.sample_unit);
    summary_.set_info("first_step", step_);
    std::cout << family_->describe() << " on " << device_.str() << ", " << torch::get_num_threads() << " threads, "
              << data_.train_indices.size() << " train / " << data_.val_indices.size() << " validation examples"
              << std::endl;
  }

  void setup_profilers() {
    const bool timing = config_.get_bool("profiling.timing");
    const bool memory = config_.get_bool("profiling.memory");
    const bool detailed = config_.get_bool("profiling.enabled");
    prof::timers().reset();
    prof::timers().set_enabled(timing);
    if (device_.is_cuda()) prof::timers().set_synchronize([] { torch::cuda::synchronize(); });
    if (timing) {
      timing_ = std::make_unique<prof::TimingProfileWriter>(prof_dir_ / "timing_profile.json",
                                                            config_.get_int("profiling.timing_every"));
    }
    const bool profile_memory = detailed && config_.get_bool("profiling.profile_memory");
    if (memory || profile_memory) {
      reporter_ = prof::default_memory_reporter();
      tracking_ = std::make_unique<prof::MemoryTrackingScope>(reporter_);
    }
    if (memory) {
      memory_ = std::make_unique<prof::MemoryProfileWriter>(prof_dir_ / "memory_profile.json",
                                                            config_.get_int("profiling.memory_every"));
    }
    if (detailed) {
      auto options = trace_options(config_, prof_dir_);
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
        reporter_->set_listener([](void* ptr, int64_t bytes, int64_t total_alloc, int64_t total_reserved, c10::Device d) {
          if (auto* t = prof::OpTracer::current()) {
            t->record_memory(ptr, bytes, total_alloc, total_reserved, d.is_cuda() ? 1 : 0, d.has_index() ? d.index() : 0);
          }
        });
      }
    }
    log_every_ = config_.get_int("train.log_every");
    prof_log_every_ = config_.get_int("profiling.log_every") > 0 ? config_.get_int("profiling.log_every") : log_every_;
  }

  std::unique_ptr<Loader> make_loader(bool train) {
    LoaderOptions o;
    o.batch = config_.get_int("train.batch");
    o.workers = static_cast<int>(config_.get_int("data.workers"));
    o.prefetch = static_cast<int>(config_.get_int("data.prefetch"));
    o.seed = static_cast<uint64_t>(config_.get_int("train.seed"));
    o.shuffle = train;
    o.drop_last = train;
    o.infinite = train;
    o.pin_memory = device_.is_cuda();
    // One batch per step: a resumed run continues the stream where the checkpoint left it.
    if (train) o.start_batch = step_;
    auto reporter = reporter_;
    o.worker_scope = [reporter]() -> std::shared_ptr<void> {
      // Named so that traces label the loader's rows (/proc/self/task/<tid>/comm).
      pthread_setname_np(pthread_self(), "rt-loader");
      if (!reporter) return nullptr;
      return std::make_shared<prof::MemoryTrackingScope>(reporter);
    };
    auto source = train ? data_.train : data_.val;
    auto indices = train ? data_.train_indices : data_.val_indices;
    auto sampler = train ? data_.train_sampler : data_.val_sampler;
    return std::make_unique<Loader>(source, o, indices, sampler);
  }

  void loop() {
    const int64_t max_steps = config_.get_int("train.max_steps");
    const int64_t val_every = config_.get_int("train.val_every");
    const int64_t save_every = config_.get_int("train.save_every");
    const int64_t inject_nan_at = config_.get_int("train.inject_nan_at_step");
    auto loader = make_loader(true);
    summary_.start();
    auto interval_start = Clock::now();
    int64_t interval_steps = 0, interval_examples = 0;

    while (step_ < max_steps && !stop_requested()) {
      if (trace_) trace_->step_begin(step_);
      reset_step_phase_times();
      const auto t0 = Clock::now();
      StepResult r;
      {
        PhaseScope whole(Phase::kStep);
        std::optional<Batch> batch;
        {
          PhaseScope data(Phase::kData);
          batch = loader->next();
        }
        if (!batch) throw Error("the training loader ended unexpectedly");
        if (step_ == inject_nan_at) batch->input.fill_(std::numeric_limits<float>::quiet_NaN());
        PhaseScope make_step(Phase::kMakeStep);
        r = family_->train_step(*batch, step_);
        batch_idx_ = batch->batch_idx;
      }
      const double step_seconds = seconds_since(t0);

      if (!std::isfinite(r.loss)) {
        failure_ = "failed: non-finite loss at step " + std::to_string(step_);
        throw Error(failure_ + " (the last good checkpoint is kept; lower train.lr or check the data)");
      }
      summary_.record_step(step_, r.loss, r.examples * data_.samples_per_example);
      record_profiles(r, step_seconds);
      for (const auto& [tag, v] : r.scalars) scalars_.add(tag, v);
      ++interval_steps;
      interval_examples += r.examples;
      ++step_;

      if (step_ % log_every_ == 0 || step_ == max_steps) {
        const double dt = seconds_since(interval_start);
        const double steps_per_s = interval_steps / dt;
        const double examples_per_s = interval_examples / dt;
        scalars_.add("train/step_time", dt / interval_steps);
        scalars_.add("train/samples_per_second", examples_per_s * data_.samples_per_example);
        scalars_.add("train/examples_per_second", examples_per_s);
        std::cout << "step " << step_ << "/" << max_steps << " | loss " << std::setprecision(5) << r.loss << " |"
                  << scalars_.line() << " | " << std::setprecision(3) << steps_per_s << " steps/s" << std::endl;
        scalars_.flush(*tb_, step_);
        interval_start = Clock::now();
        interval_steps = interval_examples = 0;
      }
      if (prof::timers().enabled() && (step_ % prof_log_every_ == 0 || step_ == max_steps)) {
        std::cout << prof::timers().format_metrics(step_) << std::flush;
        prof::timers().log_metrics(*sink_, step_);
      }
      if (step_ % val_every == 0 || step_ == max_steps) validate();
      if (step_ % save_every == 0) save(run_.path / "checkpoints" / ("step_" + std::to_string(step_) + ".ckpt"), true);
      // ProfilerStep#N spans the whole iteration (logging, validation and checkpoints
      // included), as torch's prof.step() at the end of the loop body does: every operator
      // of the training thread inside a window then lies inside a step.
      if (trace_) trace_->step_end();
    }
  }

  void record_profiles(const StepResult& r, double step_seconds) {
    if (timing_ && timing_->wants(step_)) {
      const auto& t = current_step_phase_times();
      prof::TimingEntry e;
      e.step = step_;
      e.batch_idx = batch_idx_;
      e.total_batch_time = t[Phase::kStep] > 0 ? t[Phase::kStep] : step_seconds;
      e.examples_per_second = static_cast<double>(r.examples) / e.total_batch_time;
      e.samples_per_second = e.examples_per_second * static_cast<double>(data_.samples_per_example);
      e.data_time = t[Phase::kData];
      e.forward_time = t[Phase::kForward];
      e.backward_time = t[Phase::kBackward];
      e.optimizer_time = t[Phase::kOptimizer];
      e.extra["loss_time"] = t[Phase::kLoss];
      e.extra["make_step_time"] = t[Phase::kMakeStep];
      e.extra["loss"] = r.loss;
      timing_->record(e);
    }
    if (memory_ && memory_->wants(step_)) {
      const auto sample = prof::sample_memory(reporter_.get(), device_.is_cuda() ? device_.index() : -1);
      memory_->record(step_, batch_idx_, sample);
      tb_->add_scalar("memory/cpu_bytes_in_use", static_cast<float>(sample.cpu_bytes_in_use), step_);
      tb_->add_scalar("memory/cpu_peak_bytes_in_use", static_cast<float>(sample.cpu_peak_bytes_in_use), step_);
      tb_->add_scalar("memory/rss_bytes", static_cast<float>(sample.process.rss_bytes), step_);
      tb_->add_scalar("memory/cpu_memory_percent", static_cast<float>(sample.system.used_percent), step_);
      if (device_.is_cuda()) {
        tb_->add_scalar("memory/gpu_memory_allocated_gb", static_cast<float>(sample.cuda.allocated_bytes / 1073741824.0), step_);
        tb_->add_scalar("memory/gpu_memory_reserved_gb", static_cast<float>(sample.cuda.reserved_bytes / 1073741824.0), step_);
      }
    }
  }

  void validate() {
    PhaseScope p(Phase::kValidation);
    auto loader = make_loader(false);
    const torch::Tensor rng = cpu_rng_state();
    ValidationResult v = family_->validate(*loader, step_);
    set_cpu_rng_state(rng);
    std::ostringstream line;
    line << "validation @ step " << step_ << ":";
    for (const auto& [name, value] : v.metrics) {
      tb_->add_scalar(name, static_cast<float>(value), step_);
      summary_.set_metric(name, value);
      line << " " << name << "=" << std::setprecision(5) << value;
    }
    std::cout << line.str() << std::endl;
    if (v.audio.defined() && v.sample_rate > 0) {
      auto interleaved = v.audio.to(torch::kFloat).t().contiguous();
      tb_->add_audio("audio/original_then_reconstruction", interleaved.data_ptr<float>(), interleaved.size(0),
                     static_cast<int>(interleaved.size(1)), v.sample_rate, step_);
    }
    tb_->flush();
    auto it = v.metrics.find(family_->monitor_metric());
    if (it != v.metrics.end() && std::isfinite(it->second)) {
      const bool better = !has_best_ || (family_->monitor_higher_is_better() ? it->second > best_ : it->second < best_);
      if (better) {
        best_ = it->second;
        has_best_ = true;
        save(run_.path / "checkpoints" / "best.ckpt", false);
      }
    }
  }

  void save(const fs::path& path, bool also_last) {
    PhaseScope p(Phase::kCheckpoint);
    CheckpointMeta m = meta_;
    m.step = step_;
    m.best = best_;
    m.has_best = has_best_;
    const torch::Tensor rng = cpu_rng_state();
    auto write = [&](torch::serialize::OutputArchive& a) {
      family_->save(a);
      a.write(kRngKey, rng, /*is_buffer=*/true);
    };
    save_checkpoint(path, m, write);
    if (also_last) save_checkpoint(run_.path / "checkpoints" / "last.ckpt", m, write);
  }

  void finish(const std::string& status) {
    // Flush order: trace window, profiles, checkpoint, summary — each guarded so that one
    // failing writer does not lose the others.
    auto guarded = [](const char* what, const std::function<void()>& fn) {
      try {
        fn();
      } catch (const std::exception& e) {
        std::cerr << "warning: could not write " << what << ": " << e.what() << "\n";
      }
    };
    if (trace_) guarded("the profiler trace", [&] { trace_->finish(); });
    if (reporter_) reporter_->set_listener(nullptr);
    if (timing_) guarded("timing_profile.json", [&] { timing_->close(); });
    if (memory_) guarded("memory_profile.json", [&] { memory_->close(); });
    if (family_ && !run_.path.empty() && failure_.empty() && status.rfind("failed", 0) != 0 && step_ > 0) {
      guarded("last.ckpt", [&] { save(run_.path / "checkpoints" / "last.ckpt", false); });
    }
    if (prof::timers().enabled()) summary_.set_info("timers", timers_json());
    if (!run_.path.empty()) {
      guarded("training_summary.json", [&] { summary_.write(run_.path / "training_summary.json", status); });
    }
    if (tb_) guarded("the TensorBoard events", [&] { tb_->flush(); });
    std::cout << "training " << status << " after " << summary_.total_steps() << " steps" << std::endl;
  }

  Json timers_json() const {
    Json j = Json::object();
    for (const auto& [name, s] : prof::timers().get_summary()) {
      j[name] = {{"avg_time", s.avg_time}, {"total_time", s.total_time}, {"count", s.count}};
    }
    return j;
  }

  Config config_;
  torch::Device device_{torch::kCPU};
  std::unique_ptr<ModelFamily> family_;
  TrainData data_;
  RunDir run_;
  fs::path prof_dir_;
  std::unique_ptr<TensorBoardWriter> tb_;
  std::unique_ptr<TensorBoardSink> sink_;
  CheckpointMeta meta_;
  int64_t step_ = 0, batch_idx_ = 0, log_every_ = 100, prof_log_every_ = 100;
  double best_ = 0.0;
  bool has_best_ = false;
  std::string failure_;
  ScalarAccumulator scalars_;
  prof::TrainingSummary summary_;
  std::shared_ptr<prof::MemoryReporter> reporter_;
  std::unique_ptr<prof::MemoryTrackingScope> tracking_;
  std::unique_ptr<prof::TimingProfileWriter> timing_;
  std::unique_ptr<prof::MemoryProfileWriter> memory_;
  std::unique_ptr<prof::TraceSession> trace_;
};

}  // namespace

int run_training(const Config& config) { return TrainingJob(config).run(); }

std::string model_summary(const Config& config) {
  auto family = make_model_family(config);
  return family->summary();
}

}  // namespace rt
