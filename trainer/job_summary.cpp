#include "trainer/job_summary.h"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "config/config.h"
#include "models/common/row_linear.h"
#include "profiling/memory.h"
#include "tensorboard/tensorboard_writer.h"
#include "trainer/job_start.h"
#include "training/model_family.h"
#include "util/atomic_file.h"
#include "util/blas_kernels.h"
#include "util/error.h"
#include "util/json.h"
#include "util/printable.h"
#include "util/profile_schema.h"

namespace rt {
namespace S = profile_schema::summary;

void JobSummary::write_running() {
  if (file_.empty()) return;
  try {
    summary_.write(file_, "running");
  } catch (const std::exception& e) {
    if (!running_warned_) std::cerr << "warning: could not write training_summary.json: " << e.what() << "\n";
    running_warned_ = true;
  }
}

bool JobSummary::close(const std::string& status, const Json& timers, const LostOutputs& lost, bool write,
                       const std::string& rank_prefix) {
  if (!timers.is_null()) summary_.set_info(S::kTimers, timers);
  if (!lost.empty()) summary_.set_info(S::kLostOutputs, lost.all());
  const bool ok = !write || write_final(status, rank_prefix);
  std::cout << "training " << status << " after " << summary_.total_steps() << " steps" << std::endl;
  return ok;
}

bool JobSummary::write_final(const std::string& status, const std::string& rank_prefix) {
  if (file_.empty()) return true;
  try {
    summary_.write(file_, status);
    return true;
  } catch (const std::exception& e) {
    std::cerr << rank_prefix << "error: could not write " << file_.string() << ": " << e.what() << "\n";
  }
  const Json brief{{S::kStatus, status + " (training_summary.json could not be written whole)"},
                   {S::kTotalSteps, summary_.total_steps()}};
  if (overwrite_file_in_place(file_, brief.dump(2) + "\n")) {
    std::cerr << "error: " << file_.string() << " holds the final status only\n";
  } else {
    std::cerr << "error: " << file_.string()
              << " could not be updated either and may still say \"running\"\n";
  }
  return false;
}

void JobSummary::record_loop(const LoopFigures& loop, dist::Communicator& comm, bool gather,
                             const std::string& rank_prefix) {
  summary_.set_info(S::kDataWaitSeconds, loop.data_seconds);
  summary_.set_info(S::kStepExamplesPerSecond, loop.step_examples_per_second());
  if (comm.world_size() == 1) return;
  try {
    record_ranks(comm, gather, loop);
  } catch (const std::exception& e) {
    std::cerr << rank_prefix << "warning: could not gather the per-rank figures: " << e.what() << "\n";
  }
}

void JobSummary::record_ranks(dist::Communicator& comm, bool gather, const LoopFigures& loop) {
  const dist::CommStats c = comm.stats();
  const dist::CommStats& at_start = loop.comm_at_start;
  auto mine =
      torch::tensor({static_cast<double>(loop.steps), loop.train_seconds, static_cast<double>(loop.examples),
                     c.busy_seconds - at_start.busy_seconds, c.wait_seconds - at_start.wait_seconds,
                     static_cast<double>(c.collectives - at_start.collectives),
                     static_cast<double>(c.bytes - at_start.bytes), loop.data_seconds},
                    torch::kDouble);
  std::vector<torch::Tensor> all{mine};
  if (gather) all = comm.all_gather(mine);
  const auto samples = static_cast<double>(loop.samples_per_example);
  Json per_rank = Json::array();
  double job_examples_per_s = 0, wait_share_max = 0, step_time_max = 0, step_time_min = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    const auto v = all[r].accessor<double, 1>();
    const double steps = v[0], seconds = v[1], examples = v[2], busy = v[3], wait = v[4], data = v[7];
    const double rate = seconds > 0 ? examples / seconds : 0.0;
    const double step_time = steps > 0 ? seconds / steps : 0.0;
    const double compute = seconds - data;
    auto share = [&](double part) { return seconds > 0 ? part / seconds : 0.0; };
    per_rank.push_back({{S::kRank, gather ? static_cast<int>(r) : comm.rank()},
                        {S::kRankSteps, static_cast<int64_t>(steps)},
                        {S::kRankTrainSeconds, seconds},
                        {S::kRankStepTime, step_time},
                        {S::kExamplesPerSecond, rate},
                        {S::kSamplesPerSecond, rate * samples},
                        {S::kDataWaitSeconds, data},
                        {S::kDataWaitShare, share(data)},
                        {S::kStepExamplesPerSecond, compute > 0 ? examples / compute : 0.0},
                        {S::kCommBusySeconds, busy},
                        {S::kCommWaitSeconds, wait},
                        {S::kCommBusyShare, share(busy)},
                        {S::kCommWaitShare, share(wait)},
                        {S::kCollectives, static_cast<int64_t>(v[5])},
                        {S::kCollectiveBytes, static_cast<int64_t>(v[6])}});
    job_examples_per_s += rate;
    wait_share_max = std::max(wait_share_max, share(wait));
    step_time_max = std::max(step_time_max, step_time);
    step_time_min = r == 0 ? step_time : std::min(step_time_min, step_time);
  }
  summary_.set_info(S::kDistributed,
                    {{S::kBackend, comm.backend()},
                     {S::kWaitPolicy, comm.wait_policy()},
                     {S::kEventLoopScheduling, comm.event_loop_scheduling()},
                     {S::kWorldSize, comm.world_size()},
                     {S::kRanksReported, static_cast<int64_t>(all.size())},
                     {S::kExamplesPerSecond, job_examples_per_s},
                     {S::kSamplesPerSecond, job_examples_per_s * samples},
                     // The share of step time a rank spent blocked on communication (not
                     // hidden by backward), worst rank; and the straggler skew (slowest /
                     // fastest mean step).
                     {S::kCommWaitShare, wait_share_max},
                     {S::kStepTimeSkew, step_time_min > 0 ? step_time_max / step_time_min : 1.0},
                     {S::kPerRank, per_rank}});
}

