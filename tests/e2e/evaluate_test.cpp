// `evaluate` scores a checkpoint on a database as the run's validation did: the same figures on
// the same held-out split, R² per session, the other splits, and clear refusals of a database
// the model cannot decode (other sessions, other unit counts) and of an --output it must not
// replace.
#include <unistd.h>

#include <cctype>
#include <fstream>

#include "e2e/e2e_fixtures.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

using testing::contains;

class Evaluate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_evaluate");
    // Three sessions of 64 units, 24 trials each: 72, of which 8 are held out (data/split.h:
    // train = floor(0.9 · 72) = 64).
    db_ = make_neural_db(dir_->path() / "three", "--groups 3 --units 64 --trials 24 --seed 3");
    auto r = run_command(bin_path("train") + " --config tiny_ssm --db_path " + quote(db_.string()) +
                         " --out_path " + quote((dir_->path() / "runs").string()) +
                         " --threads 1 --max_steps 20 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    run_ = run_dir_from_output(r.output);
  }
  // A failure in SetUpTestSuite only skips the tests under ctest: each test fails instead.
  void SetUp() override {
    ASSERT_TRUE(fs::is_regular_file(run_ / "checkpoints" / "last.ckpt")) << "the suite's training run failed";
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static CommandResult evaluate(const std::string& args) {
    return run_command(bin_path("evaluate") + " --threads 1 " + args + " 2>&1");
  }
  static Json evaluate_json(const std::string& args, const std::string& name) {
    const fs::path out = dir_->path() / (name + ".json");
    auto r = evaluate(args + " --output " + quote(out.string()));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? Json::parse(read_file(out)) : Json();
  }
  static ScratchDir* dir_;
  static fs::path db_, run_;
};
ScratchDir* Evaluate::dir_ = nullptr;
fs::path Evaluate::db_, Evaluate::run_;

// The run validated at its last step, the step of last.ckpt: evaluate finds the same figures,
// pooled and per session, from the checkpoint alone (its config, the database it names).
TEST_F(Evaluate, ScoresTheHeldOutSplitAsTheRunsValidationDid) {
  const Json summary = Json::parse(read_file(run_ / "training_summary.json"));
  const Json& trained = summary.at("metrics");
  const Json e = evaluate_json("--ckpt " + quote((run_ / "checkpoints" / "last.ckpt").string()), "val");
  ASSERT_TRUE(e.is_object());
  EXPECT_EQ(e.at("split"), "val");
  EXPECT_EQ(e.at("step"), 20);
  EXPECT_EQ(e.at("examples"), 8);
  ASSERT_TRUE(trained.contains("val/r2")) << summary.dump(2);
  for (const auto& [name, value] : trained.items()) {
    ASSERT_TRUE(e.at("metrics").contains(name)) << name;
    EXPECT_NEAR(e.at("metrics").at(name).get<double>(), value.get<double>(), 1e-9) << name;
  }
  ASSERT_EQ(e.at("per_session_r2").size(), 3u);
  for (const char* g : {"synthetic_reach_0", "synthetic_reach_1", "synthetic_reach_2"}) {
    EXPECT_NEAR(e.at("per_session_r2").at(g).get<double>(),
                trained.at(std::string("val/r2_group_") + g).get<double>(), 1e-9)
        << g;
  }
  // The run directory and `last` name the same model.
  auto text = evaluate("--ckpt last --out_path " + quote((dir_->path() / "runs").string()));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_TRUE(contains(text.output, "R² per session:")) << text.output;
  EXPECT_TRUE(contains(text.output, "split val: 8 example(s)")) << text.output;
}

TEST_F(Evaluate, TrainAndAllSplitsCountTheirExamples) {
  const std::string ckpt = " --ckpt " + quote(run_.string());
  EXPECT_EQ(evaluate_json(ckpt + " --split train", "train").at("examples"), 64);
  const Json all = evaluate_json(ckpt + " --split all", "all");
  EXPECT_EQ(all.at("examples"), 72);
  EXPECT_EQ(all.at("db_path"), db_.string());
  auto bad = evaluate(ckpt + " --split test");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(contains(bad.output, "--split")) << bad.output;
}

