// Data-parallel training end to end: `train --nproc_per_node 2` (and torchrun, when installed)
// against one process with the global batch, on Gloo over loopback.
//
// Equivalence: N ranks × B examples train as one process × N·B — the loader gives each rank its
// slice of the same global batches, gradients are averaged over ranks (weighted by slice size),
// BatchNorm statistics are global (SyncBatchNorm, train.distributed.batch_norm = sync), a model's noise is
// the global batch's (models/common/batch_slice.h) and validation sums sufficient statistics over ranks.
#include <limits>
#include <regex>
#include <set>

#include "distributed/process_group.h"
#include "e2e/e2e_fixtures.h"
#include "support/trace_checks.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

std::string q(const fs::path& p) { return quote(p.string()); }

// A neural database of `trials` trials in `groups` groups (synthetic reaching data).
fs::path reaching_db(const fs::path& dir, int trials, int groups) {
  return e2e::make_neural_db(dir, "--groups " + std::to_string(groups) + " --units 182 --trials " +
                                      std::to_string(trials) + " --seed 7");
}

struct TrainRun {
  CommandResult result;
  fs::path dir;
  Json summary;
  std::map<std::string, torch::Tensor> tensors;  // last.ckpt
};

// `train [--nproc_per_node N] <args> --out_path OUT/<name>`; reads the summary and last.ckpt.
// `program`: the executable with its environment ("train", or the tests' train_with_faults).
TrainRun train(const fs::path& out, const std::string& name, int nproc, const std::string& args,
               const std::string& program = bin_path("train")) {
  TrainRun r;
  const std::string launch = nproc > 0 ? " --nproc_per_node " + std::to_string(nproc) : "";
  r.result = run_command("timeout -k 10 600 " + program + launch + " " + args + " --out_path " +
                         q(out / name) + " --name " + name);
  r.dir = run_dir_from_output(r.result.output);
  if (!r.dir.empty() && fs::exists(r.dir / "training_summary.json"))
    r.summary = read_json(r.dir / "training_summary.json");
  if (!r.dir.empty() && fs::exists(r.dir / "checkpoints" / "last.ckpt")) {
    r.tensors = checkpoint_tensors(r.dir / "checkpoints" / "last.ckpt");
  }
  return r;
}

// Largest |a − b| over the tensors both checkpoints hold (optimizer state and the stream
// position included; an integer tensor that differs counts as infinitely far).
double max_difference(const TrainRun& a, const TrainRun& b) {
  EXPECT_FALSE(a.tensors.empty());
  EXPECT_EQ(a.tensors.size(), b.tensors.size());
  double worst = 0;
  for (const auto& [name, t] : a.tensors) {
    auto it = b.tensors.find(name);
    if (it == b.tensors.end()) {
      ADD_FAILURE() << "missing " << name;
      continue;
    }
    if (!t.is_floating_point()) {
      if (!torch::equal(t, it->second)) worst = std::numeric_limits<double>::infinity();
      continue;
    }
    worst =
        std::max(worst, (t.to(torch::kDouble) - it->second.to(torch::kDouble)).abs().max().item<double>());
  }
  return worst;
}

// The share of floating-point coordinates of the module archive `prefix` that differ by more
// than `threshold` between the two checkpoints.
double share_moved_apart(const TrainRun& a, const TrainRun& b, const std::string& prefix, double threshold) {
  double apart = 0, total = 0;
  for (const auto& [name, t] : a.tensors) {
    if (name.rfind(prefix, 0) != 0 || !t.is_floating_point() || !b.tensors.count(name)) continue;
    const auto d = (t.to(torch::kDouble) - b.tensors.at(name).to(torch::kDouble)).abs();
    apart += (d > threshold).sum().item<double>();
    total += static_cast<double>(t.numel());
  }
  return total > 0 ? apart / total : 1.0;
}

