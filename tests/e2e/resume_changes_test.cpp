// A resume that changes settings says so: a diff at start (the checkpoint's value → now, and
// where the new one was set), `config_changes` in the summary, and the run's earlier config.toml
// kept as config.<step>.toml. Keys that mean nothing to the family are refused on a resume with
// the message of a fresh run. Before: a resume with another --batch, --n_signal, --threads,
// --workers or --seed was accepted silently and config.toml overwritten.
#include "e2e/e2e_fixtures.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

using testing::contains;

class ResumeChanges : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_resume_changes");
    db_ = make_neural_db(dir_->path(), "--groups 1 --units 24 --trials 48 --seed 3");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string ssm(const fs::path& out, const std::string& extra, int batch = 8) {
    return bin_path("train") + " --config tiny_ssm --db_path " + quote(db_.string()) + " --out_path " +
           quote(out.string()) + " --batch " + std::to_string(batch) +
           " --log_every 5 --val_every 10 --save_every 10 " + extra;
  }
  static ScratchDir* dir_;
  static fs::path db_;
};
ScratchDir* ResumeChanges::dir_ = nullptr;
fs::path ResumeChanges::db_;

TEST_F(ResumeChanges, AResumeThatChangesSettingsPrintsTheDiffAndKeepsTheEarlierConfig) {
  const fs::path out = dir_->path() / "diff";
  auto first = run_command(ssm(out, "--max_steps 10 --seed 1"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path run = run_dir_from_output(first.output);
  const std::string before = read_file(run / "config.toml");

  auto r = run_command(ssm(out, "--max_steps 20 --seed 2 --workers 0 --ckpt last", 4));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "resuming with 4 changed settings (the checkpoint's → now):")) << r.output;
  EXPECT_TRUE(contains(r.output, "  train.batch: 8 → 4  (--batch)")) << r.output;
  EXPECT_TRUE(contains(r.output, "  train.seed: 1 → 2")) << r.output;
  EXPECT_TRUE(contains(r.output, "  data.workers: 1 → 0")) << r.output;
  EXPECT_TRUE(contains(r.output, "  train.max_steps: 10 → 20")) << r.output;
  EXPECT_TRUE(
      contains(r.output, "the run's earlier config.toml is kept as " + (run / "config.10.toml").string()))
      << r.output;
  ASSERT_TRUE(fs::exists(run / "config.10.toml"));
  EXPECT_EQ(read_file(run / "config.10.toml"), before);
  EXPECT_TRUE(contains(read_file(run / "config.toml"), "batch = 4"));
  const Json summary = read_json(run / "training_summary.json");
  ASSERT_TRUE(summary.contains("config_changes")) << summary.dump(2);
  bool batch = false;
  for (const auto& c : summary.at("config_changes")) {
    if (c.at("key") == "train.batch") batch = c.at("before") == "8" && c.at("after") == "4";
  }
  EXPECT_TRUE(batch) << summary.dump(2);
  EXPECT_EQ(summary.at("previous_config"), "config.10.toml");

  // A resume with the same settings prints no diff and keeps no copy.
  auto same = run_command(ssm(out, "--max_steps 20 --seed 2 --workers 0 --ckpt last", 4));
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_FALSE(contains(same.output, "resuming with")) << same.output;
  EXPECT_FALSE(fs::exists(run / "config.20.toml"));
}

TEST_F(ResumeChanges, AnAudioKeyIsRefusedForSsmOnAFreshRunAndOnAResumeAlike) {
  const fs::path out = dir_->path() / "family";
  auto fresh = run_command(ssm(out, "--max_steps 10 --n_signal 8192"));
  EXPECT_EQ(fresh.exit_code, 2) << fresh.output;
  const std::string message = "data.n_signal does not apply to model.family = ssm";
  EXPECT_TRUE(contains(fresh.output, message)) << fresh.output;
  auto first = run_command(ssm(out, "--max_steps 10"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto resumed = run_command(ssm(out, "--max_steps 20 --n_signal 8192 --ckpt last"));
  EXPECT_EQ(resumed.exit_code, 2) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, message)) << resumed.output;
  // Its default value, as a run's config.toml records it, is accepted.
  auto same = run_command(ssm(out, "--max_steps 12 --n_signal 131072 --ckpt last"));
  EXPECT_EQ(same.exit_code, 0) << same.output;
}

}  // namespace
}  // namespace rt::e2e
