// The step line's progress fields and the smoke test's plan (trainer/progress.h).
#include "trainer/progress.h"

#include <gtest/gtest.h>

#include "support/expect.h"
#include "support/test_support.h"
#include "util/error.h"

namespace rt {
namespace {

TEST(Progress, DurationsReadAsAUserCountsThem) {
  EXPECT_EQ(format_duration(12.4), "12s");
  EXPECT_EQ(format_duration(292), "4m52s");
  EXPECT_EQ(format_duration(2 * 3600 + 5 * 60 + 9), "2h05m");
  EXPECT_EQ(format_duration(16 * 86400 + 22 * 3600 + 59), "16d 22h");
  EXPECT_EQ(format_duration(-1), "?");
}

TEST(Progress, PhaseEtaAndPercent) {
  Progress p({{0, "phase 1", 2}, {1000000, "phase 2 (adversarial)", 4}}, 6000000);
  EXPECT_EQ(p.phase_at(0), "phase 1");
  EXPECT_EQ(p.phase_at(999999), "phase 1");
  EXPECT_EQ(p.phase_at(1000000), "phase 2 (adversarial)");
  EXPECT_EQ(p.percent(1200), " (0.02 %)");
  EXPECT_EQ(p.percent(3000000), " (50.0 %)");
  EXPECT_EQ(p.timing(100, 30), "elapsed 30s") << "no ETA before a rate is known";
  p.interval(100, 100, 25.0);  // 4 steps/s
  // (6,000,000 − 100) / 4 s = 17d 08h 59m …
  EXPECT_EQ(p.timing(100, 30), "elapsed 30s | ETA 17d 08h");
  // A slow interval (validation) moves the rate by 30 % of the difference only.
  p.interval(200, 100, 100.0);  // 1 step/s
  EXPECT_NEAR(p.steps_per_second(), 0.7 * 4 + 0.3 * 1, 1e-12);
  // One phase: no phase field.
  EXPECT_EQ(Progress({{0, "", 2}}, 10).phase_at(3), "");
}

TEST(SmokeTest, RunsTheStartOfEveryPhaseThenProjectsTheRun) {
  SmokeTest s({{0, "phase 1", 2}, {1000, "phase 2 (adversarial)", 4}}, 6000);
  EXPECT_EQ(s.first_step(), 0);
  EXPECT_EQ(s.end_step(), 1005);  // 1000 + 1 warm-up + 4
  std::vector<int64_t> ran;
  for (int64_t step = s.first_step(); step < s.end_step();) {
    ran.push_back(step);
    step = s.after_step(step, step < 1000 ? (step == 0 ? 3.0 : 1.0) : (step == 1000 ? 5.0 : 2.0));
  }
  EXPECT_EQ(ran, (std::vector<int64_t>{0, 1, 2, 1000, 1001, 1002, 1003, 1004}));
  const std::string r = s.report("100.0 MiB resident (host)");
  EXPECT_HAS(r, "phase 1");
  EXPECT_HAS(r, "median 1.000 s/step over 2 steps");
  EXPECT_HAS(r, "median 2.000 s/step over 4 steps");
  EXPECT_HAS(r, "1000 steps of it: 16m40s");
  EXPECT_HAS(r, "5000 steps of it: 2h46m");
  // 1000 × 1 s + 5000 × 2 s = 11000 s.
  EXPECT_HAS(r, "at these rates: 3h03m");
  EXPECT_HAS(r, "peak memory: 100.0 MiB");
}

TEST(SmokeTest, PhasesBeyondTheRunAreLeftOutAndShortPhasesCapped) {
  SmokeTest s({{0, "phase 1", 2}, {50, "phase 2 (adversarial)", 4}}, 40);
  EXPECT_EQ(s.end_step(), 3);
  SmokeTest tight({{0, "phase 1", 5}, {2, "phase 2", 2}}, 100);
  EXPECT_EQ(tight.after_step(0, 1.0), 1);
  EXPECT_EQ(tight.after_step(1, 1.0), 2) << "phase 1 ends where phase 2 begins";
  EXPECT_HAS(testing::error_of([] { SmokeTest({{10, "late", 2}}, 5); }), "leaves no step to run");
}

}  // namespace
}  // namespace rt
