#include "trainer/trainer.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "data/loader.h"
#include "distributed/communicator.h"
#include "distributed/launch_env.h"
#include "distributed/parameter_broadcast.h"
#include "distributed/process_group.h"
#include "models/common/batch_slice.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/heap_retention.h"
#include "util/signals.h"
#include "profiling/memory.h"
#include "profiling/profile_writers.h"
#include "tensorboard/tensorboard_writer.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/config_history.h"
#include "trainer/model_family.h"
#include "trainer/gpu.h"
#include "trainer/phases.h"
#include "trainer/precision.h"
#include "trainer/progress.h"
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
// The global data stream's position after the last step (data/loader.h): a resume continues
// it, also with another world size.
constexpr const char* kStreamKey = "trainer_stream_position";

// Everything one job holds; the loop below is a short list of calls on it.
//
// Data parallelism (distributed/): every rank runs this job on its slice of each global batch;
// gradients are averaged by the GradientSync the families bracket backward with. Rank 0 (the
// writer) owns the run directory, checkpoints, TensorBoard, config.toml, the console and
// training_summary.json; every rank writes its own profiles. Ranks take every decision that
// ends or changes the loop together: stopping on a signal (a flag summed over ranks in each
// step's gradient all-reduce), a non-finite loss (gathered at log cadence), the best
// checkpoint (global validation metrics).
class TrainingJob {
 public:
  TrainingJob(const Config& config, dist::LaunchEnv env) : config_(config), env_(std::move(env)) {}

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
      std::cerr << rank_prefix() << "error: " << e.what_without_backtrace() << "\n";
      exit_code = 1;
      collectives_ok_ = false;
    } catch (const std::exception& e) {
      status = failure_.empty() ? "failed: " + std::string(e.what()) : failure_;
      std::cerr << rank_prefix() << "error: " << (failure_.empty() ? e.what() : failure_) << "\n";
      exit_code = 1;
      // A failure agreed by every rank (a non-finite loss) leaves the group usable; any other
      // may have left the ranks in different collectives.
      collectives_ok_ = agreed_failure_;
    }
    if (!finish(status)) exit_code = 1;
    return exit_code;
  }

 private:
  // "[rank R] " on the error lines of a data-parallel job under SLURM (the local launcher and
  // torchrun --tee prefix every rank's lines themselves).
  std::string rank_prefix() const {
    return distributed_ && env_.source == dist::LaunchEnv::Source::kSlurm ? "[rank " + std::to_string(comm_->rank()) + "] "
                                                                           : "";
  }

  void join_job() {
    dist::ProcessGroupOptions po;
    po.backend = config_.get_enum<dist::Backend>("train.distributed.backend");
    po.cuda_device = device_.is_cuda();
    po.cuda_index = device_.is_cuda() ? device_.index() : 0;
    po.timeout = std::chrono::seconds(config_.get_int("train.distributed.timeout_s"));
    po.wait = config_.get_enum<dist::WaitPolicy>("train.distributed.wait");
    po.busy_threads = torch::get_num_threads();
    po.gather_sum_bytes = config_.get_int("train.distributed.small_all_reduce_kib") * 1024;
    po.gloo_loop_batch = config_.get_string("train.distributed.gloo_loop") == "batch";
    po.exit_at_deadline = true;  // the rendezvous ends within train.distributed.timeout_s
    comm_ = dist::join_process_group(env_, po);
    distributed_ = comm_->world_size() > 1;
    writer_ = comm_->rank() == 0;
    if (!distributed_) return;
    // Every rank must train the same thing: a mismatched config stops here, naming the rank.
    dist::check_same_on_all_ranks(*comm_, "configs (the resolved config.toml)", config_.to_toml());
    auto mib = [&](const char* key) { return static_cast<int64_t>(config_.get_float(key) * 1024.0 * 1024.0); };
    sync_ = make_gradient_sync(comm_, std::max<int64_t>(1, mib("train.distributed.first_bucket_mb")),
                               std::max<int64_t>(1, mib("train.distributed.bucket_mb")));
  }

  void setup() {
    if (config_.get_bool("train.retain_freed_memory")) heap_ = retain_freed_heap_memory();
    check_thread_limits(config_, std::thread::hardware_concurrency());
    const int64_t threads = config_.get_int("train.threads");
    const int n_threads = threads > 0 ? static_cast<int>(threads) : static_cast<int>(std::thread::hardware_concurrency());
    torch::set_num_threads(std::max(1, n_threads));
    device_ = resolve_device(config_.get_string("train.device"), env_.distributed() ? env_.local_rank : 0,
                             env_.distributed());
    if (device_.is_cuda()) apply_cuda_math_settings(cuda_math_settings(config_));
    precision_ = std::make_unique<MixedPrecision>(parse_precision(config_.get_string("train.precision")), device_);
    // The same seed on every rank: the noise a model draws is the global batch's
    // (models/common/batch_slice.h), so the generators must advance together.
    torch::manual_seed(static_cast<uint64_t>(config_.get_int("train.seed")));
    join_job();

    // Counting starts before the model is built: the memory categories recognise the blocks
    // the counting allocator made, and the parameters' are made here.
    if (RunProfilers::tracks_memory(config_)) {
      early_memory_tracking_ = std::make_unique<prof::MemoryTrackingScope>(prof::default_memory_reporter());
    }
    family_ = make_model_family(config_);
    data_ = family_->make_data(config_);
    FamilyContext context;
    context.device = device_;
    context.comm = comm_;
    if (sync_) context.gradient_sync = sync_.get();
    family_->build(context, &data_);

    // The checkpoint is resolved and loaded before anything is written: a refused resume
    // (another config, tensors of other shapes, an unreadable file) leaves the original run,
    // its config.toml and `latest` as they were, and creates no run directory.
    fs::path checkpoint;
    if (writer_) checkpoint = resolve_checkpoint(config_.get_string("train.ckpt"), config_.get_string("train.out_path"));
    if (distributed_) checkpoint = dist::broadcast_text(*comm_, checkpoint.string());
    meta_.family = config_.get_string("model.family");
    meta_.signature = config_.architecture_signature();
    meta_.config_toml = config_.to_toml();
    if (!checkpoint.empty()) load_resume_checkpoint(checkpoint);
    if (!checkpoint.empty() && writer_) report_config_changes();

    // Rank 0 makes (or reopens) the run directory; the others learn where it is.
    if (writer_) run_ = prepare_run_dir(config_, checkpoint, checkpoint.empty() ? -1 : step_);
    if (!run_.previous_config.empty()) {
      out() << "the run's earlier config.toml is kept as " << run_.previous_config.string() << std::endl;
      summary_.set_info("previous_config", run_.previous_config.filename().string());
    }
    if (distributed_) run_.path = dist::broadcast_text(*comm_, run_.path.string());
    run_.checkpoint = checkpoint;
    out() << "run directory: " << run_.path.string() << std::endl;
    prof_dir_ = config_.get_string("profiling.output_dir").empty() ? run_.path
                                                                   : fs::path(config_.get_string("profiling.output_dir"));
    // Ranks on other machines write their profiles into the same path there. Every folder the
    // run writes into is proven writable now, not at its first write (run_dir.h).
    const bool profiles = config_.get_bool("profiling.timing") || config_.get_bool("profiling.memory") ||
                          config_.get_bool("profiling.enabled");
    if (profiles || !writer_) {
      check_writable_dir(prof_dir_, config_.get_string("profiling.output_dir").empty() ? "the run directory"
                                                                                       : "profiling.output_dir");
    }
    if (writer_) tb_ = std::make_unique<TensorBoardWriter>(run_.path);
    if (!checkpoint.empty()) out() << "resumed from " << checkpoint.string() << " at step " << step_ << std::endl;
    // Every rank starts from rank 0's parameters and buffers (DDP's _sync_module_states).
    for (auto& [name, module] : family_->modules()) dist::broadcast_parameters(*comm_, *module);

    RankInfo rank;
    rank.rank = comm_->rank();
    rank.world_size = comm_->world_size();
    rank.backend = comm_->backend();
    profilers_ = std::make_unique<RunProfilers>(config_, device_, prof_dir_, tb_.get(), rank, step_);
    profilers_->watch_memory_categories(*family_);
    log_every_ = config_.get_int("train.log_every");
    progress_ = std::make_unique<Progress>(family_->schedule_phases(), config_.get_int("train.max_steps"));
    if (config_.get_bool("train.smoke_test")) {
      smoke_.emplace(family_->schedule_phases(), config_.get_int("train.max_steps"));
      step_ = smoke_->first_step();
    }
    first_step_ = step_;
    if (const std::string w = trace_window_warning(first_step_); !w.empty() && writer_)
      std::cerr << "warning: " << w << " will be written\n";

    summary_.set_info("model_family", meta_.family);
    summary_.set_info("model", family_->describe());
    // The config a run was made from (its file's stem) is not the run's name (--name).
    summary_.set_info("config", config_.stack_name());
    summary_.set_info("run_name", config_.get_string("train.name"));
    summary_.set_info("device", device_.str());
    summary_.set_info("threads", torch::get_num_threads());
    summary_.set_info("heap", heap_.description.empty() ? "the C library's malloc defaults (train.retain_freed_memory = false)"
                                                         : heap_.description);
    summary_.set_info("batch", config_.get_int("train.batch"));
    summary_.set_info("world_size", comm_->world_size());
    if (distributed_) {
      summary_.set_info("global_batch", config_.get_int("train.batch") * comm_->world_size());
      summary_.set_info("launch", env_.describe());
    }
    summary_.set_info("sample_unit", data_.sample_unit);
    summary_.set_info("first_step", step_);
    out() << family_->describe() << " on " << device_.str() << ", "
          << count_text(torch::get_num_threads(), "thread") << ", " << data_.train_indices.size()
          << " train / " << data_.val_indices.size() << " validation examples";
    if (distributed_) {
      out() << "; " << comm_->world_size() << " ranks (" << comm_->backend() << ", " << comm_->wait_policy()
            << " waits), " << config_.get_int("train.batch") << " examples per rank per step";
    }
    out() << std::endl;
  }

  // A resume prints what it changes against the checkpoint's config, as a diff naming where
  // each new value was set, and records it in the summary (trainer/config_history.h).
  void report_config_changes() {
    const std::vector<ConfigChange> changes = config_changes(resumed_config_toml_, config_.to_toml());
    if (changes.empty()) return;
    Json recorded = Json::array();
    std::ostringstream text;
    text << "resuming with " << count_text(static_cast<int64_t>(changes.size()), "changed setting")
         << " (the checkpoint's → now):\n";
    for (const auto& c : changes) {
      text << "  " << c.key << ": " << (c.before.empty() ? "(absent)" : c.before) << " → "
           << (c.after.empty() ? "(absent)" : c.after);
      if (!c.after.empty()) text << "  (" << config_.origin(c.key) << ")";
      text << "\n";
      recorded.push_back({{"key", c.key}, {"before", c.before}, {"after", c.after}});
    }
    out() << text.str() << std::flush;
    summary_.set_info("config_changes", recorded);
  }

  // Every rank loads the checkpoint (the optimizer state too), then takes rank 0's weights.
  // Tensors whose shape differs from the model built from this config and database (a 64-unit
  // SSM checkpoint on a 48-unit database, a mono checkpoint on stereo data) are refused by name.
  void load_resume_checkpoint(const fs::path& checkpoint) {
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    std::vector<std::vector<int64_t>> before;
    for (auto& [name, module] : family_->modules()) {
      for (const auto& p : module->named_parameters(true)) tensors.emplace_back(name + "." + p.key(), p.value());
      for (const auto& b : module->named_buffers(true)) tensors.emplace_back(name + "." + b.key(), b.value());
    }
    for (const auto& t : tensors) before.push_back(t.second.sizes().vec());
    CheckpointMeta m = load_checkpoint(checkpoint, meta_, [&](torch::serialize::InputArchive& a) {
      family_->load(a);
      std::string mismatches;
      int count = 0;
      for (size_t i = 0; i < tensors.size(); ++i) {
        if (tensors[i].second.sizes().vec() == before[i]) continue;
        if (++count <= 4) {
          mismatches += "\n  " + tensors[i].first + ": " + shape_text(tensors[i].second.sizes().vec()) +
                        " in the checkpoint, " + shape_text(before[i]) + " in this model";
        }
      }
      if (count > 0) {
        throw Error("checkpoint '" + checkpoint.string() + "' does not fit the model built from this config and " +
                    "database (" + family_->describe() + "): " + std::to_string(count) + " tensor(s) differ in shape" +
                    mismatches + (count > 4 ? "\n  …" : "") +
                    "\nresume with the database and data settings the checkpoint was trained on");
      }
      torch::Tensor rng, stream;
      if (a.try_read(kRngKey, rng)) set_cpu_rng_state(rng);
      if (a.try_read(kStreamKey, stream)) {
        resume_position_ = StreamPosition{static_cast<uint64_t>(stream[0].item<int64_t>()), stream[1].item<int64_t>()};
        has_resume_position_ = true;
      }
    });
    step_ = m.step;
    resumed_config_toml_ = m.config_toml;
    if (m.has_best) {
      best_ = m.best;
      has_best_ = true;
    }
  }

  // "" unless detailed tracing is on and the run ends (train.max_steps) before the schedule's
  // first recorded step, counted from `from`; else what will be, or was, missing.
  std::string trace_window_warning(int64_t from) const {
    if (!config_.get_bool("profiling.enabled")) return "";
    // Steps are counted from 0 (not from a resume), as the schedule counts them.
    const int64_t first = config_.get_int("profiling.skip_first") + config_.get_int("profiling.wait") +
                          config_.get_int("profiling.warmup");
    const int64_t end = first + config_.get_int("profiling.active");
    const int64_t max_steps = config_.get_int("train.max_steps");
    const bool one_window = config_.get_int("profiling.repeat") == 1;
    if (first < max_steps && !(one_window && from >= end)) return "";
    return "profiling is on, but its first window records steps " + std::to_string(first) + "–" +
           std::to_string(end - 1) + " (skip_first + wait + warmup, then active) and this run trains steps " +
           std::to_string(from) + "–" + std::to_string(max_steps - 1) +
           ": lower profiling.skip_first or raise train.max_steps; no trace";
  }

  // The console: rank 0's standard output; the other ranks print nothing but errors.
  std::ostream& out() {
    static std::ostream discard(nullptr);
    return writer_ ? std::cout : discard;
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
    if (train || data_.shard_validation) {
      o.rank = comm_->rank();
      o.world_size = comm_->world_size();
    } else {
      o.batch *= comm_->world_size();  // every rank validates the single-process batches
    }
    // A resumed run continues the global stream where the checkpoint left it (checkpoints
    // without the position: one batch per step, the world size unchanged).
    if (train && has_resume_position_) {
      o.start = resume_position_;
    } else if (train) {
      o.start_batch = step_;
    }
    auto reporter = profilers_->reporter();
    o.worker_scope = [reporter]() -> std::shared_ptr<void> {
      // Named so that traces label the loader's rows (/proc/self/task/<tid>/comm).
      pthread_setname_np(pthread_self(), "rt-loader");
      if (!reporter) return nullptr;
      return std::make_shared<prof::MemoryTrackingScope>(reporter);
    };
    auto source = train ? data_.train : data_.val;
    auto indices = train ? data_.train_indices : data_.val_indices;
    BatchSampler sampler;
    if (auto family_sampler = train ? data_.train_sampler : data_.val_sampler) {
      const int64_t global_batch = o.batch * o.world_size;
      sampler = [family_sampler, global_batch](uint64_t epoch) { return family_sampler(epoch, global_batch); };
    }
    return std::make_unique<Loader>(source, o, indices, sampler);
  }

  void loop() {
    const int64_t max_steps = smoke_ ? smoke_->end_step() : config_.get_int("train.max_steps");
    const int64_t val_every = config_.get_int("train.val_every");
    const int64_t save_every = config_.get_int("train.save_every");
    const int64_t inject_nan_at = config_.get_int("train.inject_nan_at_step");
    const int64_t inject_nan_rank = config_.get_int("train.inject_nan_rank");
    auto loader = make_loader(true);
    summary_.start();
    interval_start_ = run_start_ = Clock::now();
    comm_at_start_ = comm_->stats();

    while (step_ < max_steps && !should_stop()) {
      profilers_->step_begin(step_);
      if (distributed_) sync_->carry(stop_and_checkpoint_flags());
      reset_step_phase_times();
      const auto t0 = Clock::now();
      StepResult r;
      int64_t batch_idx = 0;
      {
        PhaseScope whole(Phase::kStep);
        std::optional<Batch> batch;
        {
          PhaseScope data(Phase::kData);
          const auto d0 = Clock::now();
          batch = loader->next();
          data_seconds_ += seconds_since(d0);
        }
        if (!batch) throw Error("the training loader ended unexpectedly");
        if (step_ == inject_nan_at && (inject_nan_rank < 0 || inject_nan_rank == comm_->rank())) {
          // The target when the batch has one: the loss turns non-finite on this rank alone,
          // without passing through batch statistics shared with the other ranks.
          (batch->target.defined() ? batch->target : batch->input).fill_(std::numeric_limits<float>::quiet_NaN());
        }
        PhaseScope make_step(Phase::kMakeStep);
        std::optional<models::BatchSliceScope> slice;
        if (distributed_) {
          // This rank's share of the global batch: gradient weights and split-invariant noise.
          const int64_t local = batch->input.size(0);
          sync_->set_batch_share(local, batch->global_examples);
          slice.emplace(models::BatchSlice{batch->global_offset, local, batch->global_examples, comm_.get()});
        }
        try {
          MixedPrecision::StepScope amp(*precision_);
          r = family_->train_step(*batch, step_);
        } catch (const c10::OutOfMemoryError& e) {
          throw Error(out_of_memory(e.what_without_backtrace()));
        }
        batch_idx = batch->batch_idx;
        position_ = batch->position;
        agree_on_stop();
      }
      const double step_seconds = seconds_since(t0);
      train_seconds_ += step_seconds;
      ++steps_run_;
      examples_run_ += r.examples;
      step_log_.record(step_, r);
      profilers_->after_step(step_, batch_idx, r.examples, data_.samples_per_example, step_seconds);
      ++step_;
      if (smoke_) step_ = smoke_->after_step(step_ - 1, step_seconds);  // on to the next phase

      const bool last = step_ == max_steps;
      if (step_ % log_every_ == 0 || last) log_interval(max_steps);
      profilers_->log_timers(step_, last);
      if ((!smoke_ && step_ % val_every == 0) || last) validate();
      if ((!smoke_ && step_ % save_every == 0) || checkpoint_agreed_) {
        save(run_.path / "checkpoints" / ("step_" + std::to_string(step_) + ".ckpt"), true);
        if (checkpoint_agreed_) out() << "SIGUSR1: checkpoint written at step " << step_ << std::endl;
      }
      // ProfilerStep#N spans the whole iteration (logging, validation and checkpoints
      // included), as torch's prof.step() at the end of the loop body does: every operator
      // of the training thread inside a window then lies inside a step.
      profilers_->step_end();
    }
  }

  // A step ran out of device memory: where, and what to try (trainer/gpu.h).
  std::string out_of_memory(const std::string& allocator_message) {
    OutOfMemoryContext c;
    c.step = step_;
    if (const auto phase = unwound_phase()) c.step_phase = phase_name(*phase);
    c.phase_1_duration = config_.get_string("model.family") == "rave" ? config_.get_int("train.phase_1_duration") : -1;
    c.batch = config_.get_int("train.batch");
    c.device = device_.str();
    c.snapshot = profilers_->write_oom_snapshot();
    return out_of_memory_message(allocator_message, c);
  }

  // Whether to stop before the next step. One process: a stop signal. Several: what the ranks
  // agreed after the last step (agree_on_stop), so every rank stops after the same step.
  bool should_stop() {
    if (!distributed_) return stopped_ = stop_requested();
    return stopped_ = stop_agreed_;
  }

  // Several ranks: the sum over ranks of "got a stop signal", at the end of every step. The
  // count rides in the step's last gradient bucket (GradientSync::carry, set as the step
  // began), so it costs no collective of its own; a step that synchronised no gradients sends
  // it alone. Inside the step, so the collective's span lies within ProfilerStep#N (the
  // profiler plugin's Distributed view drops collectives outside every step).
  //
  // A checkpoint request (SIGUSR1) rides in the same value: each requesting rank adds
  // kCheckpointFlag, each stopping rank 1, so the sum tells both apart for any world size.
  void agree_on_stop() {
    if (!distributed_) {
      checkpoint_agreed_ = take_checkpoint_request();
      return;
    }
    std::optional<double> flags = sync_->take_carried();
    if (!flags) {
      auto flag = torch::full({1}, stop_and_checkpoint_flags(), torch::kDouble);
      comm_->all_reduce_sum(flag);
      flags = flag.item<double>();
    }
    checkpoint_agreed_ = *flags >= kCheckpointFlag;
    stop_agreed_ = std::fmod(*flags, kCheckpointFlag) > 0;
    checkpoint_requested_ = false;
  }

  // More than the ranks of a job (up to 4095), and small enough that a float32 gradient buffer,
  // which carries the sum, holds it exactly (4095 × 4096 + 4095 < 2^24).
  static constexpr double kCheckpointFlag = 4096.0;
  // This rank's contribution to the step's agreement: 1 for a stop signal, kCheckpointFlag for
  // a checkpoint request (taken once; it holds until the ranks agreed on it).
  double stop_and_checkpoint_flags() {
    if (take_checkpoint_request()) checkpoint_requested_ = true;
    return (stop_requested() ? 1.0 : 0.0) + (checkpoint_requested_ ? kCheckpointFlag : 0.0);
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
    // Several ranks: the first non-finite step over all of them stops every rank.
    int64_t first_bad = f.first_nonfinite_step;
    std::string where;  // " on rank R" / " on ranks 0, 1": the ranks whose loss was first non-finite
    if (distributed_ && collectives_ok_) {
      const auto all = torch::cat(comm_->all_gather(torch::tensor({first_bad}, torch::kLong)));
      const auto bad = all.ge(0);
      first_bad = bad.any().item<bool>() ? all.masked_select(bad).min().item<int64_t>() : -1;
      const auto ranks = all.eq(first_bad).nonzero().flatten();
      for (int64_t i = 0; i < ranks.numel(); ++i) where += (i == 0 ? "" : ", ") + std::to_string(ranks[i].item<int64_t>());
      where = (ranks.numel() == 1 ? " on rank " : " on ranks ") + where;
    }
    profilers_->resolve_losses(losses_of(f), first_bad);
    if (first_bad >= 0) {
      failure_ = "failed: non-finite loss at step " + std::to_string(first_bad) + where;
      agreed_failure_ = distributed_ && collectives_ok_;
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
    auto means = step_log_.take_means();
    if (distributed_) {
      // The means over every rank (every rank logs the same tags in the same order); the
      // throughput figures become the job's: the sum of the ranks' example rates.
      std::vector<double> local;
      for (const auto& [tag, mean] : means) local.push_back(mean);
      auto values = torch::tensor(local, torch::kDouble);
      comm_->all_reduce_sum(values);
      int64_t i = 0;
      for (auto& [tag, mean] : means) {
        const bool rate = tag == "train/samples_per_second" || tag == "train/examples_per_second";
        mean = values[i++].item<double>() / (rate ? 1.0 : static_cast<double>(comm_->world_size()));
      }
    }
    progress_->interval(step_, interval_steps_, dt);
    std::ostringstream line;
    line << "step " << step_ << "/" << max_steps << (smoke_ ? "" : progress_->percent(step_));
    if (const std::string phase = progress_->phase_at(step_ - 1); !phase.empty()) line << " | " << phase;
    line << " | loss " << std::setprecision(5) << last_loss_ << " |" << std::setprecision(4);
    for (const auto& [tag, mean] : means) {
      if (tb_) tb_->add_scalar(tag, static_cast<float>(mean), step_);
      if (tag.rfind("train/", 0) != 0 || tag == "train/loss") line << " " << tag << "=" << mean;
    }
    line << " | " << std::setprecision(3) << static_cast<double>(interval_steps_) / dt << " steps/s";
    if (!smoke_) line << " | " << progress_->timing(step_, seconds_since(run_start_));
    if (config_.get_bool("train.progress")) out() << line.str() << std::endl;
    interval_start_ = Clock::now();
    interval_steps_ = interval_examples_ = 0;
    write_running_summary();
  }

  // training_summary.json with status "running" and the figures so far, rewritten atomically
  // at log cadence: a run killed with kill -9 still says how far it came. A failing write
  // warns once and does not stop training; finish() writes the final status.
  void write_running_summary() {
    if (!writer_ || run_.path.empty()) return;
    try {
      summary_.write(run_.path / "training_summary.json", "running");
    } catch (const std::exception& e) {
      if (!running_summary_warned_) std::cerr << "warning: could not write training_summary.json: " << e.what() << "\n";
      running_summary_warned_ = true;
    }
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
      if (tb_) tb_->add_scalar(name, static_cast<float>(value), step_);
      summary_.set_metric(name, value);
      line << " " << name << "=" << std::setprecision(5) << value;
    }
    out() << line.str() << std::endl;
    if (tb_ && v.audio.defined() && v.sample_rate > 0) {
      auto interleaved = v.audio.to(torch::kFloat).t().contiguous();
      tb_->add_audio("audio/original_then_reconstruction", interleaved.data_ptr<float>(), interleaved.size(0),
                     static_cast<int>(interleaved.size(1)), v.sample_rate, step_);
    }
    if (tb_) tb_->flush();
    // The metrics are global, so every rank takes the same decision (rank 0 writes the file).
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

  // Called on every rank at the same points (read_steps() is collective); rank 0 writes.
  void save(const fs::path& path, bool also_last) {
    read_steps();
    if (!writer_) return;
    PhaseScope p(Phase::kCheckpoint);
    CheckpointMeta m = meta_;
    m.step = step_;
    m.best = best_;
    m.has_best = has_best_;
    const torch::Tensor rng = cpu_rng_state();
    const torch::Tensor stream = torch::tensor({static_cast<int64_t>(position_.epoch), position_.example}, torch::kLong);
    auto write = [&](torch::serialize::OutputArchive& a) {
      family_->save(a);
      a.write(kRngKey, rng, /*is_buffer=*/true);
      if (step_ > 0) a.write(kStreamKey, stream, /*is_buffer=*/true);
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
        std::cerr << rank_prefix() << "error: " << e.what() << "\n";
        ok = false;
        if (!agreed_failure_) collectives_ok_ = false;
      }
    }
    // Flush order: trace window and profiles, checkpoint, TensorBoard, summary — each guarded
    // so that one failing writer does not lose the others. An output the run was asked for and
    // did not get (last.ckpt, a trace, a profile) fails the run: exit 1, the summary's status
    // and `lost_outputs` name it (before: a warning, exit 0 and "completed").
    std::vector<std::string> lost;
    auto guarded = [&](const std::string& what, const std::function<void()>& fn) {
      try {
        fn();
      } catch (const std::exception& e) {
        std::cerr << rank_prefix() << "error: could not write " << what << ": " << e.what() << "\n";
        lost.push_back(what + ": " + e.what());
      }
    };
    if (profilers_) {
      profilers_->finish();
      for (const auto& l : profilers_->lost_outputs()) lost.push_back(l);
    }
    if (const std::string w = trace_window_warning(first_step_); !w.empty() && writer_)
      std::cerr << "warning: " << w << " was written\n";
    // This process's loop time split into waiting for batches and the training step itself.
    summary_.set_info("data_wait_seconds", data_seconds_);
    summary_.set_info("step_examples_per_second",
                      train_seconds_ > data_seconds_ ? static_cast<double>(examples_run_) / (train_seconds_ - data_seconds_)
                                                     : 0.0);
    if (family_ && distributed_) {
      try {
        gather_rank_figures();
      } catch (const std::exception& e) {
        std::cerr << rank_prefix() << "warning: could not gather the per-rank figures: " << e.what() << "\n";
      }
    }
    collectives_ok_ = false;  // nothing below talks to the other ranks
    if (family_ && !run_.path.empty() && failure_.empty() && status.rfind("failed", 0) != 0 && step_ > 0) {
      guarded("last.ckpt", [&] { save(run_.path / "checkpoints" / "last.ckpt", false); });
    }
    if (tb_) guarded("the TensorBoard events", [&] { tb_->flush(); });
    if (!lost.empty()) {
      ok = false;
      if (status.rfind("failed", 0) != 0) {
        status = "failed: could not write " + lost.front() +
                 (lost.size() > 1 ? " (and " + std::to_string(lost.size() - 1) + " more, see lost_outputs)" : "");
      }
    }
    if (!writer_) return ok;
    if (profilers_) {
      if (Json timers = profilers_->timers_json(); !timers.is_null()) summary_.set_info("timers", timers);
    }
    if (!lost.empty()) summary_.set_info("lost_outputs", lost);
    if (!run_.path.empty() && !write_final_summary(status)) ok = false;
    std::cout << "training " << status << " after " << summary_.total_steps() << " steps" << std::endl;
    if (smoke_) std::cout << smoke_->report(peak_memory_text()) << std::flush;
    return ok;
  }

  // --smoke_test's peak memory: the process's peak RSS, and the device's peak on CUDA.
  std::string peak_memory_text() const {
    std::ostringstream s;
    s << std::fixed << std::setprecision(1)
      << static_cast<double>(prof::read_process_memory().peak_rss_bytes) / (1024.0 * 1024.0) << " MiB resident (host)";
    if (device_.is_cuda()) {
      const prof::CudaMemory m = prof::read_cuda_memory(device_.index() < 0 ? 0 : device_.index());
      if (m.available) {
        s << ", " << static_cast<double>(m.peak_allocated_bytes) / (1024.0 * 1024.0) << " MiB allocated / "
          << static_cast<double>(m.peak_reserved_bytes) / (1024.0 * 1024.0) << " MiB reserved on " << device_.str();
      }
    }
    return s.str();
  }

  // The final training_summary.json. When it cannot be written whole (a full disk), the status
  // alone is written over the "running" file in place, in blocks the file already holds, so the
  // file never says "running" after the process ended; returns false in both cases of failure.
  bool write_final_summary(const std::string& status) {
    const fs::path path = run_.path / "training_summary.json";
    try {
      summary_.write(path, status);
      return true;
    } catch (const std::exception& e) {
      std::cerr << rank_prefix() << "error: could not write " << path.string() << ": " << e.what() << "\n";
    }
    const Json brief_json{{"status", status + " (training_summary.json could not be written whole)"},
                          {"total_steps", summary_.total_steps()}};
    const std::string brief = brief_json.dump(2) + "\n";
    if (overwrite_file_in_place(path, brief)) {
      std::cerr << "error: " << path.string() << " holds the final status only\n";
    } else {
      std::cerr << "error: " << path.string() << " could not be updated either and may still say \"running\"\n";
    }
    return false;
  }

  // training_summary.json's "distributed": every rank's throughput and communication time
  // (gathered when the ranks finished together; otherwise rank 0's own figures only).
  void gather_rank_figures() {
    const dist::CommStats c = comm_->stats();
    const double busy = c.busy_seconds - comm_at_start_.busy_seconds;
    const double wait = c.wait_seconds - comm_at_start_.wait_seconds;
    auto mine = torch::tensor({static_cast<double>(steps_run_), train_seconds_, static_cast<double>(examples_run_),
                               busy, wait, static_cast<double>(c.collectives - comm_at_start_.collectives),
                               static_cast<double>(c.bytes - comm_at_start_.bytes), data_seconds_},
                              torch::kDouble);
    std::vector<torch::Tensor> all{mine};
    if (collectives_ok_) all = comm_->all_gather(mine);
    Json per_rank = Json::array();
    double job_examples_per_s = 0, wait_share_max = 0, step_time_max = 0, step_time_min = 0;
    for (size_t r = 0; r < all.size(); ++r) {
      auto v = all[r];
      const double steps = v[0].item<double>(), seconds = v[1].item<double>(), examples = v[2].item<double>();
      const double rate = seconds > 0 ? examples / seconds : 0.0;
      const double step_time = steps > 0 ? seconds / steps : 0.0;
      const double busy_r = v[3].item<double>(), wait_r = v[4].item<double>(), data_r = v[7].item<double>();
      // Throughput of the training step alone (the loader's wait taken out): what a benchmark
      // on synthetic input, such as torch's DDP examples, measures.
      const double compute = seconds - data_r;
      per_rank.push_back({{"rank", collectives_ok_ ? static_cast<int>(r) : comm_->rank()},
                          {"steps", static_cast<int64_t>(steps)},
                          {"train_seconds", seconds},
                          {"step_time", step_time},
                          {"examples_per_second", rate},
                          {"samples_per_second", rate * static_cast<double>(data_.samples_per_example)},
                          {"data_wait_seconds", data_r},
                          {"data_wait_share", seconds > 0 ? data_r / seconds : 0.0},
                          {"step_examples_per_second", compute > 0 ? examples / compute : 0.0},
                          {"comm_busy_seconds", busy_r},
                          {"comm_wait_seconds", wait_r},
                          {"comm_busy_share", seconds > 0 ? busy_r / seconds : 0.0},
                          {"comm_wait_share", seconds > 0 ? wait_r / seconds : 0.0},
                          {"collectives", static_cast<int64_t>(v[5].item<double>())},
                          {"collective_bytes", static_cast<int64_t>(v[6].item<double>())}});
      job_examples_per_s += rate;
      wait_share_max = std::max(wait_share_max, seconds > 0 ? wait_r / seconds : 0.0);
      step_time_max = std::max(step_time_max, step_time);
      step_time_min = r == 0 ? step_time : std::min(step_time_min, step_time);
    }
    Json d = {{"backend", comm_->backend()},
              {"wait_policy", comm_->wait_policy()},
              {"event_loop_scheduling", comm_->event_loop_scheduling()},
              {"world_size", comm_->world_size()},
              {"ranks_reported", static_cast<int64_t>(all.size())},
              {"examples_per_second", job_examples_per_s},
              {"samples_per_second", job_examples_per_s * static_cast<double>(data_.samples_per_example)},
              // The share of step time a rank spent blocked on communication (not hidden by
              // backward), worst rank; and the straggler skew (slowest / fastest mean step).
              {"comm_wait_share", wait_share_max},
              {"step_time_skew", step_time_min > 0 ? step_time_max / step_time_min : 1.0},
              {"per_rank", per_rank}};
    summary_.set_info("distributed", d);
  }

  Config config_;
  dist::LaunchEnv env_;
  std::shared_ptr<dist::Communicator> comm_ = std::make_shared<dist::LocalCommunicator>();
  std::shared_ptr<GradientSync> sync_;  // null for one process (the family keeps its no-op default)
  bool distributed_ = false;
  bool writer_ = true;            // rank 0
  bool collectives_ok_ = true;    // false once the ranks may be in different collectives
  bool agreed_failure_ = false;   // the failure was decided by every rank together
  bool stopped_ = false;          // the ranks agreed to stop on a signal
  HeapRetention heap_;        // train.retain_freed_memory
  bool stop_agreed_ = false;  // agree_on_stop(): some rank got a stop signal
  bool checkpoint_requested_ = false;  // this rank got SIGUSR1, not agreed yet
  bool checkpoint_agreed_ = false;     // agree_on_stop(): some rank got SIGUSR1 during the step
  StreamPosition resume_position_, position_;
  bool has_resume_position_ = false;
  dist::CommStats comm_at_start_;
  double train_seconds_ = 0.0;
  double data_seconds_ = 0.0;  // of train_seconds_, waiting for the loader's next batch
  int64_t first_step_ = 0;     // the step this process started at (after a resume)
  int64_t steps_run_ = 0, examples_run_ = 0;
  torch::Device device_{torch::kCPU};
  std::unique_ptr<ModelFamily> family_;
  TrainData data_;
  RunDir run_;
  fs::path prof_dir_;
  std::unique_ptr<TensorBoardWriter> tb_;
  // Declared before profilers_: debug-info guards end in the reverse order of their start.
  std::unique_ptr<prof::MemoryTrackingScope> early_memory_tracking_;
  std::unique_ptr<RunProfilers> profilers_;
  std::unique_ptr<MixedPrecision> precision_;  // train.precision (trainer/precision.h)
  CheckpointMeta meta_;
  std::string resumed_config_toml_;  // the resolved config the resumed checkpoint was trained with
  int64_t step_ = 0, log_every_ = 100;
  double best_ = 0.0;
  bool has_best_ = false;
  std::string failure_;
  StepLog step_log_;
  Clock::time_point interval_start_, run_start_;
  std::unique_ptr<Progress> progress_;  // the step line's phase, ETA (trainer/progress.h)
  std::optional<SmokeTest> smoke_;      // train.smoke_test
  int64_t interval_steps_ = 0, interval_examples_ = 0;
  double last_loss_ = 0.0;
  bool running_summary_warned_ = false;
  prof::TrainingSummary summary_;
};

}  // namespace

void check_thread_limits(const Config& config, unsigned cores) {
  const int64_t n = std::max(1u, cores);
  const int64_t limit = 4 * n;
  for (const char* key : {"train.threads", "data.workers"}) {
    const int64_t v = config.get_int(key);
    if (v > limit) {
      throw Error(config.origin(key) + ": " + key + " = " + std::to_string(v) + " is more than this machine can use: at most " +
                  std::to_string(limit) + " (4 × its " + std::to_string(n) + " cores)" +
                  (std::string(key) == "train.threads" ? "; 0 uses every core" : ""));
    }
  }
}

int run_training(const Config& config) {
  return TrainingJob(config, dist::parse_launch_env(dist::process_environment())).run();
}

std::string model_summary(const Config& config) {
  auto family = make_model_family(config);
  return family->summary();
}

}  // namespace rt
