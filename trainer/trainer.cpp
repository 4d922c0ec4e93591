#include "trainer/trainer.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <iostream>
#include <optional>

#include "config/config.h"
#include "data/loader.h"
#include "models/common/batch_slice.h"
#include "tensorboard/tensorboard_writer.h"
#include "trainer/gpu.h"
#include "trainer/job_start.h"
#include "trainer/job_summary.h"
#include "trainer/memory_forecast.h"
#include "trainer/progress.h"
#include "trainer/rank_agreement.h"
#include "trainer/resume.h"
#include "trainer/run_dir.h"
#include "trainer/run_profilers.h"
#include "trainer/step_log.h"
#include "training/model_family.h"
#include "training/phases.h"
#include "util/error.h"
#include "util/profile_schema.h"
#include "util/signals.h"

namespace rt {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One job: the set-up, the loop, and the end, as calls on its components. Rank 0 (the writer)
// owns the run directory, checkpoints, TensorBoard, config.toml, the console and
// training_summary.json; every rank writes its own profiles. Ranks take every decision that
// ends or changes the loop together (trainer/rank_agreement.h): stopping on a signal, a
// non-finite loss, the best checkpoint (global validation metrics).
class TrainingJob {
 public:
  TrainingJob(const Config& config, dist::LaunchEnv env, TrainingJobOptions options)
      : config_(config), env_(std::move(env)), options_(std::move(options)) {}

  int run() {
    install_stop_signal_handlers();
    setup();
    std::string status = "completed";
    int exit_code = 0;
    try {
      loop();
      if (stopped_) {
        status = "interrupted";
        exit_code = 128 + (stop_signal() != 0 ? stop_signal() : SIGTERM);
      }
    } catch (const c10::Error& e) {
      status = "failed: " + std::string(e.what_without_backtrace());
      std::cerr << job_.error_prefix << "error: " << e.what_without_backtrace() << "\n";
      exit_code = 1;
      collectives_ok_ = false;
    } catch (const std::exception& e) {
      status = failure_.empty() ? "failed: " + std::string(e.what()) : failure_;
      std::cerr << job_.error_prefix << "error: " << (failure_.empty() ? e.what() : failure_) << "\n";
      exit_code = 1;
      // A failure agreed by every rank (a non-finite loss) leaves the group usable; any other
      // may have left the ranks in different collectives.
      collectives_ok_ = agreed_failure_;
    }
    if (!finish(status)) exit_code = 1;
    if (exit_code == 0 && smoke_ && smoke_->forecast_unfit()) {
      std::cerr << job_.error_prefix
                << "error: --smoke_test: a later phase is forecast not to fit in memory (the forecast above "
                   "says what to change)\n";
      exit_code = 1;
    }
    return exit_code;
  }

 private:
  void setup() {
    job_ = start_job(config_, env_);
    // Counting starts before the model is built: the memory categories recognise the blocks
    // the counting allocator made, and the parameters' are made here.
    if (job_.profiling.tracks_memory()) {
      early_memory_tracking_ = std::make_unique<prof::MemoryTrackingScope>(prof::default_memory_reporter());
    }
    family_ = build_family(config_, job_, &data_);
    loop_.samples_per_example = data_.samples_per_example;

    meta_ = CheckpointMeta{keys().family, config_.architecture_signature(), config_.to_toml()};
    OpenedRun opened = open_run(config_, job_, *family_, meta_, summary_);
    run_ = std::move(opened.run);
    state_ = opened.state;
    const fs::path prof_dir = profile_dir(job_.profiling, run_.path, job_.writer);
    if (job_.writer) tb_ = std::make_unique<TensorBoardWriter>(run_.path);
    const RankInfo rank{job_.comm->rank(), job_.comm->world_size(), job_.comm->backend()};
    profilers_ = std::make_unique<RunProfilers>(job_.profiling, keys().log_every, job_.device, prof_dir,
                                                tb_.get(), rank, state_.step);
    profilers_->watch_memory_categories(*family_);
    progress_ = std::make_unique<Progress>(family_->schedule_phases(), keys().max_steps);
    if (keys().smoke_test) {
      smoke_.emplace(family_->schedule_phases(), keys().max_steps);
      state_.step = smoke_->first_step();
    }
    first_step_ = state_.step;
    if (job_.writer)
      RunProfilers::warn_of_missed_trace(job_.profiling, keys().max_steps, first_step_, "will be");
    describe_job(summary_.summary(), config_, family_->describe(), job_, data_, env_, first_step_);
    job_.console() << job_line(family_->describe(), job_, data_) << std::endl;
  }

