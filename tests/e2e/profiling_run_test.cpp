// A 50-step tiny_rave run with --enable_timing_profiling --enable_memory_profiling: every
// timing and memory entry is present and plausible, and the TensorBoard file holds the timers
// and throughput scalars (and no timers when timing is off).
#include "e2e/e2e_fixtures.h"

namespace rt::e2e {
namespace {

class ProfilingRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_profiling_run");
    const fs::path db = make_demo_db(dir_->path());
    auto r = run_command(tiny_train_command(
        db, dir_->path() / "runs", "--max_steps 50 --log_every 10 --enable_timing_profiling --enable_memory_profiling"));
    output_ = r.output;
    ASSERT_EQ(r.exit_code, 0) << r.output;
    run_ = run_dir_from_output(r.output);
    auto off = run_command(tiny_train_command(db, dir_->path() / "off", "--max_steps 10 --log_every 5"));
    ASSERT_EQ(off.exit_code, 0) << off.output;
    run_off_ = run_dir_from_output(off.output);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_FALSE(run_.empty()) << output_; }

  static ScratchDir* dir_;
  static fs::path run_, run_off_;
  static std::string output_;
};
ScratchDir* ProfilingRun::dir_ = nullptr;
fs::path ProfilingRun::run_, ProfilingRun::run_off_;
std::string ProfilingRun::output_;

TEST_F(ProfilingRun, TimingProfileHasOnePlausibleEntryPerStep) {
  const Json timing = read_json(run_ / "timing_profile.json");
  ASSERT_TRUE(timing.is_array());
  ASSERT_EQ(timing.size(), 50u);
  const double batch = 4, n_signal = 8192;  // configs/tiny_rave.toml
  double slowest_phase_sum_ratio = 0.0;
  for (size_t i = 0; i < timing.size(); ++i) {
    const Json& e = timing[i];
    SCOPED_TRACE("entry " + std::to_string(i) + ": " + e.dump());
    EXPECT_EQ(e.at("step"), static_cast<int64_t>(i));
    EXPECT_EQ(e.at("batch_idx"), static_cast<int64_t>(i));
    for (const char* key : {"total_batch_time", "samples_per_second", "examples_per_second", "forward_time",
                            "loss_time", "backward_time", "optimizer_time"}) {
      ASSERT_TRUE(e.contains(key)) << key;
      EXPECT_GT(e.at(key).get<double>(), 0.0) << key;
    }
    ASSERT_TRUE(e.contains("data_time"));
    EXPECT_GE(e.at("data_time").get<double>(), 0.0);
    const double total = e.at("total_batch_time");
    const double phases = e.at("data_time").get<double>() + e.at("forward_time").get<double>() +
                          e.at("loss_time").get<double>() + e.at("backward_time").get<double>() +
                          e.at("optimizer_time").get<double>();
    EXPECT_GE(total, phases * 0.99);
    slowest_phase_sum_ratio = std::max(slowest_phase_sum_ratio, phases / total);
    EXPECT_NEAR(e.at("samples_per_second").get<double>(), batch * n_signal / total, 1e-6 * batch * n_signal / total);
    EXPECT_NEAR(e.at("examples_per_second").get<double>(), batch / total, 1e-6 * batch / total);
  }
  // The phases are most of a step (the rest is bookkeeping), so they are really measured.
  EXPECT_GT(slowest_phase_sum_ratio, 0.5);

  const Json summary = read_json(run_ / "training_summary.json");
  EXPECT_EQ(summary.at("status"), "completed");
  EXPECT_EQ(summary.at("total_steps"), 50);
  const double avg = summary.at("average_time_per_step"), sps = summary.at("steps_per_second");
  ASSERT_GT(avg, 0.0);
  EXPECT_NEAR(sps, 1.0 / avg, 1e-6 / avg);
  EXPECT_GT(summary.at("total_training_time_seconds").get<double>(), 0.0);
  EXPECT_GE(summary.at("training_end_time").get<double>(), summary.at("training_start_time").get<double>());
  // The summary's data wait is the timing profile's data phase summed over the steps, and the
  // step throughput takes it out of the loop time.
  double data = 0.0, total = 0.0;
  for (const Json& e : timing) {
    data += e.at("data_time").get<double>();
    total += e.at("total_batch_time").get<double>();
  }
  const double wait = summary.at("data_wait_seconds");
  EXPECT_NEAR(wait, data, 0.02 * total + 1e-3);
  const double step_rate = summary.at("step_examples_per_second");
  EXPECT_NEAR(step_rate, 50 * 4 / (total - data), 0.05 * 50 * 4 / (total - data));
}

