// Bad input ends with one clear message naming the key/file and what would work; a NaN loss
// fails the run without touching the last good checkpoint.
#include "e2e/e2e_fixtures.h"
#include "trainer/checkpoint.h"

namespace rt::e2e {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class RaveBadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_rave_bad");
    db_ = make_demo_db(dir_->path());  // mono, records of 2 × 8192 samples
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static ScratchDir* dir_;
  static fs::path db_;
};
ScratchDir* RaveBadInput::dir_ = nullptr;
fs::path RaveBadInput::db_;

TEST_F(RaveBadInput, DatabaseShorterThanNSignalNamesBothLengths) {
  auto r = run_command(tiny_train_command(db_, dir_->path() / "runs", "--max_steps 2 --n_signal 32768"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "holds examples of 16384 samples, fewer than data.n_signal = 32768")) << r.output;
  EXPECT_TRUE(contains(r.output, "--num_signal")) << r.output;
  EXPECT_FALSE(contains(r.output, "step 1/")) << "trained anyway:\n" << r.output;
}

TEST_F(RaveBadInput, ChannelCountMismatchNamesTheKeyAndTheDatabaseChannels) {
  auto r = run_command(tiny_train_command(db_, dir_->path() / "runs", "--max_steps 2 --data.channels 2"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "data.channels = 2, but database '" + db_.string() + "' holds 1-channel audio"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "set data.channels to 1")) << r.output;
  // The matching value trains.
  auto ok = run_command(tiny_train_command(db_, dir_->path() / "runs", "--max_steps 1 --data.channels 1"));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST_F(RaveBadInput, CheckpointOfAnotherConfigIsRefusedWithBothSignatures) {
  auto first = run_command(tiny_train_command(db_, dir_->path() / "ck", "--max_steps 2"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path ckpt = run_dir_from_output(first.output) / "checkpoints" / "last.ckpt";
  ASSERT_TRUE(fs::exists(ckpt));
  auto r = run_command(tiny_train_command(db_, dir_->path() / "ck",
                                          "--max_steps 4 --ckpt " + quote(ckpt.string()) + " --model.capacity 16"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "checkpoint '" + ckpt.string() + "' was made with another config")) << r.output;
  EXPECT_TRUE(contains(r.output, "capacity = 8")) << r.output;
  EXPECT_TRUE(contains(r.output, "capacity = 16")) << r.output;
  EXPECT_FALSE(contains(r.output, "step 3/")) << r.output;
}

TEST_F(RaveBadInput, NonFiniteLossFailsTheRunAndKeepsTheLastGoodCheckpoint) {
  auto r = run_command(tiny_train_command(
      db_, dir_->path() / "nan", "--max_steps 30 --save_every 10 --log_every 5 --train.inject_nan_at_step 15"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "non-finite loss at step 15")) << r.output;
  const fs::path run = run_dir_from_output(r.output);
  ASSERT_FALSE(run.empty()) << r.output;

  auto summary = read_json(run / "training_summary.json");
  EXPECT_EQ(summary["status"], "failed: non-finite loss at step 15");
  EXPECT_EQ(summary["total_steps"], 15);  // steps 0..14 completed

  const fs::path last = run / "checkpoints" / "last.ckpt";
  ASSERT_TRUE(fs::exists(last));
  EXPECT_EQ(read_checkpoint_meta(last).step, 10);
  EXPECT_FALSE(fs::exists(run / "checkpoints" / "step_20.ckpt"));
  const auto tensors = checkpoint_tensors(last);
  const auto step10 = checkpoint_tensors(run / "checkpoints" / "step_10.ckpt");
  ASSERT_EQ(tensors.size(), step10.size());
  for (const auto& [name, t] : tensors) {
    if (t.is_floating_point()) {
      EXPECT_TRUE(torch::isfinite(t).all().item<bool>()) << name;
    }
    EXPECT_TRUE(torch::equal(t, step10.at(name))) << name;
  }
  // The intact checkpoint resumes.
  auto resumed = run_command(tiny_train_command(db_, dir_->path() / "nan",
                                                "--max_steps 12 --ckpt " + quote(last.string())));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, "at step 10")) << resumed.output;
}

}  // namespace
}  // namespace rt::e2e