  void loop() {
    const int64_t max_steps = smoke_ ? smoke_->end_step() : keys().max_steps;
    const int64_t val_every = keys().val_every, save_every = keys().save_every, log_every = keys().log_every;
    std::unique_ptr<BatchStream> batches = make_job_loader(data_, job_, true, state_, profilers_->reporter());
    if (options_.wrap_train_batches)
      batches = options_.wrap_train_batches(std::move(batches), job_.comm->rank());
    summary_.summary().start();
    interval_start_ = run_start_ = Clock::now();
    loop_.comm_at_start = job_.comm->stats();

    while (state_.step < max_steps && !(stopped_ = stops_.stop(*job_.comm))) {
      profilers_->step_begin(state_.step);
      if (job_.distributed) job_.sync->carry(stops_.local_flags());
      reset_step_phase_times();
      const auto t0 = Clock::now();
      StepResult r;
      int64_t batch_idx = 0;
      {
        PhaseScope whole(Phase::kStep);
        std::optional<Batch> batch = next_batch(*batches);
        PhaseScope make_step(Phase::kMakeStep);
        std::optional<models::BatchSliceScope> slice;
        if (job_.distributed) share_global_batch(job_, *batch, slice);
        try {
          MixedPrecision::StepScope amp(*job_.precision);
          if (smoke_ && smoke_->starts_later_phase(state_.step))
            forecast_smoke_phase(*smoke_, *family_, batch->input, state_.step,
                                 progress_->phase_at(state_.step), job_.device, keys().smoke_test_memory_gib,
                                 job_.rank_label());
          r = family_->train_step(*batch, state_.step);
        } catch (const c10::OutOfMemoryError& e) {
          // Where, and what to try (trainer/gpu.h).
          throw Error(
              out_of_memory_message(e.what_without_backtrace(),
                                    out_of_memory_context(keys(), family_->schedule_phases(), state_.step,
                                                          job_.device, profilers_->write_oom_snapshot())));
        }
        batch_idx = batch->batch_idx;
        state_.stream = batch->position;
        stops_.after_step(*job_.comm, job_.distributed ? job_.sync->take_carried() : std::nullopt);
      }
      const double step_seconds = seconds_since(t0);
      loop_.count_step(step_seconds, r.examples);
      step_log_.record(state_.step, r);
      profilers_->after_step(state_.step, batch_idx, r.examples, data_.samples_per_example, step_seconds);
      ++state_.step;
      if (smoke_) state_.step = smoke_->after_step(state_.step - 1, step_seconds);  // on to the next phase

      const int64_t step = state_.step;
      const bool last = step == max_steps;
      if (step % log_every == 0 || last) log_interval(max_steps);
      profilers_->log_timers(step, last);
      if ((!smoke_ && step % val_every == 0) || last) validate();
      if ((!smoke_ && step % save_every == 0) || stops_.checkpoint()) {
        save(run_.path / "checkpoints" / ("step_" + std::to_string(step) + ".ckpt"), true);
        if (stops_.checkpoint())
          job_.console() << "SIGUSR1: checkpoint written at step " << step << std::endl;
      }
      // ProfilerStep#N spans the whole iteration (logging, validation and checkpoints
      // included), as torch's prof.step() at the end of the loop body does.
      profilers_->step_end();
    }
  }

