// SSM resuming is exact with the fused block kernels and dropout on: 20 steps in one go and
// 10 + `--ckpt last` + 10 give bitwise the same checkpoint (the hash-dropout seeds are drawn from
// torch's default generator, whose state the checkpoint restores).
#include "e2e/e2e_fixtures.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

// One group of synthetic reaching trials imported to <root>/db (its HDF5 in <root>/h5); the
// test stops when preprocessing failed.
void make_one_session_db(const fs::path& root) {
  e2e::make_neural_db(root, "--groups 1 --units 182 --trials 64 --seed 7");
  ASSERT_FALSE(::testing::Test::HasFailure()) << "preparing the neural database failed";
}

TEST(SsmFusedResume, SplitRunWithDropoutEqualsOneRunBitwise) {
  ScratchDir dir("e2e_ssm_fused_resume");
  const fs::path root = dir.path();
  ASSERT_NO_FATAL_FAILURE(make_one_session_db(root));
  // tiny_ssm runs scan = "fused" (the fused block kernels); dropout 0.1 makes the masks matter.
  const std::string common = bin_path("train") + " --config tiny_ssm --db_path " +
                             quote((root / "db").string()) +
                             " --threads 1 --seed 3 --save_every 10 --val_every 7 --model.dropout 0.1";
  auto a = run_command(common + " --out_path " + quote((root / "a").string()) + " --max_steps 20");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b1 = run_command(common + " --out_path " + quote((root / "b").string()) + " --max_steps 10");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  auto b2 =
      run_command(common + " --out_path " + quote((root / "b").string()) + " --max_steps 20 --ckpt last");
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  EXPECT_NE(b2.output.find("at step 10"), std::string::npos) << b2.output;

  const fs::path run_a = run_dir_from_output(a.output), run_b = run_dir_from_output(b2.output);
  const auto ta = checkpoint_tensors(run_a / "checkpoints" / "last.ckpt");
  const auto tb = checkpoint_tensors(run_b / "checkpoints" / "last.ckpt");
  const auto t10 = checkpoint_tensors(run_a / "checkpoints" / "step_10.ckpt");
  ASSERT_FALSE(ta.empty());
  int changed = 0;
  for (const auto& [name, t] : ta) {
    ASSERT_TRUE(tb.count(name)) << name;
    EXPECT_TRUE(torch::equal(t, tb.at(name))) << name;
    if (t10.count(name) && !torch::equal(t, t10.at(name))) ++changed;
  }
  EXPECT_GT(changed, 5);  // steps 10–20 trained something
}

TEST(SsmFusedResume, AFusedRunResumesUnderTheParallelScan) {
  // model.scan is an implementation choice (the same function of the same parameters), so it is
  // no part of the checkpoint's config signature: a fused run resumes as parallel and back.
  ScratchDir dir("e2e_ssm_scan_resume");
  const fs::path root = dir.path();
  ASSERT_NO_FATAL_FAILURE(make_one_session_db(root));
  const std::string common = bin_path("train") + " --config tiny_ssm --db_path " +
                             quote((root / "db").string()) + " --out_path " +
                             quote((root / "runs").string()) + " --threads 1 --val_every 100";
  auto fused = run_command(common + " --max_steps 4 --model.scan fused");
  ASSERT_EQ(fused.exit_code, 0) << fused.output;
  auto parallel = run_command(common + " --max_steps 6 --ckpt last --model.scan parallel");
  ASSERT_EQ(parallel.exit_code, 0) << parallel.output;
  EXPECT_NE(parallel.output.find("at step 4"), std::string::npos) << parallel.output;
  const std::string config = read_file(run_dir_from_output(parallel.output) / "config.toml");
  EXPECT_NE(config.find("scan = \"parallel\""), std::string::npos) << config;
  auto back = run_command(common + " --max_steps 8 --ckpt last --model.scan fused");
  ASSERT_EQ(back.exit_code, 0) << back.output;
  EXPECT_NE(back.output.find("at step 6"), std::string::npos) << back.output;
}

}  // namespace
}  // namespace rt::e2e