void LostOutputs::guard(const std::string& what, const std::function<void()>& write) {
  try {
    write();
  } catch (const std::exception& e) {
    std::cerr << rank_prefix_ << "error: could not write " << what << ": " << e.what() << "\n";
    lost_.push_back(what + ": " + e.what());
  }
}

std::string LostOutputs::status(const std::string& status) const {
  if (lost_.empty() || status.rfind("failed", 0) == 0) return status;
  return "failed: could not write " + lost_.front() +
         (lost_.size() > 1 ? " (and " + std::to_string(lost_.size() - 1) + " more, see lost_outputs)" : "");
}

void report_validation(const ValidationResult& v, int64_t step, TensorBoardWriter* tb,
                       prof::TrainingSummary& summary, std::ostream& console) {
  std::ostringstream line;
  line << "validation @ step " << step << ":";
  for (const auto& [name, value] : v.metrics) {
    if (tb) tb->add_scalar(name, static_cast<float>(value), step);
    summary.set_metric(name, value);
    line << " " << printable(name) << "=" << std::setprecision(5) << value;  // group names are data
  }
  console << line.str() << std::endl;
  if (tb && v.audio.defined() && v.sample_rate > 0) {
    auto interleaved = v.audio.to(torch::kFloat).t().contiguous();
    tb->add_audio(v.audio_tag, interleaved.data_ptr<float>(), interleaved.size(0),
                  static_cast<int>(interleaved.size(1)), v.sample_rate, step);
  }
  if (tb) tb->flush();
}

void describe_job(prof::TrainingSummary& summary, const Config& config, const std::string& model,
                  const JobStart& job, const TrainData& data, const dist::LaunchEnv& env,
                  int64_t first_step) {
  summary.set_info(S::kModelFamily, job.keys.family);
  summary.set_info(S::kModel, model);
  // The config a run was made from (its file's stem) is not the run's name (--name).
  summary.set_info(S::kConfig, config.stack_name());
  summary.set_info(S::kRunName, job.keys.name);
  summary.set_info(S::kDevice, job.device.str());
  summary.set_info(S::kThreads, torch::get_num_threads());
  if (const std::string blas = blas_kernels_running(); !blas.empty()) summary.set_info(S::kBlasKernels, blas);
  if (job.device.is_cpu()) summary.set_info(S::kGemm, models::gemm_library());
  summary.set_info(S::kHeap, job.heap.description.empty()
                                 ? "the C library's malloc defaults (train.retain_freed_memory = false)"
                                 : job.heap.description);
  summary.set_info(S::kBatch, job.keys.batch);
  summary.set_info(S::kWorldSize, job.comm->world_size());
  if (job.distributed) {
    summary.set_info(S::kGlobalBatch, job.keys.batch * job.comm->world_size());
    summary.set_info(S::kLaunch, env.describe());
  }
  summary.set_info(S::kSampleUnit, data.sample_unit);
  summary.set_info(S::kFirstStep, first_step);
}

std::string job_line(const std::string& model, const JobStart& job, const TrainData& data) {
  std::ostringstream line;
  line << model << " on " << job.device.str() << ", " << count_text(torch::get_num_threads(), "thread")
       << ", " << data.train_indices.size() << " train / " << data.val_indices.size()
       << " validation examples";
  if (job.distributed) {
    line << "; " << job.comm->world_size() << " ranks (" << job.comm->backend() << ", "
         << job.comm->wait_policy() << " waits), " << job.keys.batch << " examples per rank per step";
  }
  return line.str();
}

std::string peak_memory_text(const torch::Device& device) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1)
    << static_cast<double>(prof::read_process_memory().peak_rss_bytes) / (1024.0 * 1024.0)
    << " MiB resident (host)";
  if (device.is_cuda()) {
    const prof::CudaMemory m = prof::read_cuda_memory(device.index() < 0 ? 0 : device.index());
    if (m.available) {
      s << ", " << static_cast<double>(m.peak_allocated_bytes) / (1024.0 * 1024.0) << " MiB allocated / "
        << static_cast<double>(m.peak_reserved_bytes) / (1024.0 * 1024.0) << " MiB reserved on "
        << device.str();
    }
  }
  return s.str();
}

}  // namespace rt