// ‖a − b‖ / ‖a‖ over the floating-point parameters of the module archive `prefix` (e.g. "rave.").
double relative_distance(const TrainRun& a, const TrainRun& b, const std::string& prefix) {
  double diff = 0, norm = 0;
  for (const auto& [name, t] : a.tensors) {
    if (name.rfind(prefix, 0) != 0 || !t.is_floating_point() || !b.tensors.count(name)) continue;
    const auto x = t.to(torch::kDouble), y = b.tensors.at(name).to(torch::kDouble);
    diff += (x - y).pow(2).sum().item<double>();
    norm += x.pow(2).sum().item<double>();
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

void expect_same_metrics(const TrainRun& a, const TrainRun& b, double tolerance) {
  ASSERT_TRUE(a.summary.contains("metrics")) << a.result.output;
  ASSERT_TRUE(b.summary.contains("metrics")) << b.result.output;
  ASSERT_FALSE(a.summary["metrics"].empty());
  for (const auto& [name, value] : a.summary["metrics"].items()) {
    ASSERT_TRUE(b.summary["metrics"].contains(name)) << name;
    EXPECT_NEAR(value.get<double>(), b.summary["metrics"][name].get<double>(),
                tolerance * std::max(1.0, std::abs(value.get<double>())))
        << name;
  }
}

// `common` as 1 rank × 8 and as 2 ranks × 4: the same checkpoint tensors (1e-5) and validation
// metrics (1e-6). Returns both runs.
std::pair<TrainRun, TrainRun> one_rank_and_two(const fs::path& dir, const std::string& common) {
  TrainRun one = train(dir, "one", 0, common + " --batch 8");
  TrainRun two = train(dir, "two", 2, common + " --batch 4");
  EXPECT_EQ(one.result.exit_code, 0) << one.result.output;
  EXPECT_EQ(two.result.exit_code, 0) << two.result.output;
  EXPECT_LT(max_difference(one, two), 1e-5);
  expect_same_metrics(one, two, 1e-6);
  return {std::move(one), std::move(two)};
}

// 59 training examples in global batches of 8: every epoch ends with a batch of 3, split 1 and
// 2 over the ranks, so uneven slices (weighted gradients, SyncBatchNorm over unequal rows) are
// part of the comparison.
TEST(DataParallel, SsmTwoRanksTrainAsOneRankWithTheGlobalBatch) {
  ScratchDir dir("rt_dp_ssm");
  const fs::path db = reaching_db(dir.path(), 66, 1);
  const std::string common =
      "--config tiny_ssm --db_path " + q(db) + " --threads 1 --max_steps 20 --val_every 10";
  auto [one, two] = one_rank_and_two(dir.path(), common);
  EXPECT_EQ(two.summary["world_size"], 2);
  EXPECT_EQ(two.summary["distributed"]["backend"], "gloo");
  EXPECT_EQ(two.summary["distributed"]["per_rank"].size(), 2u);
  // The control: one process with the per-rank batch is a different training.
  TrainRun half = train(dir.path(), "half", 0, common + " --batch 4");
  ASSERT_EQ(half.result.exit_code, 0) << half.result.output;
  EXPECT_GT(max_difference(one, half), 1e-3);
}

// The same on GPUs: with two or more, each rank on its own (cuda:LOCAL_RANK) over NCCL; with one,
// both ranks share it over Gloo, which runs the gradient sync's CUDA path (device buckets, the
// small collectives staged through the GPU) without NCCL. TF32 off on both sides: its rounding
// depends on the batch's shape, the comparison's subject.
TEST(DataParallel, SsmTwoRanksOnGpusTrainAsOneRank) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device (none is usable here)";
  const bool nccl = torch::cuda::device_count() >= 2;
  ScratchDir dir("rt_dp_ssm_gpu");
  const fs::path db = reaching_db(dir.path(), 66, 1);
  const std::string common = "--config tiny_ssm --db_path " + q(db) +
                             " --threads 1 --max_steps 20 --val_every 10 --device cuda --train.tf32 false"
                             " --train.distributed.backend " +
                             std::string(nccl ? "nccl" : "gloo");
  auto [one, two] = one_rank_and_two(dir.path(), common);
  EXPECT_EQ(one.summary["device"], "cuda:0") << one.result.output;
  EXPECT_EQ(two.summary["device"], "cuda:0") << two.result.output;  // rank 0's
  EXPECT_EQ(two.summary["distributed"]["backend"], nccl ? "nccl" : "gloo");
  EXPECT_EQ(two.summary["world_size"], 2);
}

// The multi-session decoder: group batches of the global size, each rank's slice from the same
// group, per-group validation R², and dropout masks that follow the global batch.
TEST(DataParallel, MultiSessionDecoderWithDropoutTrainsAsOneRank) {
  ScratchDir dir("rt_dp_foundational");
  const fs::path db = reaching_db(dir.path(), 48, 2);
  const std::string common = "--config tiny_ssm --db_path " + q(db) +
                             " --threads 1 --max_steps 16 --val_every 8 --model.variant foundational "
                             "--model.context_dim 4 --model.dropout 0.1";
  auto [one, two] = one_rank_and_two(dir.path(), common);
  EXPECT_TRUE(two.summary["metrics"].contains("val/r2_group_synthetic_reach_1")) << two.summary.dump();
}

// A 2-rank run resumed by one process continues the global stream: the same parameters as one
// uninterrupted process.
TEST(DataParallel, ResumingWithOneRankContinuesTheGlobalStream) {
  ScratchDir dir("rt_dp_resume");
  const fs::path db = reaching_db(dir.path(), 66, 1);
  const std::string common = "--config tiny_ssm --db_path " + q(db) + " --threads 1 --val_every 100";
  TrainRun straight = train(dir.path(), "straight", 0, common + " --batch 8 --max_steps 18");
  TrainRun first = train(dir.path(), "first", 2, common + " --batch 4 --max_steps 11 --save_every 11");
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  ASSERT_EQ(first.result.exit_code, 0) << first.result.output;
  TrainRun resumed =
      train(dir.path(), "resumed", 0,
            common + " --batch 8 --max_steps 18 --ckpt " + q(first.dir / "checkpoints" / "last.ckpt"));
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
  EXPECT_NE(resumed.result.output.find("at step 11"), std::string::npos) << resumed.result.output;
  EXPECT_LT(max_difference(straight, resumed), 1e-5);
}

// RAVE. Adam's first step moves every coordinate by about ±lr whatever the gradient's size, so
// float reduction-order differences in near-zero gradients flip a few coordinates, and from
// then on runs drift apart chaotically (a single process on 2 threads instead of 1 drifts as
// far). So: after one step, the coordinates where 2 ranks × 4 and 1 rank × 8 disagree by more
// than lr/2 must be a small fraction of those where the control (1 rank × 4, another
// training) disagrees; across the phase-1 → 2 switch (frozen encoder, discriminator steps
// every other step) the distance must stay within the reduction-order noise floor.
TEST(DataParallel, RaveTwoRanksTrackOneRankAcrossThePhaseSwitch) {
  ScratchDir dir("rt_dp_rave");
  const fs::path db = make_demo_db(dir.path(), 3.0);
  const std::string base = "--config tiny_rave --db_path " + q(db) + " --val_every 3 ";
  {
    const std::string common = base + "--max_steps 1 --threads 1";
    TrainRun one = train(dir.path(), "one_step", 0, common + " --batch 8");
    TrainRun two = train(dir.path(), "two_step", 2, common + " --batch 4");
    TrainRun half = train(dir.path(), "half_step", 0, common + " --batch 4");
    for (const TrainRun* r : {&one, &two, &half}) ASSERT_EQ(r->result.exit_code, 0) << r->result.output;
    const double ranks = share_moved_apart(one, two, "model.rave.", 5e-4);
    const double control = share_moved_apart(one, half, "model.rave.", 5e-4);
    EXPECT_LT(ranks, 0.05 * control) << "ranks " << ranks << ", control " << control;
  }
  const std::string common =
      base + "--max_steps 6 --train.phase_1_duration 3 --train.update_discriminator_every 2";
  TrainRun one = train(dir.path(), "one", 0, common + " --threads 1 --batch 8");
  TrainRun two = train(dir.path(), "two", 2, common + " --threads 1 --batch 4");
  TrainRun threads = train(dir.path(), "threads", 0, common + " --threads 2 --batch 8");
  for (const TrainRun* r : {&one, &two, &threads}) ASSERT_EQ(r->result.exit_code, 0) << r->result.output;
  const double ranks = relative_distance(one, two, "model.rave.");
  const double noise = relative_distance(one, threads, "model.rave.");
  EXPECT_GT(noise, 0.0);
  EXPECT_LT(ranks, 3 * noise) << "ranks " << ranks << ", noise floor " << noise;
  ASSERT_TRUE(two.summary["metrics"].contains("validation"));
  EXPECT_NEAR(one.summary["metrics"]["validation"].get<double>(),
              two.summary["metrics"]["validation"].get<double>(),
              0.02 * one.summary["metrics"]["validation"].get<double>());
}

// RAVE v1's encoder normalises with BatchNorm: its statistics are every rank's batch
// (train.distributed.batch_norm = sync, the default), so after one step 2 ranks × 4 hold the
// running statistics of 1 rank × 8 and move the weights as it does; with "local" each rank
// normalises its own 4 examples (rank 0's running statistics are checkpointed).
TEST(DataParallel, RaveV1EncoderBatchNormStatisticsAreTheGlobalBatchs) {
  ScratchDir dir("rt_dp_rave_v1");
  const fs::path db = make_demo_db(dir.path(), 3.0);
  const std::string common =
      "--config tiny_rave --model.version v1 --train.valid_signal_crop false --db_path " + q(db) +
      " --val_every 3 --max_steps 1 --threads 1";  // v1 does not crop (v1.gin, configs/v1.toml)
  TrainRun one = train(dir.path(), "one", 0, common + " --batch 8");
  TrainRun two = train(dir.path(), "two", 2, common + " --batch 4");
  TrainRun local = train(dir.path(), "local", 2, common + " --batch 4 --train.distributed.batch_norm local");
  TrainRun half = train(dir.path(), "half", 0, common + " --batch 4");
  for (const TrainRun* r : {&one, &two, &local, &half}) ASSERT_EQ(r->result.exit_code, 0) << r->result.output;
  size_t norms = 0;
  double sync_worst = 0, local_worst = 0;
  for (const auto& [name, t] : one.tensors) {
    if (name.find("encoder") == std::string::npos || name.find("running_") == std::string::npos) continue;
    ++norms;
    sync_worst = std::max(sync_worst, (t - two.tensors.at(name)).abs().max().item<double>());
    local_worst = std::max(local_worst, (t - local.tensors.at(name)).abs().max().item<double>());
  }
  EXPECT_EQ(norms, 6u);  // running mean and variance of the three BatchNorms (ratios [2, 2, 2])
  EXPECT_LT(sync_worst, 1e-6);
  EXPECT_GT(local_worst, 1e-3);
  const double ranks = share_moved_apart(one, two, "model.rave.", 5e-4);
  const double control = share_moved_apart(one, half, "model.rave.", 5e-4);
  EXPECT_LT(ranks, 0.05 * control) << "ranks " << ranks << ", control " << control;
}

// train.distributed.batch_norm = local: the S5 blocks normalise each rank's rows (no collective
// in forward or backward: two fewer per block and step), so the run leaves the synchronised
// one; before each validation every rank takes rank 0's buffers (one broadcast per dtype:
// float running statistics, integer batch counts).
TEST(DataParallel, LocalSsmBatchNormDropsItsCollectivesAndBroadcastsRankZerosStatistics) {
  ScratchDir dir("rt_dp_local_bn");
  const fs::path db = reaching_db(dir.path(), 66, 1);
  const std::string common = "--config tiny_ssm --db_path " + q(db) +
                             " --threads 1 --batch 4 --max_steps 20 --val_every 10 --enable_profiling "
                             "--profile_steps 1 --profiling.skip_first 8";
  TrainRun sync = train(dir.path(), "sync", 2, common);
  TrainRun local = train(dir.path(), "local", 2, common + " --train.distributed.batch_norm local");
  ASSERT_EQ(sync.result.exit_code, 0) << sync.result.output;
  ASSERT_EQ(local.result.exit_code, 0) << local.result.output;
  EXPECT_GT(max_difference(sync, local), 1e-4);
  const auto& s = sync.summary["distributed"]["per_rank"];
  const auto& l = local.summary["distributed"]["per_rank"];
  ASSERT_EQ(s.size(), 2u);
  ASSERT_EQ(l.size(), 2u);
  const int64_t layers = 1, steps = 20, validations = 2;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(s[r]["collectives"].get<int64_t>() - l[r]["collectives"].get<int64_t>(),
              2 * layers * steps - 2 * validations)
        << "rank " << r;
  }
  // The broadcasts run inside validation on both ranks (traced step 9: step 10's validation ends it).
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path trace = local.dir / (rank == 0 ? "profile_step_9.json" : "profile_step_9.rank1.json");
    ASSERT_TRUE(fs::exists(trace)) << trace;
    const Json t = read_json(trace);
    size_t broadcasts = 0;
    for (const auto& ev : t["traceEvents"]) broadcasts += ev.value("name", "") == "gloo:broadcast";
    EXPECT_EQ(broadcasts, 2u) << trace;
  }
}

