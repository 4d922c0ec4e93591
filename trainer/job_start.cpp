#include "trainer/job_start.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <thread>

#include "config/config.h"
#include "distributed/process_group.h"
#include "trainer/gpu.h"
#include "trainer/trainer.h"
#include "training/model_family.h"
#include "util/error.h"
#include "util/thread_limits.h"

namespace rt {

JobStart start_job(const Config& config, const dist::LaunchEnv& env) {
  JobStart job;
  job.keys = run_keys(config);
  job.profiling = profiling_keys(config);
  const RunKeys& k = job.keys;
  if (k.retain_freed_memory) job.heap = retain_freed_heap_memory();
  check_thread_limits(config, static_cast<unsigned>(machine_cores()));
  const int64_t threads = k.threads;
  const int n_threads =
      threads > 0 ? static_cast<int>(threads) : static_cast<int>(std::thread::hardware_concurrency());
  torch::set_num_threads(std::max(1, n_threads));
  job.device = resolve_device(k.device, env.distributed() ? env.local_rank : 0, env.distributed());
  if (job.device.is_cuda()) apply_cuda_math_settings(cuda_math_settings(k));
  job.precision = std::make_unique<MixedPrecision>(parse_precision(k.precision), job.device);
  torch::manual_seed(static_cast<uint64_t>(k.seed));

  const DistributedKeys d = distributed_keys(config);
  dist::ProcessGroupOptions po;
  po.backend = parse_enum<dist::Backend>(d.backend, "train.distributed.backend");
  po.cuda_device = job.device.is_cuda();
  po.cuda_index = job.device.is_cuda() ? job.device.index() : 0;
  po.timeout = std::chrono::seconds(d.timeout_s);
  po.wait = parse_enum<dist::WaitPolicy>(d.wait, "train.distributed.wait");
  po.busy_threads = torch::get_num_threads();
  po.gather_sum_bytes = d.small_all_reduce_kib * 1024;
  po.gloo_loop_batch = d.gloo_loop == "batch";
  po.exit_at_deadline = true;  // the rendezvous ends within train.distributed.timeout_s
  job.comm = dist::join_process_group(env, po);
  job.distributed = job.comm->world_size() > 1;
  job.writer = job.comm->rank() == 0;
  if (job.distributed && env.source == dist::LaunchEnv::Source::kSlurm) {
    job.error_prefix = "[rank " + std::to_string(job.comm->rank()) + "] ";
  }
  if (!job.distributed) return job;
  dist::check_same_on_all_ranks(*job.comm, "configs (the resolved config.toml)", config.to_toml());
  auto bytes = [](double mb) { return std::max<int64_t>(1, static_cast<int64_t>(mb * 1024.0 * 1024.0)); };
  job.sync = make_gradient_sync(job.comm, bytes(d.first_bucket_mb), bytes(d.bucket_mb));
  return job;
}

std::ostream& JobStart::console() const {
  static std::ostream discard(nullptr);
  return writer ? std::cout : discard;
}

std::string JobStart::rank_label() const {
  return comm->world_size() > 1 ? "rank " + std::to_string(comm->rank()) + ": " : "";
}

void share_global_batch(const JobStart& job, const Batch& batch,
                        std::optional<models::BatchSliceScope>& slice) {
  job.sync->set_batch_share(batch.input.size(0), batch.global_examples);
  slice.emplace(
      models::BatchSlice{batch.global_offset, batch.input.size(0), batch.global_examples, job.comm.get()});
}

std::unique_ptr<ModelFamily> build_family(const Config& config, const JobStart& job, TrainData* data) {
  std::unique_ptr<ModelFamily> family = make_model_family(config);
  *data = family->make_data(config);
  FamilyContext context;
  context.device = job.device;
  context.comm = job.comm;
  if (job.sync) context.gradient_sync = job.sync.get();
  family->build(context, data);
  return family;
}

std::unique_ptr<Loader> make_job_loader(const TrainData& data, const JobStart& job, bool train,
                                        const TrainingState& resumed,
                                        std::shared_ptr<prof::MemoryReporter> memory) {
  LoaderOptions o;
  o.batch = job.keys.batch;
  o.workers = static_cast<int>(job.keys.workers);
  o.prefetch = static_cast<int>(job.keys.prefetch);
  o.seed = static_cast<uint64_t>(job.keys.seed);
  o.shuffle = o.drop_last = o.infinite = train;
  o.pin_memory = job.device.is_cuda();
  if (train || data.shard_validation) {
    o.rank = job.comm->rank();
    o.world_size = job.comm->world_size();
  } else {
    o.batch *= job.comm->world_size();
  }
  if (train && resumed.stream) {
    o.start = *resumed.stream;
  } else if (train) {
    o.start_batch = resumed.step;
  }
  o.worker_scope = [memory]() -> std::shared_ptr<void> {
    // Named so that traces label the loader's rows (/proc/self/task/<tid>/comm).
    pthread_setname_np(pthread_self(), "rt-loader");
    if (!memory) return nullptr;
    return std::make_shared<prof::MemoryTrackingScope>(memory);
  };
  BatchSampler sampler;
  if (auto family_sampler = train ? data.train_sampler : data.val_sampler) {
    const int64_t global_batch = o.batch * o.world_size;
    sampler = [family_sampler, global_batch](uint64_t epoch) { return family_sampler(epoch, global_batch); };
  }
  return std::make_unique<Loader>(train ? data.train : data.val, o,
                                  train ? data.train_indices : data.val_indices, sampler);
}

void check_thread_limits(const Config& config, unsigned cores) {
  const int64_t n = std::max(1u, cores);
  const int64_t limit = max_thread_count(n);
  const RunKeys k = run_keys(config);
  for (const auto& [key, v] :
       {std::pair<std::string, int64_t>{"train.threads", k.threads}, {"data.workers", k.workers}}) {
    if (v > limit) {
      throw Error(config.origin(key) + ": " + key + " = " + std::to_string(v) +
                  " is more than this machine can use: at most " + std::to_string(limit) + " (4 × its " +
                  std::to_string(n) + " cores)" + (key == "train.threads" ? "; 0 uses every core" : ""));
    }
  }
}

}  // namespace rt
