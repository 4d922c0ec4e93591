// Stopping a profiled run: Ctrl-C (SIGINT) and SIGTERM flush every file and exit 130 / 143
// with status "interrupted"; kill -9 still leaves parseable timing and memory profiles.
#include "e2e/e2e_fixtures.h"
#include "util/profile_files.h"

namespace rt::e2e {
namespace {

class ProfilingSignals : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_profiling_signals");
    db_ = make_demo_db(dir_->path());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // A 1000-step profiled run in the background, logging every step.
  static std::unique_ptr<BackgroundProcess> start(const std::string& name) {
    return std::make_unique<BackgroundProcess>(
        tiny_train_command(db_, dir_->path() / name,
                           "--max_steps 1000 --log_every 1 --profiling.memory_every 5 "
                           "--enable_timing_profiling --enable_memory_profiling"),
        dir_->path() / (name + ".log"));
  }
  static ScratchDir* dir_;
  static fs::path db_;
};
ScratchDir* ProfilingSignals::dir_ = nullptr;
fs::path ProfilingSignals::db_;

void expect_interrupted_run(BackgroundProcess& p, int sig, int expected_exit) {
  ASSERT_TRUE(p.wait_until([&] { return last_logged_step(p.log()) >= 20; }, 120)) << p.log();
  p.signal(sig);
  const int code = p.wait_exit(60);
  const std::string log = p.log();
  EXPECT_EQ(code, expected_exit) << log;
  const fs::path run = run_dir_from_output(log);
  ASSERT_FALSE(run.empty()) << log;

  const Json summary = read_json(run / "training_summary.json");
  EXPECT_EQ(summary.at("status"), "interrupted");
  const Json timing = read_json(run / "timing_profile.json");
  const Json memory = read_json(run / "memory_profile.json");
  ASSERT_TRUE(timing.is_array());
  ASSERT_TRUE(memory.is_array());
  const int64_t steps = summary.at("total_steps");
  EXPECT_GE(steps, 20);
  EXPECT_LT(steps, 1000);
  // Every step done is in the flushed profile, and the summary counts exactly those.
  EXPECT_EQ(static_cast<int64_t>(timing.size()), steps);
  EXPECT_EQ(timing.back().at("step"), steps - 1);
  EXPECT_EQ(last_logged_step(log), steps);
  EXPECT_EQ(static_cast<int64_t>(memory.size()), (steps + 4) / 5);  // steps 0, 5, 10, ...
  EXPECT_NE(log.find("training interrupted after " + std::to_string(steps) + " steps"), std::string::npos) << log;
  // The final checkpoint of an interrupted run is the step it stopped at.
  EXPECT_TRUE(fs::exists(run / "checkpoints" / "last.ckpt"));
}

TEST_F(ProfilingSignals, SigintStopsWithExitCode130AndFlushedFiles) {
  auto p = start("int");
  expect_interrupted_run(*p, SIGINT, 130);
}

TEST_F(ProfilingSignals, SigtermStopsWithExitCode143AndFlushedFiles) {
  auto p = start("term");
  expect_interrupted_run(*p, SIGTERM, 143);
}

TEST_F(ProfilingSignals, KillNineLeavesParseableProfiles) {
  auto proc = start("kill");
  BackgroundProcess& p = *proc;
  // Past the first flushes (the writers rewrite their files at most every 2 s).
  ASSERT_TRUE(p.wait_until([&] { return last_logged_step(p.log()) >= 20; }, 120)) << p.log();
  const fs::path run = run_dir_from_output(p.log());
  ASSERT_FALSE(run.empty());
  ASSERT_TRUE(p.wait_until([&] { return fs::exists(run / "timing_profile.json") && fs::exists(run / "memory_profile.json"); }, 60));
  p.signal(SIGKILL);
  EXPECT_EQ(p.wait_exit(60), 128 + SIGKILL);
  for (const char* file : {"timing_profile.json", "memory_profile.json"}) {
    // Valid line by line (util/profile_files.h): a kill in the middle of a flush's write leaves
    // every complete line readable.
    Json j;
    ASSERT_NO_THROW(j = read_profile_entries(run / file)) << file;
    ASSERT_TRUE(j.is_array()) << file;
    ASSERT_FALSE(j.empty()) << file;
    for (size_t i = 0; i < j.size(); ++i) EXPECT_TRUE(j[i].contains("step")) << file;
  }
}

}  // namespace
}  // namespace rt::e2e
