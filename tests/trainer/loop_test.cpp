// The training loop (trainer/trainer.cpp) driven in-process by the test-only fake family
// (tests/support/fake_family.h): checkpoint cadence, best.ckpt, exact resume, the non-finite
// stop and signals, without launching a binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "models/common/row_linear.h"
#include "support/fake_family.h"
#include "support/nan_batches.h"
#include "support/test_support.h"
#include "tensorboard/tfevents.h"
#include "trainer/trainer.h"
#include "training/checkpoint.h"
#include "util/json.h"
#include "util/run_pointer.h"
#include "util/signals.h"

namespace rt {
namespace {

namespace fs = std::filesystem;
using testing::fake_run_config;

fs::path checkpoints_of(const fs::path& run) { return run / "checkpoints"; }

// The run <out>/latest names.
fs::path latest_run(const fs::path& out) { return resolve_run_pointer(out / "latest"); }

std::vector<std::string> checkpoint_files(const fs::path& run) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(checkpoints_of(run)))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Every value of `tag` in the run's events files, in file order.
std::vector<double> scalars_of(const fs::path& run, const std::string& tag) {
  std::vector<double> values;
  for (const auto& e : fs::directory_iterator(run)) {
    if (e.path().filename().string().rfind("events.out.tfevents", 0) != 0) continue;
    for (const auto& r : read_tfevents(e.path())) {
      if (r.kind == TbRecord::Kind::Scalar && r.tag == tag) values.push_back(r.value);
    }
  }
  return values;
}

// Restores the hook and the process-wide stop flag whatever a test did.
struct LoopTest : ::testing::Test {
  void TearDown() override {
    testing::set_fake_step_hook({});
    clear_stop_request();
  }
  rt::testing::ScratchDir dir{"rt_loop"};
};

TEST_F(LoopTest, CheckpointsFollowSaveEveryAndLastHoldsTheNextStep) {
  ASSERT_EQ(run_training(fake_run_config(dir.path(), "cadence",
                                         {{"train.max_steps", "7"}, {"train.save_every", "3"}})),
            0);
  const fs::path run = latest_run(dir.path());
  EXPECT_EQ(checkpoint_files(run),
            (std::vector<std::string>{"best.ckpt", "last.ckpt", "step_3.ckpt", "step_6.ckpt"}));
  EXPECT_EQ(read_checkpoint_meta(checkpoints_of(run) / "step_3.ckpt").step, 3);
  EXPECT_EQ(read_checkpoint_meta(checkpoints_of(run) / "step_6.ckpt").step, 6);
  EXPECT_EQ(read_checkpoint_meta(checkpoints_of(run) / "last.ckpt").step, 7);
}

TEST_F(LoopTest, BestCheckpointHoldsTheLowestValidationLoss) {
  ASSERT_EQ(run_training(fake_run_config(
                dir.path(), "best",
                {{"train.max_steps", "8"}, {"train.val_every", "2"}, {"train.save_every", "1000"}})),
            0);
  const fs::path run = latest_run(dir.path());
  const std::vector<double> val = scalars_of(run, "val/loss");
  ASSERT_EQ(val.size(), 4u);  // steps 2, 4, 6, 8
  const CheckpointMeta best = read_checkpoint_meta(checkpoints_of(run) / "best.ckpt");
  ASSERT_TRUE(best.has_best);
  const double lowest = *std::min_element(val.begin(), val.end());
  EXPECT_NEAR(best.best, lowest, 1e-6 * std::max(1.0, lowest));  // events hold float32
  // best.ckpt was written at the validation that found it: the step after it is stored.
  const auto at = std::min_element(val.begin(), val.end()) - val.begin();
  EXPECT_EQ(best.step, 2 * (at + 1));
}

TEST_F(LoopTest, ResumeFromLastContinuesExactlyAsAnUninterruptedRun) {
  ASSERT_EQ(run_training(fake_run_config(dir.path(), "whole", {{"train.max_steps", "10"}})), 0);
  const Json whole = read_json(latest_run(dir.path()) / "training_summary.json");
  // A CPU run names the library our own products call (docs/cli.md "Threads and BLAS kernels").
  EXPECT_EQ(whole.at("gemm"), models::gemm_library());

  ASSERT_EQ(run_training(fake_run_config(dir.path(), "split", {{"train.max_steps", "4"}})), 0);
  const fs::path first = fs::canonical(latest_run(dir.path()));
  ASSERT_EQ(
      run_training(fake_run_config(dir.path(), "split", {{"train.max_steps", "10"}, {"train.ckpt", "last"}})),
      0);
  EXPECT_EQ(fs::canonical(latest_run(dir.path())), first) << "a resume reopens the run directory";
  const Json resumed = read_json(first / "training_summary.json");
  EXPECT_EQ(resumed.at("status"), "completed");
  // Same batches, same parameters: the final validation loss is bit-identical.
  EXPECT_EQ(resumed.at("metrics").at("val/loss").get<double>(),
            whole.at("metrics").at("val/loss").get<double>());
  EXPECT_EQ(read_checkpoint_meta(checkpoints_of(first) / "last.ckpt").step, 10);
}

TEST_F(LoopTest, NonFiniteLossStopsTheRunAndKeepsTheLastGoodCheckpoint) {
  // Losses are read at log cadence (every 10 steps here) or before a checkpoint: the NaN of
  // step 4 is found before step_6.ckpt would be written, and named by its own step.
  const int code = run_training(
      fake_run_config(dir.path(), "nan",
                      {{"train.max_steps", "9"}, {"train.save_every", "3"}, {"train.log_every", "10"}}),
      testing::nan_at_step(4));
  EXPECT_EQ(code, 1);
  const fs::path run = latest_run(dir.path());
  const Json summary = read_json(run / "training_summary.json");
  EXPECT_EQ(summary.at("status"), "failed: non-finite loss at step 4");
  EXPECT_FALSE(fs::exists(checkpoints_of(run) / "step_6.ckpt"));
  EXPECT_EQ(read_checkpoint_meta(checkpoints_of(run) / "last.ckpt").step, 3) << "last.ckpt is the step-3 one";
}

TEST_F(LoopTest, SigtermEndsTheStepSavesLastAndMarksTheRunInterrupted) {
  testing::set_fake_step_hook([](int64_t step) {
    if (step == 4) {
      ASSERT_TRUE(testing::signal_this_process(SIGTERM));
    }
  });
  const int code = run_training(fake_run_config(dir.path(), "signal", {{"train.max_steps", "50"}}));
  EXPECT_EQ(code, 128 + SIGTERM);
  const fs::path run = latest_run(dir.path());
  const Json summary = read_json(run / "training_summary.json");
  EXPECT_EQ(summary.at("status"), "interrupted");
  EXPECT_EQ(summary.at("total_steps"), 5) << "the step under way finishes";
  EXPECT_EQ(read_checkpoint_meta(checkpoints_of(run) / "last.ckpt").step, 5);
}

TEST_F(LoopTest, AnExceptionInAStepFailsTheRunWithItsMessageAndWritesTheSummary) {
  testing::set_fake_step_hook([](int64_t step) {
    if (step == 2) throw Error("the fake step broke");
  });
  EXPECT_EQ(run_training(fake_run_config(dir.path(), "throw")), 1);
  const Json summary = read_json(latest_run(dir.path()) / "training_summary.json");
  EXPECT_EQ(summary.at("status"), "failed: the fake step broke");
  EXPECT_FALSE(fs::exists(checkpoints_of(latest_run(dir.path())) / "last.ckpt"))
      << "no checkpoint of a failed run";
}

TEST_F(LoopTest, TheSummarySaysRunningWithTheFiguresSoFarWhileTraining) {
  // What a run killed with kill -9 leaves: the summary of its last log line.
  Json seen;
  testing::set_fake_step_hook([&](int64_t step) {
    if (step == 5) seen = read_json(latest_run(dir.path()) / "training_summary.json");
  });
  ASSERT_EQ(run_training(
                fake_run_config(dir.path(), "running", {{"train.max_steps", "8"}, {"train.log_every", "2"}})),
            0);
  ASSERT_TRUE(seen.is_object()) << "no training_summary.json while training";
  EXPECT_EQ(seen.at("status"), "running");
  EXPECT_EQ(seen.at("total_steps"), 4) << "steps 0–3 were logged before step 5";
  EXPECT_EQ(seen.at("last_step"), 3);
  EXPECT_EQ(read_json(latest_run(dir.path()) / "training_summary.json").at("status"), "completed");
}

// The "step" of every entry of a JSON list file.
std::vector<int64_t> profile_steps_of(const fs::path& file) {
  std::vector<int64_t> steps;
  for (const auto& e : read_json(file)) steps.push_back(e.at("step").get<int64_t>());
  return steps;
}

TEST_F(LoopTest, AResumeContinuesTheTimingAndMemoryProfilesFromItsCheckpointStep) {
  using Keys = std::vector<std::pair<std::string, std::string>>;
  auto config = [&](Keys keys) {
    keys.insert(
        keys.end(),
        {{"profiling.timing", "true"}, {"profiling.memory", "true"}, {"profiling.memory_every", "1"}});
    return fake_run_config(dir.path(), "profiles", keys);
  };
  ASSERT_EQ(run_training(config({{"train.max_steps", "6"}, {"train.save_every", "4"}})), 0);
  const fs::path run = fs::canonical(latest_run(dir.path()));
  std::vector<int64_t> expected = {0, 1, 2, 3, 4, 5};
  ASSERT_EQ(profile_steps_of(run / "timing_profile.json"), expected);
  // Resuming from step 4 (as after a kill -9 past the checkpoint): steps 0–3 stay, 4 and 5 are
  // trained again and recorded once.
  ASSERT_EQ(run_training(config(
                {{"train.max_steps", "9"}, {"train.ckpt", (checkpoints_of(run) / "step_4.ckpt").string()}})),
            0);
  expected = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(profile_steps_of(run / "timing_profile.json"), expected);
  EXPECT_EQ(profile_steps_of(run / "memory_profile.json"), expected);
}

}  // namespace
}  // namespace rt
