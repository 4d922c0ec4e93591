// What a training job runs on, set up before its model: the heap policy, the threads, the
// device and its math settings, the precision, the seed and the process group. Data
// parallelism (distributed/): every rank runs the job on its slice of each global batch, and
// gradients are averaged by the GradientSync the families bracket backward with.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "config/run_keys.h"
#include "data/loader.h"
#include "distributed/communicator.h"
#include "distributed/gradient_sync.h"
#include "distributed/launch_env.h"
#include "models/common/batch_slice.h"
#include "profiling/memory.h"
#include "trainer/precision.h"
#include "trainer/resume.h"
#include "util/heap_retention.h"

namespace rt {

class Config;
class ModelFamily;
struct TrainData;

struct JobStart {
  // The common keys, read once when the job starts (config/run_keys.h).
  RunKeys keys;
  ProfilingKeys profiling;
  HeapRetention heap;  // train.retain_freed_memory
  torch::Device device{torch::kCPU};
  std::unique_ptr<MixedPrecision> precision;  // train.precision (trainer/precision.h)
  std::shared_ptr<dist::Communicator> comm = std::make_shared<dist::LocalCommunicator>();
  std::shared_ptr<GradientSync> sync;  // null for one process (the family keeps its no-op default)
  bool distributed = false;
  bool writer = true;  // rank 0: the run directory, checkpoints, TensorBoard, the console
  // "[rank R] " on the error lines of a data-parallel job under SLURM (the local launcher and
  // torchrun --tee prefix every rank's lines themselves); "" otherwise.
  std::string error_prefix;

  // The console: rank 0's standard output; the other ranks print nothing but errors.
  std::ostream& console() const;
  // "rank R: " before a rank's own lines in a job of several ranks; "" for one process.
  std::string rank_label() const;
};

// This rank's share of the global `batch`: the gradient weights (GradientSync) and the
// split-invariant noise (models/common/batch_slice.h), for as long as `slice` lives.
void share_global_batch(const JobStart& job, const Batch& batch,
                        std::optional<models::BatchSliceScope>& slice);

// Sets the process up and joins the job's process group (every rank must bring the same
// resolved config: a mismatch stops here, naming the rank). The same seed on every rank: the
// noise a model draws is the global batch's (models/common/batch_slice.h), so the generators
// advance together.
JobStart start_job(const Config& config, const dist::LaunchEnv& env);

// The model family `config` names, its data (`data`) and its modules on the job's device,
// with the job's gradient synchronisation.
std::unique_ptr<ModelFamily> build_family(const Config& config, const JobStart& job, TrainData* data);

// The training (`train`) or validation loader of a job. Training shards each global batch over
// the ranks and continues the stream where `resumed` left it (a checkpoint without the
// position: one batch per step from `resumed.step`, the world size unchanged). Validation
// shards too, unless the family validates every example on every rank (then each rank runs the
// single-process batches). Loader threads are named rt-loader and counted by `memory`.
std::unique_ptr<Loader> make_job_loader(const TrainData& data, const JobStart& job, bool train,
                                        const TrainingState& resumed,
                                        std::shared_ptr<prof::MemoryReporter> memory);

}  // namespace rt
