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
        db, dir_->path() / "runs",
        "--max_steps 50 --log_every 10 --enable_timing_profiling --enable_memory_profiling"));
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
    EXPECT_NEAR(e.at("samples_per_second").get<double>(), batch * n_signal / total,
                1e-6 * batch * n_signal / total);
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
  for (const char* name : {"data_batch_production", "forward", "loss_fn_computation", "backward",
                           "optimizer_step", "training_step"}) {
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
  // profiling.memory_every (10) is the log cadence here: every measured step (MemoryCategoriesRun
  // has them apart).
  EXPECT_EQ(scalars["memory/rss_bytes"].size(), 5u);
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

// Memory by category on tiny_rave: a short run reaching phase 2 (so that both of RAVE's
// optimizers, generator and discriminator, have stepped), sampled every 4 steps.
class MemoryCategoriesRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_memory_categories");
    const fs::path db = make_demo_db(dir_->path());
    auto r = run_command(tiny_train_command(db, dir_->path() / "runs",
                                            "--name profiled --max_steps 9 --train.phase_1_duration 2 "
                                            "--train.update_discriminator_every 2 --profiling.memory_every 4 "
                                            "--enable_memory_profiling"));
    output_ = r.output;
    ASSERT_EQ(r.exit_code, 0) << r.output;
    run_ = run_dir_from_output(r.output);
    summary_ = run_command(bin_path("train") + " --config tiny_rave --summary").output;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_FALSE(run_.empty()) << output_; }

  // A parameter count from `train --summary` ("decoder:       12,345").
  static int64_t summary_count(const std::string& label) {
    const auto at = summary_.find("\n" + label + ":");
    EXPECT_NE(at, std::string::npos) << summary_;
    if (at == std::string::npos) return -1;
    std::string digits;
    for (size_t i = at + label.size() + 2; i < summary_.size() && summary_[i] != '\n'; ++i) {
      if (std::isdigit(static_cast<unsigned char>(summary_[i]))) digits += summary_[i];
    }
    return std::stoll(digits);
  }

  static ScratchDir* dir_;
  static fs::path run_;
  static std::string output_, summary_;
};
ScratchDir* MemoryCategoriesRun::dir_ = nullptr;
fs::path MemoryCategoriesRun::run_;
std::string MemoryCategoriesRun::output_, MemoryCategoriesRun::summary_;

TEST_F(MemoryCategoriesRun, ParametersAndBothAdamStatesAreAttributedExactly) {
  const int64_t generator = summary_count("encoder") + summary_count("decoder");
  const int64_t discriminator = summary_count("discriminator");
  const int64_t all =
      summary_count("total trained") + summary_count("pqmf");  // pqmf: fixed, still parameters
  ASSERT_GT(discriminator, 0);
  const int64_t f32 = 4;  // tiny_rave trains in float32
  const Json memory = read_json(run_ / "memory_profile.json");
  ASSERT_EQ(memory.size(), 3u);  // steps 0, 4, 8
  for (const Json& e : memory) {
    SCOPED_TRACE(e.dump());
    const Json& c = e.at("categories");
    EXPECT_EQ(c.at("parameters").get<int64_t>(), all * f32);
    // Adam keeps exp_avg and exp_avg_sq per parameter: the generator's optimizer from step 0,
    // the discriminator's from its first step (step 2, in phase 2).
    const int64_t stepped = e.at("step") == 0 ? generator : generator + discriminator;
    EXPECT_EQ(c.at("optimizer_state").get<int64_t>(), 2 * stepped * f32);
    EXPECT_GT(c.at("gradients").get<int64_t>(), 0);
    EXPECT_LE(c.at("gradients").get<int64_t>(), (generator + discriminator) * f32);
    EXPECT_GE(c.at("activations_and_temporaries").get<int64_t>(), 0);
    EXPECT_EQ(e.at("categories_untracked_bytes"), 0);  // counting began before the model was built
    // Every tagged byte lies inside the allocator's bytes in use.
    const int64_t in_use = e.at("memory").at("cpu").at("bytes_in_use");
    EXPECT_LE(c.at("parameters").get<int64_t>() + c.at("optimizer_state").get<int64_t>() +
                  c.at("gradients").get<int64_t>(),
              in_use);
    // The peak since the previous sample, and what it held.
    const Json& peak = e.at("interval_peak");
    const Json& at_peak = peak.at("categories");
    EXPECT_EQ(at_peak.at("parameters"), c.at("parameters"));
    int64_t sum = 0;
    for (const auto& [name, bytes] : at_peak.items()) sum += bytes.get<int64_t>();
    EXPECT_EQ(sum, peak.at("bytes_in_use").get<int64_t>());
    EXPECT_GT(at_peak.at("activations_and_temporaries").get<int64_t>(), 0);  // a step's activations
  }
}