  std::optional<Batch> next_batch(BatchStream& batches) {
    PhaseScope data(Phase::kData);
    const auto d0 = Clock::now();
    std::optional<Batch> batch = batches.next();
    loop_.data_seconds += seconds_since(d0);
    if (!batch) throw Error("the training loader ended unexpectedly");
    return batch;
  }

  // Reads the steps recorded since the last read on the host (the loop's only host
  // synchronisation): the summary and the timing profile get their losses, and a non-finite
  // loss stops the run naming its step (the first over all ranks). Called before anything that
  // must not see a diverged model: logging, validation, a checkpoint, the end.
  void read_steps() {
    const StepLog::Flushed f = step_log_.flush();
    std::vector<std::pair<int64_t, double>> losses;
    for (const auto& s : f.steps) {
      summary_.summary().record_step(s.step, s.loss, s.examples * data_.samples_per_example);
      losses.emplace_back(s.step, s.loss);
    }
    const NonFiniteStep bad = job_.distributed && collectives_ok_
                                  ? first_nonfinite_over_ranks(*job_.comm, f.first_nonfinite_step)
                                  : NonFiniteStep{f.first_nonfinite_step, ""};
    profilers_->resolve_losses(losses, bad.step);
    if (bad.step >= 0) {
      failure_ = "failed: non-finite loss at step " + std::to_string(bad.step) + bad.where;
      agreed_failure_ = job_.distributed && collectives_ok_;
      throw Error(failure_ + " (the last good checkpoint is kept; lower train.lr or check the data)");
    }
  }

  // The console line and TensorBoard scalars of one log interval: every scalar's mean over the
  // interval and the ranks, throughput (the job's: the sum over ranks) and step time.
  void log_interval(int64_t max_steps) {
    read_steps();
    const int64_t steps = step_log_.interval_steps();
    if (steps == 0) return;
    const double dt = seconds_since(interval_start_);
    auto means = step_log_.end_interval(dt, data_.samples_per_example);
    mean_over_ranks(*job_.comm, means, {"train/samples_per_second", "train/examples_per_second"});
    if (tb_) {
      for (const auto& [tag, mean] : means) tb_->add_scalar(tag, static_cast<float>(mean), state_.step);
    }
    progress_->interval(state_.step, steps, dt);
    if (keys().progress) {
      job_.console() << progress_->line(state_.step, max_steps, step_log_.last_loss(), means,
                                        static_cast<double>(steps) / dt,
                                        smoke_ ? -1.0 : seconds_since(run_start_))
                     << std::endl;
    }
    interval_start_ = Clock::now();
    summary_.write_running();
  }

  void validate() {
    read_steps();
    PhaseScope p(Phase::kValidation);
    auto loader = make_job_loader(data_, job_, false, state_, profilers_->reporter());
    ValidationResult v;
    {
      CpuRngGuard rng;  // validation draws from a copy of the training noise
      v = family_->validate(*loader, state_.step);
    }
    report_validation(v, state_.step, tb_.get(), summary_.summary(), job_.console());
    // The metrics are global, so every rank takes the same decision (rank 0 writes the file).
    auto it = v.metrics.find(family_->monitor_metric());
    if (it == v.metrics.end() || !std::isfinite(it->second)) return;
    if (!state_.has_best ||
        (family_->monitor_higher_is_better() ? it->second > state_.best : it->second < state_.best)) {
      state_.best = it->second;
      state_.has_best = true;
      save(run_.path / "checkpoints" / "best.ckpt", false);
    }
  }

  // Called on every rank at the same points (read_steps() is collective); rank 0 writes.
  void save(const fs::path& path, bool also_last) {
    read_steps();
    // Every rank's profiles hold every step up to the checkpoint's before it exists: a run
    // killed after it and resumed from it continues them without a gap.
    if (profilers_) profilers_->flush_profiles();
    if (!job_.writer) return;
    PhaseScope p(Phase::kCheckpoint);
    TrainingState state = state_;
    if (state.step == 0) state.stream.reset();
    save_training_checkpoint(path, meta_, *family_, state);
    if (also_last) save_training_checkpoint(run_.path / "checkpoints" / "last.ckpt", meta_, *family_, state);
  }

