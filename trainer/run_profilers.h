// Every profiler of one training run, wired from the config: the accumulated timers (printed and
// logged at profiling.log_every), timing_profile.json, memory_profile.json (and the memory
// scalars in TensorBoard), and the detailed trace session (op tracer, CUPTI on CUDA). The loop
// calls a handful of methods; which profilers are on is this class's business.
//
// Timing entries wait for their step's loss (the loop reads losses at log cadence, StepLog);
// resolve_losses() completes and writes them.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/run_keys.h"
#include "profiling/memory.h"
#include "profiling/memory_categories.h"
#include "profiling/memory_metrics.h"
#include "profiling/profile_writers.h"
#include "profiling/timers.h"
#include "profiling/trace/trace_session.h"

namespace rt {

class ModelFamily;
class TensorBoardWriter;

// Where this process sits in a data-parallel job (one process: rank 0 of 1, backend "none").
struct RankInfo {
  int rank = 0;
  int world_size = 1;
  std::string backend = "none";
};

// A profile file's name for `rank`: "timing_profile.json" in a one-process job, else
// "timing_profile.rank<R>.json" (rank 0 also keeps the plain name, as a link to its file).
std::string rank_file_name(const std::string& stem, const std::string& extension, const RankInfo& rank);

class RunProfilers {
 public:
  // `dir`: where the profiles go (the run directory, or profiling.output_dir). `tb`: where
  // memory scalars and timers go (null on ranks other than 0: only rank 0 writes TensorBoard,
  // and only it prints the timers and the op tables). Every rank writes its own timing and
  // memory profile and traces (traces carry distributedInfo with `rank`). `first_step`: the
  // step the run starts at; a resumed run continues the profiles already in `dir`, keeping
  // their entries of earlier steps (JsonListFile::continue_from).
  // `keys`: the profiling.* keys; `train_log_every`: train.log_every (profiling.log_every's 0).
  RunProfilers(const ProfilingKeys& keys, int64_t train_log_every, torch::Device device,
               const std::filesystem::path& dir, TensorBoardWriter* tb, RankInfo rank = {},
               int64_t first_step = 0);
  ~RunProfilers();

  // Detailed tracing on, and a run training from step `from` ends before (or resumed after) the
  // schedule's window: a warning on stderr that no trace `when` ("will be", "was") written.
  // `max_steps`: train.max_steps.
  static void warn_of_missed_trace(const ProfilingKeys& keys, int64_t max_steps, int64_t from,
                                   const char* when);

  // memory_profile.json and the memory scalars then split the bytes by category (parameters,
  // buffers, gradients, optimizer state, activations and temporaries) with `family`'s
  // memory_holders(). No-op unless profiling.memory is on. REQUIRES: `family` outlives this.
  void watch_memory_categories(ModelFamily& family);

  // The memory reporter (null unless memory profiling or profile_memory tracing is on): loader
  // workers open a MemoryTrackingScope with it so their allocations count too.
  std::shared_ptr<prof::MemoryReporter> reporter() const { return reporter_; }

  // Detailed tracing around one iteration (ProfilerStep#N spans the whole iteration).
  void step_begin(int64_t step);
  void step_end();

  // After a step: queues its timing entry (from the per-step phase times) and samples memory.
  void after_step(int64_t step, int64_t batch_idx, int64_t examples, int64_t samples_per_example,
                  double step_seconds);
  // Completes queued timing entries with their losses ((step, loss), in order) and writes them.
  // Entries of steps from `first_nonfinite_step` on (>= 0) are dropped: the run failed there.
  void resolve_losses(const std::vector<std::pair<int64_t, double>>& losses,
                      int64_t first_nonfinite_step = -1);
  // Prints and logs the timers when profiling.log_every says so (or `force`).
  void log_timers(int64_t step, bool force);
  // Writes the timing and memory profiles' pending entries now. The trainer calls it with every
  // checkpoint, so that a run killed after it (kill -9, a lost node) and resumed from it loses
  // no profiled step up to the checkpoint's.
  void flush_profiles();

  // The out-of-memory memory snapshot (profiling.memory_snapshot_on_oom): written now, its path
  // returned; "" when none is recorded or it could not be written (a warning says why).
  std::string write_oom_snapshot();

  // Saves an open trace window and closes every profile; one failing writer does not stop the
  // others (each failure named on stderr and kept for lost_outputs()). Idempotent.
  void finish();
  // Every output this run asked for and did not get, "<what>: <why>": trace files of a window
  // that failed to write, profiles that could not be closed. Empty when nothing was lost; the
  // trainer then fails the run (exit 1, the summary's status and `lost_outputs`).
  std::vector<std::string> lost_outputs() const;
  // The timers as {name: {avg_time, total_time, count}} for training_summary.json; null when off.
  Json timers_json() const;

 private:
  // profiling.memory_snapshot_step / memory_snapshot_on_oom: starts recording the CUDA caching
  // allocator's history (throws rt::Error naming the key when this run cannot).
  void start_memory_history(const ProfilingKeys& keys, const std::filesystem::path& dir);

  torch::Device device_;
  RankInfo rank_;
  int64_t log_every_ = 100;
  std::shared_ptr<prof::MemoryReporter> reporter_;
  std::unique_ptr<prof::MemoryTrackingScope> tracking_;
  std::unique_ptr<prof::TimingProfileWriter> timing_;
  std::unique_ptr<prof::MemoryProfileWriter> memory_;
  std::unique_ptr<prof::MemoryCategories> categories_;
  std::unique_ptr<prof::TraceSession> trace_;
  std::unique_ptr<prof::ScalarSink> sink_;  // the TensorBoard writer's; null without one
  std::vector<prof::TimingEntry> pending_timing_;
  bool finished_ = false;
  std::vector<std::string> lost_;  // failures of finish()

  void guarded(const char* what, const std::function<void()>& fn);
  // The memory/… scalars go to TensorBoard at profiling.log_every's cadence (and the last
  // measurement at finish()), not at every measured step: memory_profile.json keeps every
  // step within its bounded parts, while an event file only grows (per-step scalars made it
  // ~2.8 KB a step). The interval peak logged is the largest since the previous logged step.
  void log_memory_scalars(prof::MemoryMeasurement m, int64_t step);
  std::optional<prof::PeakComposition> tb_peak_;
  std::optional<std::pair<prof::MemoryMeasurement, int64_t>> tb_pending_;
  std::filesystem::path snapshot_dir_;
  int64_t snapshot_step_ = -1;
  bool snapshot_on_oom_ = false;
  bool recording_history_ = false;
};

}  // namespace rt