// train.distributed.first_bucket_mb / bucket_mb (DDP's bucket_cap_mb): tiny caps give every
// gradient tensor a bucket (an all-reduce) of its own; the sums, so the training, are the same.
TEST(DataParallel, BucketCapsSplitTheGradientAllReduceWithoutChangingTheTraining) {
  ScratchDir dir("rt_dp_buckets");
  const fs::path db = reaching_db(dir.path(), 66, 1);
  const std::string common =
      "--config tiny_ssm --db_path " + q(db) + " --threads 1 --batch 4 --max_steps 10 --val_every 100";
  TrainRun one_bucket = train(dir.path(), "default", 2, common);
  TrainRun split =
      train(dir.path(), "split", 2,
            common + " --train.distributed.first_bucket_mb 1e-6 --train.distributed.bucket_mb 1e-6");
  ASSERT_EQ(one_bucket.result.exit_code, 0) << one_bucket.result.output;
  ASSERT_EQ(split.result.exit_code, 0) << split.result.output;
  EXPECT_EQ(max_difference(one_bucket, split), 0.0);
  int64_t tensors = 0;
  for (const auto& [name, t] : split.tensors) {
    // The model's parameters (the optimizer state and buffers are not reduced).
    if (name.rfind("model.ssm.", 0) == 0 && name.find("running_") == std::string::npos &&
        name.find("num_batches_tracked") == std::string::npos) {
      ++tensors;
    }
  }
  ASSERT_GT(tensors, 1);
  const auto collectives = [](const TrainRun& r) {
    return r.summary["distributed"]["per_rank"][0]["collectives"].get<int64_t>();
  };
  EXPECT_EQ(collectives(split) - collectives(one_bucket), (tensors - 1) * 10)
      << tensors << " parameter tensors";
}

