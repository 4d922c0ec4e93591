// Resuming is exact: 40 steps in one go and 20 + `--ckpt last` + 20 give bitwise the same
// checkpoint on CPU (fixed seed, one thread), even with another validation cadence; and the
// encoder is frozen in phase 2 (no Adam momentum drift).
#include "e2e/e2e_fixtures.h"

namespace rt::e2e {
namespace {

std::map<std::string, torch::Tensor> with_prefix(const std::map<std::string, torch::Tensor>& all,
                                                 const std::string& prefix) {
  // encoder.warmed_up is the phase flag itself (a buffer), not a trained tensor.
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, t] : all)
    if (name.rfind(prefix, 0) == 0 && name != prefix + "warmed_up") out[name] = t;
  return out;
}

// The latent PCA buffers are what the last phase-1 validation fitted (models/rave/latent_pca.h):
// outputs of validation, not training state, and the runs below validate at other steps.
bool is_validation_output(const std::string& name) {
  for (const char* buffer : {"model.rave.latent_pca", "model.rave.latent_mean", "model.rave.fidelity"}) {
    if (name == buffer) return true;
  }
  return false;
}

// Names of the training tensors that differ (bitwise) between a and b; a missing name counts as
// a difference.
std::vector<std::string> differing(const std::map<std::string, torch::Tensor>& a,
                                   const std::map<std::string, torch::Tensor>& b) {
  std::vector<std::string> out;
  for (const auto& [name, t] : a) {
    if (is_validation_output(name)) continue;
    auto it = b.find(name);
    if (it == b.end() || !t.sizes().equals(it->second.sizes()) ||
        t.scalar_type() != it->second.scalar_type() || !torch::equal(t, it->second)) {
      out.push_back(name);
    }
  }
  for (const auto& [name, t] : b)
    if (!a.count(name)) out.push_back(name);
  return out;
}

std::string first_few(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 5; ++i) s += names[i] + " ";
  return s + "(" + std::to_string(names.size()) + " in all)";
}

class RaveResume : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_rave_resume");
    db_ = make_demo_db(dir_->path());
    // Phase 2 from step 30: the resumed half crosses into it (discriminator optimizer, frozen
    // encoder); β still warms up (100 steps) and the LR decays, both from the step counter.
    const std::string common = "--seed 3 --save_every 10 --train.phase_1_duration 30 ";
    auto a =
        run_command(tiny_train_command(db_, dir_->path() / "a", common + "--max_steps 40 --val_every 100"));
    ASSERT_EQ(a.exit_code, 0) << a.output;
    run_a_ = run_dir_from_output(a.output);
    // Another validation cadence in the split run: validation must not touch the training stream.
    auto b1 =
        run_command(tiny_train_command(db_, dir_->path() / "b", common + "--max_steps 20 --val_every 7"));
    ASSERT_EQ(b1.exit_code, 0) << b1.output;
    auto b2 = run_command(
        tiny_train_command(db_, dir_->path() / "b", common + "--max_steps 40 --val_every 7 --ckpt last"));
    ASSERT_EQ(b2.exit_code, 0) << b2.output;
    resume_output_ = b2.output;
    run_b_ = run_dir_from_output(b2.output);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    ASSERT_FALSE(run_a_.empty());
    ASSERT_FALSE(run_b_.empty());
  }

  static ScratchDir* dir_;
  static fs::path db_, run_a_, run_b_;
  static std::string resume_output_;
};
ScratchDir* RaveResume::dir_ = nullptr;
fs::path RaveResume::db_, RaveResume::run_a_, RaveResume::run_b_;
std::string RaveResume::resume_output_;

TEST_F(RaveResume, TwentyPlusTwentyStepsEqualFortyStepsBitwise) {
  EXPECT_NE(resume_output_.find("at step 20"), std::string::npos) << resume_output_;
  const auto a = checkpoint_tensors(run_a_ / "checkpoints" / "last.ckpt");
  const auto b = checkpoint_tensors(run_b_ / "checkpoints" / "last.ckpt");
  ASSERT_GT(with_prefix(a, "model.rave.").size(), 10u) << "no model tensors found";
  ASSERT_FALSE(with_prefix(a, "model.dis_opt.").empty()) << "no discriminator optimizer state";
  const auto diff = differing(a, b);
  EXPECT_TRUE(diff.empty()) << "differ: " << first_few(diff);
  // The halves of the split run are real checkpoints: step 20 already equals run a's step 20.
  EXPECT_TRUE(differing(checkpoint_tensors(run_a_ / "checkpoints" / "step_20.ckpt"),
                        checkpoint_tensors(run_b_ / "checkpoints" / "step_20.ckpt"))
                  .empty());
  auto summary = read_json(run_b_ / "training_summary.json");
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["total_steps"], 20);  // the steps this process ran
}

TEST_F(RaveResume, EncoderIsFrozenInPhaseTwoWhileDecoderAndDiscriminatorTrain) {
  const auto s20 = checkpoint_tensors(run_a_ / "checkpoints" / "step_20.ckpt");
  const auto s30 = checkpoint_tensors(run_a_ / "checkpoints" / "step_30.ckpt");
  const auto s40 = checkpoint_tensors(run_a_ / "checkpoints" / "step_40.ckpt");
  const std::string enc = "model.rave.encoder.", dec = "model.rave.decoder.",
                    dis = "model.rave.discriminator.";
  ASSERT_FALSE(with_prefix(s30, enc).empty());
  // Phase 1 (steps 20..29): the encoder trains.
  EXPECT_FALSE(differing(with_prefix(s20, enc), with_prefix(s30, enc)).empty());
  // Phase 2 (steps 30..39, generator steps among them): bitwise unchanged encoder...
  const auto enc_diff = differing(with_prefix(s30, enc), with_prefix(s40, enc));
  EXPECT_TRUE(enc_diff.empty()) << "encoder moved in phase 2: " << first_few(enc_diff);
  // ...while the decoder and the discriminator do train.
  EXPECT_FALSE(differing(with_prefix(s30, dec), with_prefix(s40, dec)).empty());
  EXPECT_FALSE(differing(with_prefix(s30, dis), with_prefix(s40, dis)).empty());
}

}  // namespace
}  // namespace rt::e2e