// TensorBoard gets the memory scalars at the log cadence (train.log_every 25 here: steps 0 and
// the last, 8) while memory_profile.json keeps every measured step (0, 4, 8); the interval peak
// logged is the largest since the previous logged step. Before: every measured step went to
// the event file too, which grew ~2.8 KB a step without bound (67.6 MB at 24k steps).
TEST_F(MemoryCategoriesRun, TensorBoardHoldsTheSplitAndThePeakCompositionAtTheLogCadence) {
  const Json memory = read_json(run_ / "memory_profile.json");
  ASSERT_EQ(memory.size(), 3u);
  std::vector<size_t> logged;  // the entries TensorBoard shows
  for (size_t i = 0; i < memory.size(); ++i) {
    if (memory[i].at("step").get<int64_t>() % 25 == 0 || i + 1 == memory.size()) logged.push_back(i);
  }
  ASSERT_EQ(logged, (std::vector<size_t>{0, 2}));
  auto scalars = read_scalars(run_);
  for (const char* name :
       {"parameters", "buffers", "gradients", "optimizer_state", "activations_and_temporaries"}) {
    const std::string tag = std::string("memory/") + name + "_bytes";
    ASSERT_EQ(scalars[tag].size(), logged.size()) << tag;
    for (size_t k = 0; k < logged.size(); ++k) {
      const Json& e = memory[logged[k]];
      EXPECT_EQ(scalars[tag][k].first, e.at("step").get<int64_t>()) << tag;
      EXPECT_FLOAT_EQ(scalars[tag][k].second, e.at("categories").at(name).get<float>()) << tag;
    }
    EXPECT_EQ(scalars[std::string("memory/interval_peak/") + name + "_bytes"].size(), logged.size()) << name;
  }
  const auto& peaks = scalars["memory/interval_peak/bytes_in_use"];
  ASSERT_EQ(peaks.size(), logged.size());
  int64_t largest = 0;  // over the entries after the first logged one
  for (size_t i = 1; i < memory.size(); ++i)
    largest = std::max(largest, memory[i].at("interval_peak").at("bytes_in_use").get<int64_t>());
  EXPECT_FLOAT_EQ(peaks.back().second, static_cast<float>(largest));
  EXPECT_FLOAT_EQ(peaks.front().second, memory[0].at("interval_peak").at("bytes_in_use").get<float>());
}

TEST_F(MemoryCategoriesRun, SummaryNamesTheConfigAndTheRunApartAndTheConsoleCountsThreads) {
  const Json summary = read_json(run_ / "training_summary.json");
  EXPECT_EQ(summary.at("config"), "tiny_rave");
  EXPECT_EQ(summary.at("run_name"), "profiled");
  EXPECT_NE(output_.find(", 1 thread, "), std::string::npos) << output_;
  EXPECT_EQ(output_.find("1 threads"), std::string::npos) << output_;
  // profile-report shows the split, the composition of the largest peak and the true peaks.
  auto report = run_command(bin_path("profile-report") + " " + quote(run_.string()));
  ASSERT_EQ(report.exit_code, 0) << report.output;
  for (const char* text :
       {"(config tiny_rave)", "run name   profiled", "optimizer_state", "at the peak (step",
        "true peaks: ", "allocator's peak_bytes_in_use", "audio samples/s over the whole run"}) {
    EXPECT_NE(report.output.find(text), std::string::npos) << text << "\n" << report.output;
  }
}

}  // namespace
}  // namespace rt::e2e