// The ranks of a job launched by `train --nproc_per_node 2` or by torchrun (when python3-torch
// is installed) write their own profiles and traces; the traces carry distributedInfo with the
// rank HTA finds by its regex, and the collectives as PyTorch's profiler names them.
void check_per_rank_outputs(const std::string& launcher, const std::string& command) {
  const auto r = run_command("timeout -k 10 600 " + command);
  ASSERT_EQ(r.exit_code, 0) << launcher << "\n" << r.output;
  const fs::path run = run_dir_from_output(r.output);
  ASSERT_FALSE(run.empty()) << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path timing = run / ("timing_profile.rank" + std::to_string(rank) + ".json");
    ASSERT_TRUE(fs::exists(timing)) << launcher << ": " << timing;
    const Json entries = read_json(timing);
    ASSERT_TRUE(entries.is_array());
    EXPECT_EQ(entries.size(), 16u) << timing;
  }
  ASSERT_TRUE(fs::is_symlink(run / "timing_profile.json")) << launcher;
  EXPECT_EQ(fs::read_symlink(run / "timing_profile.json"), "timing_profile.rank0.json");
  EXPECT_TRUE(fs::exists(run / "profile_step_11.json")) << launcher;
  EXPECT_TRUE(fs::exists(run / "profile_step_11.rank1.json")) << launcher;
  std::set<int> ranks;
  for (const auto& e : fs::directory_iterator(run / "profiler_traces")) {
    std::ifstream in(e.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex("\"rank\":\\s+(\\d+)"))) << e.path();
    const int rank = std::stoi(m[1].str());
    ranks.insert(rank);
    testing::check_kineto_top_level(text, rank, 2);
    const Json trace = Json::parse(text);
    EXPECT_EQ(trace["distributedInfo"]["backend"], "gloo");
    testing::check_kineto_events(trace, /*expect_shapes=*/false);
    // The gradient bucket and the loss's denominators: all-reduces small enough to run as an
    // all-gather and a local sum (train.distributed.small_all_reduce_kib), in and out sizes as
    // Kineto's record_param_comms gives them.
    size_t gathers = 0;
    for (const auto& ev : trace["traceEvents"]) {
      const std::string name = ev.value("name", "");
      if (name != "gloo:all_reduce" && name != "gloo:all_gather") continue;
      gathers += name == "gloo:all_gather";
      EXPECT_EQ(ev["args"]["Collective name"], name == "gloo:all_reduce" ? "allreduce" : "allgather");
      EXPECT_EQ(ev["args"]["Group size"], 2);
      const int64_t in = ev["args"]["In msg nelems"].get<int64_t>();
      EXPECT_GT(in, 0);
      EXPECT_EQ(ev["args"]["Out msg nelems"].get<int64_t>(), name == "gloo:all_reduce" ? in : 2 * in);
    }
    EXPECT_GT(gathers, 0u) << e.path();
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1})) << launcher;
  const Json summary = read_json(run / "training_summary.json");
  EXPECT_EQ(summary["world_size"], 2);
  ASSERT_EQ(summary["distributed"]["per_rank"].size(), 2u);
  // train.distributed.wait = auto: 2 ranks × 1 thread poll when this host has 2 cores.
  EXPECT_EQ(summary["distributed"]["wait_policy"], rt::dist::usable_cores() >= 2 ? "active" : "passive")
      << launcher;
  // train.distributed.gloo_loop = "batch" (default): Gloo's event loop under SCHED_BATCH.
  EXPECT_EQ(summary["distributed"]["event_loop_scheduling"], "SCHED_BATCH") << launcher;
  // profile-report: every rank's figures, and rank 0's operators only.
  const auto report = run_command(bin_path("profile-report") + " " + quote(run.string()));
  EXPECT_EQ(report.exit_code, 0) << report.output;
  EXPECT_NE(report.output.find(std::string("Data parallel: 2 ranks (gloo, ") +
                               (rt::dist::usable_cores() >= 2 ? "active" : "passive") + " waits)"),
            std::string::npos)
      << report.output;
  EXPECT_NE(report.output.find("1 trace file(s) of rank 0"), std::string::npos) << report.output;
  for (const auto& rank : summary["distributed"]["per_rank"]) {
    EXPECT_GT(rank["examples_per_second"].get<double>(), 0.0);
    EXPECT_GT(rank["collectives"].get<int64_t>(), 0);
    // The step's own throughput excludes the wait for batches, so it is at least the loop's.
    EXPECT_GE(rank["data_wait_share"].get<double>(), 0.0);
    EXPECT_LT(rank["data_wait_share"].get<double>(), 1.0);
    EXPECT_GE(rank["step_examples_per_second"].get<double>(), rank["examples_per_second"].get<double>());
  }
}

