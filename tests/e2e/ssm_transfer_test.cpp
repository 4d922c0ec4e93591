// Pretrain → transfer (families/ssm/ssm_transfer.h) through `train`: a small foundational decoder
// pretrained on three sessions of synthetic reaching data is carried to a fourth session with
// another unit count, in each train.transfer_mode, and the checkpoints are compared tensor by
// tensor with the pretrained one.
#include <gtest/gtest.h>

#include "e2e/e2e_fixtures.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

using testing::contains;

// foundational's shape, small: width 16, state 8, one block, context 4.
const std::string kTransferModel =
    " --threads 1 --model.d_model 16 --model.state_dim 8 --model.n_layers 1 --model.context_dim 4"
    " --train.batch 8 --train.warmup_steps 0 --train.val_every 4 --train.save_every 4 --train.log_every 4";

class SsmTransfer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("ssm_transfer");
    pretrain_db_ = e2e::make_neural_db(dir_->path() / "pretrain",
                                       "--groups 3 --units 40,32,24 --trials 24 --bins 40 --seed 3");
    new_db_ = e2e::make_neural_db(dir_->path() / "new_session",
                                  "--groups 1 --units 28 --trials 24 --bins 40 --seed 9");
    auto r =
        run_command(bin_path("train") + " --config foundational --db_path " + quote(pretrain_db_.string()) +
                    " --out_path " + quote((dir_->path() / "runs").string()) +
                    " --name pretrained --max_steps 4" + kTransferModel);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    pretrained_ = new fs::path(run_dir_from_output(r.output));
  }
  // A failure in SetUpTestSuite only skips the tests under ctest: each test fails instead.
  void SetUp() override {
    ASSERT_TRUE(pretrained_ != nullptr && fs::is_directory(*pretrained_))
        << "the suite's pretraining run failed";
  }
  static void TearDownTestSuite() {
    delete pretrained_;
    delete dir_;
  }

  // `train --config foundational_transfer --init_from <init_from> --db_path <new session>`.
  static CommandResult transfer(const std::string& name, const std::string& extra,
                                const fs::path& init_from = {}) {
    return run_command(bin_path("train") + " --config foundational_transfer --init_from " +
                       quote((init_from.empty() ? *pretrained_ : init_from).string()) + " --db_path " +
                       quote(new_db_.string()) + " --out_path " + quote((dir_->path() / "runs").string()) +
                       " --name " + name + " --max_steps 4" + kTransferModel + " " + extra);
  }

  static std::map<std::string, torch::Tensor> model_tensors(const fs::path& run) {
    std::map<std::string, torch::Tensor> out;
    for (const auto& [name, t] : checkpoint_tensors(run / "checkpoints" / "last.ckpt")) {
      const std::string prefix = "model.ssm.";
      if (name.rfind(prefix, 0) == 0) out[name.substr(prefix.size())] = t;
    }
    return out;
  }

  static inline ScratchDir* dir_ = nullptr;
  static inline fs::path pretrain_db_, new_db_;
  static inline fs::path* pretrained_ = nullptr;
};

bool bitwise_same(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && torch::equal(a, b);
}

TEST_F(SsmTransfer, EncoderOnlyKeepsTheCopiedBlocksAndDecoderBitIdenticalAndTrainsANewReadIn) {
  auto r = transfer("encoder_only", "--train.transfer_mode encoder_only");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "init_from " + (*pretrained_ / "checkpoints" / "best.ckpt").string() +
                                     " (ssm foundational, s5, step 4):"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "\n    blocks.0.ssm [6 tensors]")) << r.output;
  EXPECT_TRUE(contains(r.output, "\n    decoder [2 tensors]")) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "made anew (3 tensors):\n    encoders.0 (the new session's) [2 tensors]\n    "
                       "context (the new session's)"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "train.transfer_mode = encoder_only: ")) << r.output;

  const auto before = model_tensors(*pretrained_);
  const auto after = model_tensors(run_dir_from_output(r.output));
  int compared = 0;
  for (const auto& [name, t] : after) {
    if (name.rfind("blocks.", 0) != 0 && name.rfind("decoder.", 0) != 0) continue;
    if (contains(name, "running_") || contains(name, "num_batches_tracked"))
      continue;  // statistics, not weights
    ASSERT_TRUE(before.count(name)) << name;
    EXPECT_TRUE(bitwise_same(t, before.at(name))) << name << " moved in encoder_only";
    ++compared;
  }
  EXPECT_GE(compared, 12);
  // The new session's read-in: 28 units (its own width) → d_model − context_dim.
  ASSERT_TRUE(after.count("encoders.0.weight"));
  EXPECT_EQ(after.at("encoders.0.weight").sizes(), (std::vector<int64_t>{12, 28}));
}

TEST_F(SsmTransfer, FreezeAKeepsLambdaAndTheLogStepAndTrainsTheRest) {
  auto r = transfer("freeze_a", "--train.transfer_mode freeze_a");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto before = model_tensors(*pretrained_);
  const auto after = model_tensors(run_dir_from_output(r.output));
  for (const char* name : {"blocks.0.ssm.Lambda_re", "blocks.0.ssm.Lambda_im", "blocks.0.ssm.log_step"}) {
    ASSERT_TRUE(after.count(name) && before.count(name)) << name;
    EXPECT_TRUE(bitwise_same(after.at(name), before.at(name))) << name << " moved in freeze_a";
  }
  for (const char* name : {"blocks.0.ssm.B", "blocks.0.glu_w1.weight", "decoder.weight"}) {
    ASSERT_TRUE(after.count(name) && before.count(name)) << name;
    EXPECT_FALSE(bitwise_same(after.at(name), before.at(name))) << name << " did not train in freeze_a";
  }
}

