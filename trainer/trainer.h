// The generic training job: run directory, data, model family, the step loop, validation,
// checkpoints, TensorBoard scalars and the profilers — one short list of component calls.
#pragma once

#include <string>

namespace rt {

class Config;

// Runs a whole job described by `config` and returns the process exit code:
// 0 completed, 1 failed (the reason is in training_summary.json and on stderr),
// 128 + signal when stopped by SIGINT (130) or SIGTERM (143) after flushing every file.
int run_training(const Config& config);

// Refuses thread counts the machine cannot use: train.threads (intra-op) and data.workers
// (loader threads) at most 4 × `cores` each. More threads than cores only contend, and a typo
// (--threads 100000) would otherwise start tens of thousands of threads. Throws rt::Error
// naming the key, its value, where it was set and the limit.
void check_thread_limits(const Config& config, unsigned cores);

// `train --summary`: the model's module tree with parameter counts; builds no data.
std::string model_summary(const Config& config);

}  // namespace rt
