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
#include "tensorboard/tensorboard_writer.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/model_family.h"
#include "trainer/phases.h"
#include "trainer/run_dir.h"
#include "trainer/run_profilers.h"
#include "trainer/step_log.h"

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
    if (!finish(status)) exit_code = 1;
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
    FamilyContext context;
    context.device = device_;
    family_->build(context, &data_);

    run_ = prepare_run_dir(config_);
    std::cout << "run directory: " << run_.path.string() << std::endl;
    prof_dir_ = config_.get_string("profiling.output_dir").empty() ? run_.path
                                                                   : fs::path(config_.get_string("profiling.output_dir"));
    tb_ = std::make_unique<TensorBoardWriter>(run_.path);

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

    profilers_ = std::make_unique<RunProfilers>(config_, device_, prof_dir_, *tb_);
    log_every_ = config_.get_int("train.log_every");

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
    auto reporter = profilers_->reporter();
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
    interval_start_ = Clock::now();

    while (step_ < max_steps && !stop_requested()) {
      profilers_->step_begin(step_);
      reset_step_phase_times();
      const auto t0 = Clock::now();
      StepResult r;
      int64_t batch_idx = 0;
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
        batch_idx = batch->batch_idx;
      }
      const double step_seconds = seconds_since(t0);
      step_log_.record(step_, r);
      profilers_->after_step(step_, batch_idx, r.examples, data_.samples_per_example, step_seconds);
      ++step_;

      const bool last = step_ == max_steps;
      if (step_ % log_every_ == 0 || last) log_interval(max_steps);
      profilers_->log_timers(step_, last);
      if (step_ % val_every == 0 || last) validate();
      if (step_ % save_every == 0) save(run_.path / "checkpoints" / ("step_" + std::to_string(step_) + ".ckpt"), true);
      // ProfilerStep#N spans the whole iteration (logging, validation and checkpoints
      // included), as torch's prof.step() at the end of the loop body does: every operator
      // of the training thread inside a window then lies inside a step.
      profilers_->step_end();
    }
  }

  // Reads the steps recorded since the last read on the host (the loop's only host
  // synchronisation): the summary and the timing profile get their losses, and a non-finite
  // loss stops the run naming its step. Called before anything that must not see a diverged
  // model: logging, validation, a checkpoint, the end.
  void read_steps() {
    const StepLog::Flushed f = step_log_.flush();
    for (const auto& s : f.steps) {
      summary_.record_step(s.step, s.loss, s.examples * data_.samples_per_example);
      interval_steps_ += 1;
      interval_examples_ += s.examples;
      last_loss_ = s.loss;
    }
    profilers_->resolve_losses(losses_of(f), f.first_nonfinite_step);
    if (f.first_nonfinite_step >= 0) {
      failure_ = "failed: non-finite loss at step " + std::to_string(f.first_nonfinite_step);
      throw Error(failure_ + " (the last good checkpoint is kept; lower train.lr or check the data)");
    }
  }

  static std::vector<std::pair<int64_t, double>> losses_of(const StepLog::Flushed& f) {
    std::vector<std::pair<int64_t, double>> out;
    out.reserve(f.steps.size());
    for (const auto& s : f.steps) out.emplace_back(s.step, s.loss);
    return out;
  }

  // The console line and TensorBoard scalars of one log interval: means of every scalar,
  // throughput and step time.
  void log_interval(int64_t max_steps) {
    read_steps();
    if (interval_steps_ == 0) return;
    const double dt = seconds_since(interval_start_);
    const double examples_per_s = static_cast<double>(interval_examples_) / dt;
    step_log_.add_host("train/step_time", dt / static_cast<double>(interval_steps_));
    step_log_.add_host("train/samples_per_second", examples_per_s * static_cast<double>(data_.samples_per_example));
    step_log_.add_host("train/examples_per_second", examples_per_s);
    std::ostringstream line;
    line << "step " << step_ << "/" << max_steps << " | loss " << std::setprecision(5) << last_loss_ << " |"
         << std::setprecision(4);
    for (const auto& [tag, mean] : step_log_.take_means()) {
      tb_->add_scalar(tag, static_cast<float>(mean), step_);
      if (tag.rfind("train/", 0) != 0 || tag == "train/loss") line << " " << tag << "=" << mean;
    }
    line << " | " << std::setprecision(3) << static_cast<double>(interval_steps_) / dt << " steps/s";
    std::cout << line.str() << std::endl;
    interval_start_ = Clock::now();
    interval_steps_ = interval_examples_ = 0;
  }

  void validate() {
    read_steps();
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
    read_steps();
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

  // Returns false when the run turned out to have failed while finishing (a non-finite loss
  // among the steps not read yet).
  bool finish(std::string status) {
    bool ok = true;
    // The steps not read yet: a non-finite loss among them still fails the run.
    if (family_ && failure_.empty()) {
      try {
        read_steps();
      } catch (const std::exception& e) {
        status = failure_.empty() ? "failed: " + std::string(e.what()) : failure_;
        std::cerr << "error: " << e.what() << "\n";
        ok = false;
      }
    }
    // Flush order: trace window and profiles, checkpoint, summary — each guarded so that one
    // failing writer does not lose the others.
    auto guarded = [](const char* what, const std::function<void()>& fn) {
      try {
        fn();
      } catch (const std::exception& e) {
        std::cerr << "warning: could not write " << what << ": " << e.what() << "\n";
      }
    };
    if (profilers_) profilers_->finish();
    if (family_ && !run_.path.empty() && failure_.empty() && status.rfind("failed", 0) != 0 && step_ > 0) {
      guarded("last.ckpt", [&] { save(run_.path / "checkpoints" / "last.ckpt", false); });
    }
    if (profilers_) {
      if (Json timers = profilers_->timers_json(); !timers.is_null()) summary_.set_info("timers", timers);
    }
    if (!run_.path.empty()) {
      guarded("training_summary.json", [&] { summary_.write(run_.path / "training_summary.json", status); });
    }
    if (tb_) guarded("the TensorBoard events", [&] { tb_->flush(); });
    std::cout << "training " << status << " after " << summary_.total_steps() << " steps" << std::endl;
    return ok;
  }

  Config config_;
  torch::Device device_{torch::kCPU};
  std::unique_ptr<ModelFamily> family_;
  TrainData data_;
  RunDir run_;
  fs::path prof_dir_;
  std::unique_ptr<TensorBoardWriter> tb_;
  std::unique_ptr<RunProfilers> profilers_;
  CheckpointMeta meta_;
  int64_t step_ = 0, log_every_ = 100;
  double best_ = 0.0;
  bool has_best_ = false;
  std::string failure_;
  StepLog step_log_;
  Clock::time_point interval_start_;
  int64_t interval_steps_ = 0, interval_examples_ = 0;
  double last_loss_ = 0.0;
  prof::TrainingSummary summary_;
};

}  // namespace

int run_training(const Config& config) { return TrainingJob(config).run(); }

std::string model_summary(const Config& config) {
  auto family = make_model_family(config);
  return family->summary();
}

}  // namespace rt
