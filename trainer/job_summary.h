// training_summary.json as the job fills it: what ran (model, device, threads, world size),
// the loop's own figures (time waiting for data, step throughput), every rank's throughput and
// communication time in a data-parallel job, and the writes: "running" at log cadence, the
// final status at the end (prof::TrainingSummary holds the steps, losses and metrics).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/launch_env.h"
#include "profiling/profile_writers.h"

namespace rt {

class Config;
class TensorBoardWriter;
struct ValidationResult;
struct JobStart;
struct TrainData;

// What this process's loop did (the trainer counts; the summary reports).
struct LoopFigures {
  int64_t steps = 0;
  int64_t examples = 0;
  double train_seconds = 0.0;  // the steps, waiting for data included
  double data_seconds = 0.0;   // of train_seconds, waiting for the loader's next batch
  int64_t samples_per_example = 1;
  dist::CommStats comm_at_start;  // the communicator's figures when the loop began

  void count_step(double step_seconds, int64_t step_examples) {
    ++steps;
    examples += step_examples;
    train_seconds += step_seconds;
  }
  // Throughput of the training step alone (the loader's wait taken out): what a benchmark on
  // synthetic input, such as torch's DDP examples, measures.
  double step_examples_per_second() const {
    return train_seconds > data_seconds ? static_cast<double>(examples) / (train_seconds - data_seconds)
                                        : 0.0;
  }
};

class LostOutputs;

class JobSummary {
 public:
  // `file`: training_summary.json, or empty on the ranks that write none (rank > 0).
  void set_file(std::filesystem::path file) { file_ = std::move(file); }
  prof::TrainingSummary& summary() { return summary_; }

  // The summary with status "running" and the figures so far, rewritten atomically at log
  // cadence: a run killed with kill -9 still says how far it came. A failing write warns once
  // and does not stop training.
  void write_running();
  // The final summary. When it cannot be written whole (a full disk), the status alone is
  // written over the "running" file in place, in blocks the file already holds, so the file
  // never says "running" after the process ended. False when either write failed.
  bool write_final(const std::string& status, const std::string& rank_prefix);
  // The end of the run on rank 0: `timers` (null when off) and the outputs lost into the
  // summary, the final summary written when `write` (the run directory exists), and the
  // console's "training <status> after N steps". False when the write failed.
  bool close(const std::string& status, const Json& timers, const LostOutputs& lost, bool write,
             const std::string& rank_prefix);

  // The loop's figures: data_wait_seconds and step_examples_per_second; in a data-parallel job
  // also record_ranks(), and a warning instead when the gather fails.
  void record_loop(const LoopFigures& loop, dist::Communicator& comm, bool gather,
                   const std::string& rank_prefix);

  // "distributed": every rank's throughput and communication time since the loop began,
  // gathered with one all_gather when `gather` (the ranks finished together), else this rank's.
  void record_ranks(dist::Communicator& comm, bool gather, const LoopFigures& loop);

 private:
  std::filesystem::path file_;
  prof::TrainingSummary summary_;
  bool running_warned_ = false;
};

// The outputs a run was asked for and did not get (last.ckpt, a trace, a profile): each write
// guarded, so that one failing writer does not lose the others, and the failure named on
// stderr; the run then fails (exit 1, the summary's status and `lost_outputs`).
class LostOutputs {
 public:
  explicit LostOutputs(std::string rank_prefix) : rank_prefix_(std::move(rank_prefix)) {}
  void guard(const std::string& what, const std::function<void()>& write);
  void add(const std::string& lost) { lost_.push_back(lost); }
  bool empty() const { return lost_.empty(); }
  const std::vector<std::string>& all() const { return lost_; }
  // `status` unless it is a failure already: "failed: could not write <the first> (and N more…)".
  std::string status(const std::string& status) const;

 private:
  std::string rank_prefix_;
  std::vector<std::string> lost_;
};

// A validation's metrics: the console line, TensorBoard scalars (and the audio example when
// the family returned one), the summary's metrics.
void report_validation(const ValidationResult& v, int64_t step, TensorBoardWriter* tb,
                       prof::TrainingSummary& summary, std::ostream& console);

// The summary's description of the job (model, config, device, threads, heap, batch, world
// size, launch, the first step) and the console's line saying the same.
void describe_job(prof::TrainingSummary& summary, const Config& config, const std::string& model,
                  const JobStart& job, const TrainData& data, const dist::LaunchEnv& env, int64_t first_step);
std::string job_line(const std::string& model, const JobStart& job, const TrainData& data);

// --smoke_test's peak memory: the process's peak RSS, and the device's peak on CUDA.
std::string peak_memory_text(const torch::Device& device);

}  // namespace rt
