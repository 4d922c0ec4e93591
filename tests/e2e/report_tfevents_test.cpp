// Reads a real run's events file back and finds every documented tag (docs/profiling.md
// "TensorBoard") at the step numbers the trainer logs them.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "e2e/report_fixture.h"
#include "tensorboard/tfevents.h"

namespace rt::report_e2e {
namespace {

using testing::ScratchDir;

std::map<std::string, std::set<int64_t>> scalar_steps(const fs::path& run) {
  std::map<std::string, std::set<int64_t>> tags;
  int files = 0;
  for (const auto& e : fs::directory_iterator(run)) {
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
    ++files;
    for (const auto& r : read_tfevents(e.path())) {
      if (r.kind == TbRecord::Kind::Scalar) tags[r.tag].insert(r.step);
    }
  }
  EXPECT_EQ(files, 1);
  return tags;
}

std::string list(const std::set<int64_t>& s) {
  std::string out;
  for (auto v : s) out += std::to_string(v) + " ";
  return out;
}

TEST(ReportE2E, EventsFileHoldsEveryDocumentedTagAtItsSteps) {
  ScratchDir dir("report_e2e_tb");
  const fs::path db = make_demo_db(dir.path());
  // Phase 2 from step 10; logs every 5 steps; memory sampled every 10 steps.
  const fs::path run = train_run(db, dir / "runs", "tags", 30,
                                 "--enable_timing_profiling --enable_memory_profiling --log_every 5 "
                                 "--train.phase_1_duration 10 --profiling.memory_every 10 --val_every 100");
  ASSERT_FALSE(run.empty());
  const auto tags = scalar_steps(run);
  auto expect_steps = [&](const std::string& tag, const std::set<int64_t>& steps) {
    auto it = tags.find(tag);
    ASSERT_NE(it, tags.end()) << "tag " << tag << " missing";
    EXPECT_EQ(it->second, steps) << tag << " at steps " << list(it->second);
  };

  const std::set<int64_t> log_steps = {5, 10, 15, 20, 25, 30};
  // RAVE's losses (its TensorBoard tags), means over each log interval.
  for (const char* t :
       {"fullband_spectral_distance", "multiband_spectral_distance", "regularization", "beta_factor"}) {
    expect_steps(t, log_steps);
  }
  // Phase 2 starts at step index 10: the interval logged at 15 is the first holding it.
  for (const char* t : {"feature_matching", "adversarial", "loss_dis", "pred_real", "pred_fake"}) {
    expect_steps(t, {15, 20, 25, 30});
  }
  expect_steps("validation", {30});  // at max_steps
  for (const char* t : {"train/step_time", "train/samples_per_second", "train/examples_per_second"}) {
    expect_steps(t, log_steps);
  }
  // Timers: profiling.log_every defaults to train.log_every.
  for (const char* name : {"data_batch_production", "forward", "loss_fn_computation", "backward",
                           "optimizer_step", "make_step_total", "training_step"}) {
    for (const char* suffix : {"_avg_time", "_total_time", "_count"}) {
      expect_steps(std::string("profiling/") + name + suffix, log_steps);
    }
  }
  // Memory samples are taken before the step counter advances: steps 0, 10, 20.
  for (const char* t : {"memory/cpu_bytes_in_use", "memory/cpu_peak_bytes_in_use", "memory/rss_bytes",
                        "memory/cpu_memory_percent"}) {
    expect_steps(t, {0, 10, 20});
  }
}

TEST(ReportE2E, EventsFileHasNoPhaseTwoOrProfilingTagsWhenNotAsked) {
  ScratchDir dir("report_e2e_tb");
  const fs::path db = make_demo_db(dir.path());
  const fs::path run = train_run(db, dir / "runs", "plain", 10, "--log_every 5");
  ASSERT_FALSE(run.empty());
  const auto tags = scalar_steps(run);
  EXPECT_EQ(tags.count("fullband_spectral_distance"), 1u);
  EXPECT_EQ(tags.count("train/step_time"), 1u);
  for (const auto& [tag, steps] : tags) {
    EXPECT_NE(tag.rfind("profiling/", 0), 0u) << tag;
    EXPECT_NE(tag.rfind("memory/", 0), 0u) << tag;
    EXPECT_NE(tag, "loss_dis");
  }
}

}  // namespace
}  // namespace rt::report_e2e