TEST(DataParallel, LocalLauncherAndTorchrunWritePerRankProfilesAndTraces) {
  ScratchDir dir("rt_dp_profiles");
  const fs::path db = reaching_db(dir.path(), 66, 1);
  const std::string args =
      "--config tiny_ssm --db_path " + q(db) +
      " --threads 1 --batch 4 --max_steps 16 --val_every 8 --enable_timing_profiling "
      "--enable_profiling --profile_steps 3 --profiling.skip_first 10 --profiling.warmup 1";
  check_per_rank_outputs("--nproc_per_node", bin_path("train") + " --nproc_per_node 2 " + args +
                                                 " --out_path " + q(dir.path() / "local"));
  if (const auto why = testing::torchrun_unusable_reason(); !why.empty()) GTEST_SKIP() << why;
  // Debian 12's torchrun needs --redirects/--tee (docs/distributed.md, "Starting the ranks").
  check_per_rank_outputs("torchrun",
                         "torchrun --standalone --no_python --nproc_per_node 2 --redirects 2 --tee 2 " +
                             bin_path("train") + " " + args + " --out_path " + q(dir.path() / "torchrun"));
}

// A non-finite loss on one rank stops every rank, naming the step and the rank.
TEST(DataParallel, NonFiniteLossOnOneRankStopsEveryRank) {
  ScratchDir dir("rt_dp_nan");
  const fs::path db = reaching_db(dir.path(), 66, 1);
  TrainRun r =
      train(dir.path(), "nan", 2,
            "--config tiny_ssm --db_path " + q(db) + " --threads 1 --batch 4 --max_steps 40 --log_every 5",
            "env RT_TEST_NAN_AT_STEP=7 RT_TEST_NAN_RANK=1 " + bin_path("train_with_faults"));
  EXPECT_EQ(r.result.exit_code, 1) << r.result.output;
  EXPECT_NE(r.result.output.find("non-finite loss at step 7 on rank 1"), std::string::npos)
      << r.result.output;
  // Both ranks stopped at the same point (rank 1's lines are prefixed by the launcher).
  EXPECT_NE(r.result.output.find("[rank 1] error: failed: non-finite loss at step 7 on rank 1"),
            std::string::npos)
      << r.result.output;
  ASSERT_FALSE(r.summary.is_null()) << r.result.output;
  EXPECT_EQ(r.summary["status"].get<std::string>().rfind("failed: non-finite loss at step 7 on rank 1", 0),
            0u);
}

