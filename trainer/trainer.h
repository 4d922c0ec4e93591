// The generic training job: run directory, data, model family, the step loop, validation,
// checkpoints, TensorBoard scalars and the profilers — one short list of component calls.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rt {

class BatchStream;
class Config;

// What only a test changes in a job: a stream around the training loader, given this process's
// rank (tests/support/nan_batches.h corrupts one step's batch to test the non-finite-loss path).
struct TrainingJobOptions {
  std::function<std::unique_ptr<BatchStream>(std::unique_ptr<BatchStream> loader, int rank)>
      wrap_train_batches;
};

// Runs a whole job described by `config` and returns the process exit code:
// 0 completed, 1 failed (the reason is in training_summary.json and on stderr),
// 128 + signal when stopped by SIGINT (130) or SIGTERM (143) after flushing every file.
int run_training(const Config& config, const TrainingJobOptions& options = {});

// Refuses thread counts the machine cannot use: train.threads (intra-op) and data.workers
// (loader threads) at most 4 × `cores` each. More threads than cores only contend, and a typo
// (--threads 100000) would otherwise start tens of thousands of threads. Throws rt::Error
// naming the key, its value, where it was set and the limit.
void check_thread_limits(const Config& config, unsigned cores);

// The `train` command: parses `args` (the command line without the program name), then runs the
// job, prints the help, the config reference, the resolved config or the model summary, or
// starts --nproc_per_node local ranks of the current executable. Returns the exit code (2 for a
// usage or config error, 128 + signal when stopped during start-up).
int train_command(std::vector<std::string> args, const TrainingJobOptions& options = {});

// `train --summary`: the model's module tree with parameter counts; builds no data.
std::string model_summary(const Config& config);

}  // namespace rt