TEST_F(ProfilingRun, MemoryProfileHasOneEntryEveryTenSteps) {
  const Json memory = read_json(run_ / "memory_profile.json");
  ASSERT_TRUE(memory.is_array());
  ASSERT_EQ(memory.size(), 5u);  // profiling.memory_every = 10: steps 0, 10, 20, 30, 40
  for (size_t i = 0; i < memory.size(); ++i) {
    const Json& e = memory[i];
    SCOPED_TRACE(e.dump());
    EXPECT_EQ(e.at("step"), static_cast<int64_t>(10 * i));
    EXPECT_EQ(e.at("batch_idx"), static_cast<int64_t>(10 * i));
    const double percent = e.at("cpu_memory_percent");
    EXPECT_GT(percent, 0.0);
    EXPECT_LE(percent, 100.0);
    EXPECT_EQ(e.at("gpu_memory_allocated_gb"), 0.0);  // a CPU run
    EXPECT_EQ(e.at("gpu_memory_reserved_gb"), 0.0);
    EXPECT_GT(e.at("rss_bytes").get<int64_t>(), 0);
    EXPECT_GE(e.at("peak_rss_bytes").get<int64_t>(), e.at("rss_bytes").get<int64_t>());
    const Json& cpu = e.at("memory").at("cpu");
    const int64_t in_use = cpu.at("bytes_in_use"), peak = cpu.at("peak_bytes_in_use");
    EXPECT_GT(in_use, 0);  // at least the model's parameters
    EXPECT_LE(in_use, peak);
  }
}

TEST_F(ProfilingRun, TensorBoardHoldsTimersAndThroughput) {
  auto scalars = read_scalars(run_);
  for (const char* name : {"data_batch_production", "forward", "loss_fn_computation", "backward", "optimizer_step",
                           "training_step"}) {
    for (const char* suffix : {"_avg_time", "_total_time", "_count"}) {
      const std::string tag = std::string("profiling/") + name + suffix;
      ASSERT_EQ(scalars[tag].size(), 5u) << tag;  // log_every 10 over 50 steps
      EXPECT_GT(scalars[tag].back().second, 0.0f) << tag;
    }
  }
  EXPECT_EQ(scalars["profiling/forward_count"].back().second, 50.0f);
  for (const char* tag : {"train/step_time", "train/samples_per_second"}) {
    ASSERT_EQ(scalars[tag].size(), 5u) << tag;
    for (const auto& [step, v] : scalars[tag]) EXPECT_GT(v, 0.0f) << tag << " at " << step;
  }
  EXPECT_FALSE(scalars["memory/rss_bytes"].empty());
  // The console shows the timers block too.
  EXPECT_NE(output_.find("--- Profiling Metrics (Step 50) ---"), std::string::npos) << output_;
}

TEST_F(ProfilingRun, WithoutTimingThereAreNoProfilingFilesOrTimerScalars) {
  ASSERT_FALSE(run_off_.empty());
  EXPECT_FALSE(fs::exists(run_off_ / "timing_profile.json"));
  EXPECT_FALSE(fs::exists(run_off_ / "memory_profile.json"));
  auto scalars = read_scalars(run_off_);
  for (const auto& [tag, values] : scalars) EXPECT_NE(tag.rfind("profiling/", 0), 0u) << tag;
  EXPECT_EQ(scalars["train/step_time"].size(), 2u);  // throughput is always logged
}

}  // namespace
}  // namespace rt::e2e
