// What a checkpoint carries beside the model, and resuming from one: the step to run next, the
// best monitored value, the global CPU generator and the data stream's position. A resumed run
// draws the same noise and the same batches as an uninterrupted one (tests/trainer/loop_test).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "data/example.h"
#include "trainer/run_dir.h"
#include "training/checkpoint.h"
#include "util/json.h"

namespace rt {

class Config;
class ModelFamily;
class JobSummary;
struct JobStart;

// The global CPU generator (reparameterisation noise, dropout).
torch::Tensor cpu_rng_state();
void set_cpu_rng_state(const torch::Tensor& state);

// Restores the global CPU generator when it ends: validation draws from a copy, so a run that
// validates at another cadence trains on the same noise.
class CpuRngGuard {
 public:
  CpuRngGuard() : state_(cpu_rng_state()) {}
  ~CpuRngGuard() { set_cpu_rng_state(state_); }
  CpuRngGuard(const CpuRngGuard&) = delete;
  CpuRngGuard& operator=(const CpuRngGuard&) = delete;

 private:
  torch::Tensor state_;
};

// The loop's state that a checkpoint records.
struct TrainingState {
  int64_t step = 0;  // the next step to run
  double best = 0.0;
  bool has_best = false;
  // Where the global data stream stands after the last step (data/loader.h); a resume
  // continues it, also with another world size. Absent in checkpoints that predate it.
  std::optional<StreamPosition> stream;
};

struct Resumed {
  TrainingState state;
  std::string config_toml;  // the resolved config the checkpoint was trained with
};

// Loads `checkpoint` into `family` (every rank, optimizer state included) and restores the CPU
// generator. Throws rt::Error naming the file when family or signature differ from `expected`,
// and naming up to four tensors whose shape differs from the model built from this config and
// database (a 64-unit SSM checkpoint on a 48-unit database, a mono checkpoint on stereo data).
// `fix` ends the shape message: what to do instead (evaluate says it its own way).
Resumed load_resume_checkpoint(
    const std::filesystem::path& checkpoint, const CheckpointMeta& expected, ModelFamily& family,
    const std::string& fix = "resume with the database and data settings the checkpoint was trained on");

// Writes `family`, `state` and the CPU generator to `path` atomically (training/checkpoint.h).
void save_training_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta,
                              ModelFamily& family, const TrainingState& state);

// The start of a job's run: train.ckpt resolved on rank 0 (the others learn it), the
// checkpoint loaded before anything is written — a refused resume (another config, tensors of
// other shapes, an unreadable file) leaves the original run, its config.toml and `latest` as
// they were, and creates no run directory — then the run directory made or reopened by rank 0
// (the others learn where it is), every rank starting from rank 0's parameters and buffers
// (DDP's _sync_module_states). The console says what happened and `summary` records the
// config changes, the kept earlier config.toml, and its file.
struct OpenedRun {
  RunDir run;
  TrainingState state;
};
OpenedRun open_run(const Config& config, const JobStart& job, ModelFamily& family, const CheckpointMeta& meta,
                   JobSummary& summary);

// What a resume changes against the checkpoint's config: the console text ("resuming with N
// changed settings …", one line per key with where the new value was set) and the summary's
// `config_changes` array. Empty text when nothing changed.
struct ConfigChangeReport {
  std::string text;
  Json recorded = Json::array();
};
ConfigChangeReport report_config_changes(const std::string& checkpoint_toml, const Config& now);

}  // namespace rt