// A session's read-in is its own: a database with another session in its place, or with
// another unit count, is refused naming what differs. Before the session names were stored,
// the first would have been decoded with the wrong read-ins.
TEST_F(Evaluate, ADatabaseOfOtherSessionsOrUnitsIsRefusedNamingWhatDiffers) {
  const fs::path h5 = dir_->path() / "three" / "h5", swapped = dir_->path() / "swapped";
  fs::create_directories(swapped);
  fs::copy_file(h5 / "synthetic_reach_0.h5", swapped / "another_session.h5");
  fs::copy_file(h5 / "synthetic_reach_1.h5", swapped / "synthetic_reach_1.h5");
  fs::copy_file(h5 / "synthetic_reach_2.h5", swapped / "synthetic_reach_2.h5");
  const fs::path swapped_db = dir_->path() / "swapped_db";
  auto i = run_command(bin_path("preprocess") + " --kind neural --input_path " + quote(swapped.string()) +
                       " --output_path " + quote(swapped_db.string()) + " 2>&1");
  ASSERT_EQ(i.exit_code, 0) << i.output;
  auto r = evaluate("--ckpt " + quote(run_.string()) + " --db_path " + quote(swapped_db.string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "trained on the session(s) [synthetic_reach_0, synthetic_reach_1, "
                       "synthetic_reach_2], but database '" +
                           swapped_db.string() + "' holds [another_session, synthetic_reach_1"))
      << r.output;
  // Resuming on it is refused the same way, before anything is written.
  auto resume = run_command(bin_path("train") + " --config tiny_ssm --threads 1 --max_steps 30 --db_path " +
                            quote(swapped_db.string()) + " --ckpt " +
                            quote((run_ / "checkpoints" / "last.ckpt").string()) + " 2>&1");
  EXPECT_EQ(resume.exit_code, 2) << resume.output;
  EXPECT_TRUE(contains(resume.output, "holds [another_session, synthetic_reach_1")) << resume.output;

  const fs::path narrow = make_neural_db(dir_->path() / "narrow", "--groups 3 --units 40 --trials 8");
  r = evaluate("--ckpt " + quote(run_.string()) + " --db_path " + quote(narrow.string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "(synthetic_reach_0: 64 → 40, synthetic_reach_1: 64 → 40, synthetic_reach_2: 64 → 40 "
                       "units)"))
      << r.output;

  r = evaluate("--ckpt " + quote((dir_->path() / "nowhere").string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--ckpt = '" + (dir_->path() / "nowhere").string() + "' does not exist"))
      << r.output;
}

// The same session names, one session with fewer units: the read-in, padded to the widest
// session (64), keeps its shape, so the weights would load; the recorded unit counts refuse it,
// in evaluate and in a resume.
TEST_F(Evaluate, TheSameSessionsWithOtherUnitCountsAreRefusedNamingTheSession) {
  const fs::path other =
      make_neural_db(dir_->path() / "renumbered", "--groups 3 --units 64,48,64 --trials 8");
  auto r = evaluate("--ckpt " + quote(run_.string()) + " --db_path " + quote(other.string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(
      r.output, "other unit counts in database '" + other.string() + "' (synthetic_reach_1: 64 → 48 units)"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "R²")) << r.output;
  auto resume = run_command(bin_path("train") + " --config tiny_ssm --threads 1 --max_steps 30 --db_path " +
                            quote(other.string()) + " --ckpt " +
                            quote((run_ / "checkpoints" / "last.ckpt").string()) + " 2>&1");
  EXPECT_EQ(resume.exit_code, 2) << resume.output;
  EXPECT_TRUE(contains(resume.output, "(synthetic_reach_1: 64 → 48 units)")) << resume.output;
}

TEST_F(Evaluate, OutputReplacesNoCheckpointAndNoFileWithoutForce) {
  const fs::path ckpt = run_ / "checkpoints" / "last.ckpt";
  const std::string bytes = read_file(ckpt);
  auto r = evaluate("--ckpt " + quote(run_.string()) + " --output " + quote(ckpt.string()) + " --force");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--output '" + ckpt.string() + "' is")) << r.output;
  EXPECT_EQ(read_file(ckpt), bytes);
  const fs::path mine = dir_->path() / "mine.json";
  write_file_atomic(mine, "keep");
  r = evaluate("--ckpt " + quote(run_.string()) + " --output " + quote(mine.string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "already exists; pass --force")) << r.output;
  EXPECT_EQ(read_file(mine), "keep");
  r = evaluate("--ckpt " + quote(run_.string()) + " --output " + quote(mine.string()) + " --force");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Json::parse(read_file(mine)).contains("per_session_r2"));
}

// RAVE: the validation distance of the checkpoint, on its database.
TEST_F(Evaluate, ScoresARaveCheckpoint) {
  const fs::path audio_db = make_demo_db(dir_->path() / "audio", 1.0);
  const fs::path out = dir_->path() / "rave_runs";
  auto t = run_command(tiny_train_command(audio_db, out, "--max_steps 2 --val_every 2 2>&1"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const fs::path run = run_dir_from_output(t.output);
  const Json trained = Json::parse(read_file(run / "training_summary.json")).at("metrics");
  const Json e = evaluate_json("--ckpt " + quote((run / "checkpoints" / "last.ckpt").string()), "rave");
  ASSERT_TRUE(e.is_object());
  EXPECT_EQ(e.at("model_family"), "rave");
  EXPECT_TRUE(e.at("per_session_r2").empty());
  ASSERT_FALSE(trained.empty());
  for (const auto& [name, value] : trained.items()) {
    ASSERT_TRUE(e.at("metrics").contains(name)) << name;
    EXPECT_NEAR(e.at("metrics").at(name).get<double>(), value.get<double>(),
                1e-6 * std::abs(value.get<double>()))
        << name;
  }
}

// A validation pass over a large database is one long call: SIGTERM ends evaluate at once
// (exit 143), with nothing written, instead of after the pass.
TEST_F(Evaluate, SigtermDuringALongEvaluationEndsItAtOnce) {
  // About 4,300 examples of 16384 samples: over ten seconds of validation at batch 1 on one
  // thread (a 2-core VM took 3.8 s for 1,288), so the signal lands inside the pass.
  const fs::path audio_db = make_demo_db(dir_->path() / "long_audio", 200.0);
  const fs::path out = dir_->path() / "long_runs";
  auto t = run_command(tiny_train_command(audio_db, out, "--max_steps 1 --val_every 1000 2>&1"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const fs::path run = run_dir_from_output(t.output), json = dir_->path() / "long.json";
  BackgroundProcess p(bin_path("evaluate") + " --threads 1 --workers 0 --batch 1 --split all --ckpt " +
                          quote(run.string()) + " --output " + quote(json.string()),
                      dir_->path() / "long.log");
  // Loaded (about a second of CPU) and inside the pass.
  ASSERT_TRUE(p.wait_until(
      [&] {
        std::ifstream stat("/proc/" + std::to_string(p.pid()) + "/stat");
        std::string field;
        for (int i = 0; i < 14 && stat >> field;) ++i;  // utime, the 14th field, in clock ticks
        return !field.empty() && std::isdigit(static_cast<unsigned char>(field[0])) &&
               std::stol(field) > 2 * ::sysconf(_SC_CLK_TCK);
      },
      120))
      << p.log();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(60), 143) << p.log();
  EXPECT_TRUE(contains(p.log(), "evaluate: stopped by SIGTERM while evaluating; nothing was written"))
      << p.log();
  EXPECT_FALSE(fs::exists(json));
}

}  // namespace
}  // namespace rt::e2e