TEST_F(SsmTransfer, AllTrainsEverythingAndReportsRSquaredPerSession) {
  auto r = transfer("all", "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "train.transfer_mode =")) << r.output;
  const auto before = model_tensors(*pretrained_);
  const auto after = model_tensors(run_dir_from_output(r.output));
  for (const char* name : {"blocks.0.ssm.Lambda_re", "blocks.0.ssm.B", "decoder.weight"}) {
    ASSERT_TRUE(after.count(name) && before.count(name)) << name;
    EXPECT_FALSE(bitwise_same(after.at(name), before.at(name))) << name << " did not train in all";
  }
  // The pretraining validated each of its three sessions on its own.
  const auto scalars = read_scalars(*pretrained_);
  int sessions = 0;
  for (const auto& [tag, values] : scalars) sessions += tag.rfind("val/r2_group_", 0) == 0 ? 1 : 0;
  EXPECT_EQ(sessions, 3);
  const std::string summary = testing::read_text(*pretrained_ / "training_summary.json");
  EXPECT_TRUE(contains(summary, "\"val/r2_group_")) << summary;
}

// model.ssm = s4d and lru pretrain and transfer the same way: under freeze_a their A and step
// (S4D: log_A_real, A_imag, log_dt; LRU: nu_log, theta_log) stay as pretrained, C trains.
TEST_F(SsmTransfer, EachSsmKindTransfersWithItsAFrozenUnderFreezeA) {
  for (const auto& [kind, frozen] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"s4d", {"log_A_real", "A_imag", "log_dt"}}, {"lru", {"nu_log", "theta_log"}}}) {
    auto pre =
        run_command(bin_path("train") + " --config foundational --db_path " + quote(pretrain_db_.string()) +
                    " --out_path " + quote((dir_->path() / "kinds").string()) + " --name pre_" + kind +
                    " --max_steps 4 --model.ssm " + kind + kTransferModel);
    ASSERT_EQ(pre.exit_code, 0) << pre.output;
    const fs::path pretrained = run_dir_from_output(pre.output);
    auto r =
        transfer("freeze_a_" + kind, "--model.ssm " + kind + " --train.transfer_mode freeze_a", pretrained);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "(ssm foundational, " + kind + ", step 4):")) << r.output;
    const auto before = model_tensors(pretrained);
    const auto after = model_tensors(run_dir_from_output(r.output));
    for (const auto& name : frozen) {
      const std::string key = "blocks.0.ssm." + name;
      ASSERT_TRUE(after.count(key) && before.count(key)) << key;
      EXPECT_TRUE(bitwise_same(after.at(key), before.at(key))) << key << " moved in freeze_a";
    }
    ASSERT_TRUE(after.count("blocks.0.ssm.C"));
    EXPECT_FALSE(bitwise_same(after.at("blocks.0.ssm.C"), before.at("blocks.0.ssm.C"))) << kind;
    // Another kind's blocks do not carry over.
    auto other = transfer("other_kind_" + kind, "--model.ssm s5", pretrained);
    EXPECT_EQ(other.exit_code, 2) << other.output;
    EXPECT_TRUE(contains(other.output, "model.ssm = " + kind + " there, s5 here")) << other.output;
  }
}

// From a `latest` pointer (util/run_pointer.h), as the README's commands use <out_path>/latest.
TEST_F(SsmTransfer, FewShotTrainsOnTheFirstTrialsOfTheSession) {
  fs::create_directories(dir_->path() / "pointer");
  write_file_atomic(dir_->path() / "pointer" / "latest", pretrained_->string() + "\n");
  auto r = transfer("few_shot", "--max_train_trials 5", dir_->path() / "pointer" / "latest");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "data.max_train_trials = 5: training on 5 of the ")) << r.output;
  EXPECT_TRUE(contains(r.output, "(the first 5 of each of 1 group(s))")) << r.output;
}

TEST_F(SsmTransfer, BlocksOfAnotherWidthAreRefusedNamingTheKeys) {
  auto r = transfer("wider", "--model.d_model 24");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "do not match this model's, so they cannot carry over (model.d_model = 16 there, "
                       "24 here): set those model.* keys as the pretraining did"))
      << r.output;
}

TEST_F(SsmTransfer, ACheckpointOfAnotherFamilyOrNoCheckpointIsRefused) {
  const fs::path audio_db = make_demo_db(dir_->path() / "audio");
  auto rave = run_command(tiny_train_command(audio_db, dir_->path() / "rave_runs", "--max_steps 1"));
  ASSERT_EQ(rave.exit_code, 0) << rave.output;
  auto r = run_command(bin_path("train") + " --config foundational_transfer --init_from " +
                       quote(run_dir_from_output(rave.output).string()) + " --db_path " +
                       quote(new_db_.string()) + " --out_path " + quote((dir_->path() / "runs").string()) +
                       " --max_steps 1" + kTransferModel);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "is a checkpoint of model.family = 'rave'; a transfer starts from an ssm checkpoint"))
      << r.output;
  auto empty = transfer("nothing", "", dir_->path() / "pretrain");
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_TRUE(contains(empty.output, "is a directory without checkpoints/best.ckpt or checkpoints/last.ckpt"))
      << empty.output;
}

}  // namespace
}  // namespace rt::e2e
