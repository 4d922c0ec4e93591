// The contract between the generic training loop (trainer/trainer.h) and a model family
// (RAVE, SSM decoders). The loop never branches on the model type (as torchtitan's trainer):
// it asks the family for its data, its training step, its validation and its state.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/family_registry.h"
#include "data/example.h"
#include "distributed/communicator.h"
#include "distributed/gradient_sync.h"
#include "training/schedule_phase.h"

namespace rt {

class Config;
class Loader;
class TensorBoardWriter;

// The datasets a family trains and validates on.
struct TrainData {
  std::shared_ptr<const ExampleSource> train;
  std::shared_ptr<const ExampleSource> val;  // May be the same object as `train`.
  std::vector<size_t> train_indices;
  std::vector<size_t> val_indices;
  // Optional samplers (multi-session SSM draws each batch from one group): the batches of an
  // epoch, as dataset indices, for a batch size the trainer gives (the global batch: per-rank
  // train.batch × world size; each rank then takes its slice, data/loader.h).
  using Sampler = std::function<std::vector<std::vector<size_t>>(uint64_t epoch, int64_t batch)>;
  Sampler train_sampler;
  Sampler val_sampler;
  // The validation sampler over any list of indices (evaluate's --split train|all); null where
  // val_sampler is.
  std::function<Sampler(std::vector<size_t>)> sampler_over;
  // The database's sessions (neural groups), in the order of the group indices; empty for data
  // without groups.
  std::vector<std::string> group_names;
  // The model's natural unit for samples_per_second: audio samples per example (RAVE),
  // time bins per example (SSM).
  int64_t samples_per_example = 1;
  // Data parallelism: each rank validates its share of every validation batch (true), or every
  // rank validates every example (false: a model whose eval output depends on the batch, such
  // as BatchNorm with batch statistics in eval, which torch's SyncBatchNorm does not
  // synchronise in eval; then the single-process batches are the only way to equal metrics).
  bool shard_validation = true;
  std::string sample_unit = "samples";
};

// What a training step reports. Values stay where the step computed them (0-d tensors on the
// step's device): the trainer moves them to the host only at log cadence (train.log_every),
// before validation and before a checkpoint, so a step issues no host synchronisation
// (no aten::item / _local_scalar_dense) on its own.
struct StepScalars {
  // A 0-d tensor, detached from the graph (TensorBoard tag → value).
  void add(std::string tag, torch::Tensor value) { device.emplace_back(std::move(tag), std::move(value)); }
  // A value the host already knows (learning rate, β).
  void add(std::string tag, double value) { host.emplace_back(std::move(tag), value); }
  std::vector<std::pair<std::string, torch::Tensor>> device;
  std::vector<std::pair<std::string, double>> host;
};

struct StepResult {
  torch::Tensor loss;  // 0-d, detached: the main objective, checked for finiteness by the loop
  StepScalars scalars;
  int64_t examples = 0;
};

struct ValidationResult {
  std::map<std::string, double> metrics;  // e.g. "validation", "val/r2", "val/r2_0".
  // Optional audio excerpt (channels × frames, float in [-1, 1]) logged as a TensorBoard
  // audio summary under `audio_tag`: RAVE's reconstruction of a validation example, the prior's
  // generation.
  torch::Tensor audio;
  int sample_rate = 0;
  std::string audio_tag = "audio/original_then_reconstruction";
};

// What the trainer gives a family to build on.
struct FamilyContext {
  torch::Device device{torch::kCPU};
  GradientSync* gradient_sync = &single_process_sync();  // never null
  // The data-parallel job (one process: LocalCommunicator). A family sums its validation
  // statistics over it (exact global metrics: sufficient statistics, never a mean of per-rank
  // means) and may synchronise batch statistics (SyncBatchNorm). Never null.
  std::shared_ptr<dist::Communicator> comm = std::make_shared<dist::LocalCommunicator>();
};

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;

  // Opens the datasets named by the config. Called before build(), so that a family can take
  // shapes (channels, unit counts, groups) from the data and check them against the config.
  virtual TrainData make_data(const Config& config) = 0;

  // Creates the modules and optimizers on `context.device`. `data` is what make_data returned
  // (null when only a summary is wanted). The family keeps `context.gradient_sync` and brackets
  // every backward pass with it (distributed/gradient_sync.h).
  virtual void build(const FamilyContext& context, const TrainData* data) = 0;

  // One optimisation step; `step` counts from 0. Marks its phases with PhaseScope. Must not
  // read tensor values on the host (see StepResult).
  virtual StepResult train_step(const Batch& batch, int64_t step) = 0;

  // Gradient-free evaluation over the validation loader. In a data-parallel job each rank's
  // loader holds its share of the validation set; the metrics must be the global ones (sum the
  // sufficient statistics over context.comm) and equal on every rank. `audio` may come from any
  // rank's share (rank 0 logs it).
  virtual ValidationResult validate(Loader& val_loader, int64_t step) = 0;

  // The validation metric that selects best.ckpt, and its direction.
  virtual std::string monitor_metric() const = 0;
  virtual bool monitor_higher_is_better() const = 0;

  // Everything needed to resume exactly: modules, optimizers, schedulers, family state.
  virtual void save(torch::serialize::OutputArchive& archive) = 0;
  virtual void load(torch::serialize::InputArchive& archive) = 0;

  // Module tree with parameter counts (train --summary).
  virtual std::string summary() = 0;

  // Short description for the run's log and training_summary.json.
  virtual std::string describe() const = 0;
  // The schedule's phases by first step, for the step line and --smoke_test (trainer/progress.h).
  // Valid after build(); default: one phase.
  virtual std::vector<SchedulePhase> schedule_phases() const { return {{0, "", 2}}; }

  // --smoke_test's memory forecast (trainer/memory_forecast.h) of the phase that starts at
  // `first_step`, made before that phase starts. probe_phase_step runs that phase's heaviest
  // step on `input` (forward, losses, and backward into gradients it drops again) and changes no
  // parameter, buffer or optimizer state; it first drops the gradients the last step left (the
  // phase's first step clears them too). Returns false (the default) when the phase adds nothing
  // to the memory the phases before it held.
  virtual bool probe_phase_step(const torch::Tensor& input, int64_t first_step) {
    (void)input;
    (void)first_step;
    return false;
  }
  // The bytes that phase's optimizers allocate at their first step and keep (the moments of
  // parameters no earlier phase trained).
  virtual int64_t phase_new_state_bytes(int64_t first_step) const {
    (void)first_step;
    return 0;
  }

  // Named modules for profiling.with_modules spans.
  virtual std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> modules() = 0;

  // What holds the model's memory, for the memory categories of profiling.memory: every
  // parameter and buffer (the module tree's, not only modules()'s children) and every optimizer
  // (its state is read at each measurement). Valid after build().
  struct MemoryHolders {
    std::vector<torch::Tensor> parameters;
    std::vector<torch::Tensor> buffers;
    std::vector<const torch::optim::Optimizer*> optimizers;
  };
  virtual MemoryHolders memory_holders() = 0;
};

// The family `model.family` names, made by its registered factory (config/family_registry.h).
std::unique_ptr<ModelFamily> make_model_family(const Config& config);

}  // namespace rt