// Two ranks started by hand (the launcher variables torchrun sets) with different seeds: both
// stop before training, naming the rank and the first line of the config that differs.
TEST(DataParallel, MismatchedConfigsStopEveryRankNamingTheDifference) {
  ScratchDir dir("rt_dp_mismatch");
  const fs::path db = reaching_db(dir.path(), 66, 1);
  const std::string train_cmd = "timeout -k 10 300 " + bin_path("train") + " --config tiny_ssm --db_path " +
                                q(db) + " --out_path " + q(dir.path() / "runs") +
                                " --threads 1 --batch 4 --max_steps 4 --train.distributed.timeout_s 60";
  const fs::path log0 = dir.path() / "rank0.log", log1 = dir.path() / "rank1.log";
  auto r = run_command(
      "port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); "
      "print(s.getsockname()[1])'); export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port; "
      "RANK=0 " +
      train_cmd + " --seed 1 > " + q(log0) + " 2>&1 & RANK=1 " + train_cmd + " --seed 2 > " + q(log1) +
      " 2>&1; code1=$?; wait $!; code0=$?; echo \"exit codes $code0 $code1\"");
  const std::string out0 = rt::read_file(log0), out1 = rt::read_file(log1);
  // Exit code 2: a setting to change, as for any rejected config.
  EXPECT_NE(r.output.find("exit codes 2 2"), std::string::npos) << r.output << out0 << out1;
  const std::string expected =
      "mismatched configs (the resolved config.toml) across ranks: rank 1 differs from rank 0; first "
      "difference at "
      "line ";
  for (const std::string* out : {&out0, &out1}) {
    EXPECT_NE(out->find(expected), std::string::npos) << *out;
    EXPECT_NE(out->find("rank 0 has 'seed = 1', rank 1 has 'seed = 2'"), std::string::npos) << *out;
  }
}