  // Flush order: the steps not read yet (a non-finite loss among them still fails the run),
  // trace window and profiles, the ranks' figures, last.ckpt, TensorBoard, the summary — each
  // guarded so that one failing writer does not lose the others. An output the run was asked
  // for and did not get fails the run: exit 1, the summary's status and `lost_outputs` name it.
  // Returns false when the run turned out to have failed while finishing.
  bool finish(std::string status) {
    bool ok = true;
    if (family_ && failure_.empty()) {
      try {
        read_steps();
      } catch (const std::exception& e) {
        status = failure_.empty() ? "failed: " + std::string(e.what()) : failure_;
        std::cerr << job_.error_prefix << "error: " << e.what() << "\n";
        ok = false;
        if (!agreed_failure_) collectives_ok_ = false;
      }
    }
    LostOutputs lost(job_.error_prefix);
    if (profilers_) {
      profilers_->finish();
      for (const auto& l : profilers_->lost_outputs()) lost.add(l);
    }
    if (job_.writer) RunProfilers::warn_of_missed_trace(job_.profiling, keys().max_steps, first_step_, "was");
    if (family_) summary_.record_loop(loop_, *job_.comm, collectives_ok_, job_.error_prefix);
    collectives_ok_ = false;  // nothing below talks to the other ranks
    if (family_ && !run_.path.empty() && failure_.empty() && status.rfind("failed", 0) != 0 &&
        state_.step > 0) {
      lost.guard("last.ckpt", [&] { save(run_.path / "checkpoints" / "last.ckpt", false); });
    }
    if (tb_) lost.guard("the TensorBoard events", [&] { tb_->flush(); });
    if (!lost.empty()) ok = false;
    status = lost.status(status);
    if (!job_.writer) return ok;
    if (!summary_.close(status, profilers_ ? profilers_->timers_json() : Json(), lost, !run_.path.empty(),
                        job_.error_prefix))
      ok = false;
    if (smoke_) std::cout << smoke_->report(peak_memory_text(job_.device)) << std::flush;
    return ok;
  }

  // The common keys, read once by start_job (config/run_keys.h).
  const RunKeys& keys() const { return job_.keys; }

  Config config_;
  dist::LaunchEnv env_;
  TrainingJobOptions options_;
  JobStart job_;
  bool collectives_ok_ = true;   // false once the ranks may be in different collectives
  bool agreed_failure_ = false;  // the failure was decided by every rank together
  bool stopped_ = false;         // the loop stopped on a signal
  StopAgreement stops_;
  LoopFigures loop_;
  int64_t first_step_ = 0;  // the step this process started at (after a resume)
  std::unique_ptr<ModelFamily> family_;
  TrainData data_;
  RunDir run_;
  std::unique_ptr<TensorBoardWriter> tb_;
  // Declared before profilers_: debug-info guards end in the reverse order of their start.
  std::unique_ptr<prof::MemoryTrackingScope> early_memory_tracking_;
  std::unique_ptr<RunProfilers> profilers_;
  CheckpointMeta meta_;
  TrainingState state_;
  std::string failure_;
  StepLog step_log_;
  Clock::time_point interval_start_, run_start_;
  std::unique_ptr<Progress> progress_;  // the step line's phase, ETA (trainer/progress.h)
  std::optional<SmokeTest> smoke_;      // train.smoke_test
  JobSummary summary_;
};

}  // namespace

int run_training(const Config& config, const TrainingJobOptions& options) {
  return TrainingJob(config, dist::parse_launch_env(dist::process_environment()), options).run();
}

std::string model_summary(const Config& config) { return make_model_family(config)->summary(); }

}  // namespace rt