// A 2-rank tiny_ssm run that trains until it is stopped (the fault tests), logging every 5 steps.
std::string endless_two_rank_command(const fs::path& db, const fs::path& out, const std::string& extra) {
  return bin_path("train") + " --nproc_per_node 2 --config tiny_ssm --db_path " + q(db) + " --out_path " +
         q(out) + " --threads 1 --batch 4 --max_steps 1000000 --log_every 5 --val_every 100000 " + extra;
}

// kill -9 of rank 1: rank 0 stops with an error naming the lost rank, noticed by the lost
// connection (or the launcher seeing it exit), not by train.distributed.timeout_s running out:
// the message says which, whatever the machine's speed; and the last good checkpoint stays
// loadable.
TEST(DataParallel, KilledRankStopsTheOthersNamingIt) {
  ScratchDir dir("rt_dp_kill");
  const fs::path db = reaching_db(dir.path(), 66, 1);
  BackgroundProcess p(
      endless_two_rank_command(db, dir.path() / "runs", "--save_every 10 --train.distributed.timeout_s 60"),
      dir.path() / "log.txt");
  ASSERT_TRUE(p.wait_until([&] { return last_logged_step(p.log()) >= 30; }, 120)) << p.log();
  // Rank 1: the launcher's child whose environment says RANK=1.
  pid_t rank1 = -1;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != p.pid()) continue;
    std::ifstream env(e.path() / "environ");
    const std::string vars((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    if (vars.find(std::string("RANK=1") + '\0') != std::string::npos &&
        vars.find("LOCAL_RANK=1") != std::string::npos) {
      rank1 = static_cast<pid_t>(std::stol(name));
    }
  }
  ASSERT_GT(rank1, 0) << "rank 1 not found among the launcher's children";
  ASSERT_EQ(::kill(rank1, SIGKILL), 0);
  const int code = p.wait_exit(90);
  EXPECT_NE(code, 0) << p.log();
  EXPECT_NE(code, -1) << "the job did not stop:\n" << p.log();
  EXPECT_NE(p.log().find("rank 1"), std::string::npos) << p.log();
  EXPECT_EQ(p.log().find("no answer from the other ranks within"), std::string::npos)
      << "the loss was noticed by the timeout, not by the lost connection:\n"
      << p.log();
  const fs::path run = run_dir_from_output(p.log());
  ASSERT_FALSE(run.empty()) << p.log();
  ASSERT_TRUE(fs::exists(run / "checkpoints" / "last.ckpt"));
  EXPECT_FALSE(checkpoint_tensors(run / "checkpoints" / "last.ckpt").empty());
}

// SIGTERM to the launcher stops every rank after the same step: one last.ckpt, status
// "interrupted", every rank's figures gathered and its profile flushed as valid JSON.
TEST(DataParallel, SigtermToTheLauncherStopsEveryRankCleanly) {
  ScratchDir dir("rt_dp_sigterm");
  const fs::path db = reaching_db(dir.path(), 66, 1);
  BackgroundProcess p(endless_two_rank_command(db, dir.path() / "runs", "--enable_timing_profiling"),
                      dir.path() / "log.txt");
  ASSERT_TRUE(p.wait_until([&] { return last_logged_step(p.log()) >= 20; }, 120)) << p.log();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(60), 128 + SIGTERM) << p.log();
  const fs::path run = run_dir_from_output(p.log());
  ASSERT_FALSE(run.empty()) << p.log();
  const Json summary = read_json(run / "training_summary.json");
  EXPECT_EQ(summary["status"], "interrupted");
  ASSERT_EQ(summary["distributed"]["per_rank"].size(), 2u) << summary.dump();
  const int64_t steps = summary["distributed"]["per_rank"][0]["steps"].get<int64_t>();
  EXPECT_EQ(summary["distributed"]["per_rank"][1]["steps"].get<int64_t>(), steps);
  ASSERT_TRUE(fs::exists(run / "checkpoints" / "last.ckpt"));
  const auto ckpt = checkpoint_tensors(run / "checkpoints" / "last.ckpt");
  EXPECT_FALSE(ckpt.empty());
  for (int rank = 0; rank < 2; ++rank) {
    const Json timing = read_json(run / ("timing_profile.rank" + std::to_string(rank) + ".json"));
    EXPECT_EQ(static_cast<int64_t>(timing.size()), steps) << rank;
  }
}

}  // namespace
}  // namespace rt::e2e
