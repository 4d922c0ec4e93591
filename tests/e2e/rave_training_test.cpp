// tiny_rave on the demo database: the reconstruction improves, and phase 2 begins at
// train.phase_1_duration with RAVE's adversarial tags logged only from then on.
#include <cmath>

#include "e2e/e2e_fixtures.h"

namespace rt::e2e {
namespace {

double mean_over(const std::vector<std::pair<int64_t, float>>& values, int64_t first_step,
                 int64_t last_step) {
  double sum = 0.0;
  int64_t n = 0;
  for (const auto& [step, v] : values) {
    if (step >= first_step && step <= last_step) {
      sum += v;
      ++n;
    }
  }
  return n > 0 ? sum / static_cast<double>(n) : std::nan("");
}

TEST(RaveTinyTraining, SpectralDistanceFallsAndPhaseTwoStartsAtTheConfiguredStep) {
  ScratchDir dir("e2e_rave_train");
  const fs::path db = make_demo_db(dir.path());
  // log_every 1: the value logged at TensorBoard step s + 1 is training step s's own.
  auto r = run_command(tiny_train_command(db, dir / "runs", "--max_steps 300 --log_every 1 --seed 7"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path run = run_dir_from_output(r.output);
  ASSERT_FALSE(run.empty()) << r.output;
  auto scalars = read_scalars(run);

  for (const char* tag : {"fullband_spectral_distance", "multiband_spectral_distance"}) {
    ASSERT_EQ(scalars[tag].size(), 300u) << tag;
    const double first = mean_over(scalars[tag], 1, 10);    // steps 0..9
    const double last = mean_over(scalars[tag], 291, 300);  // steps 290..299
    EXPECT_LT(last, 0.7 * first) << tag << ": first-10-step mean " << first << ", last-10-step mean " << last;
  }

  const int64_t phase_1_duration = 200;  // configs/tiny_rave.toml
  for (const char* tag : {"feature_matching", "adversarial", "loss_dis", "pred_real", "pred_fake"}) {
    const auto& values = scalars[tag];
    ASSERT_FALSE(values.empty()) << tag << " never logged";
    int64_t first_step = values.front().first;
    for (const auto& [step, v] : values) {
      first_step = std::min(first_step, step);
      EXPECT_TRUE(std::isfinite(v)) << tag << " at " << step;
    }
    // Logged at TB step s + 1 for training step s: the first phase-2 step is phase_1_duration.
    EXPECT_EQ(first_step, phase_1_duration + 1) << tag;
  }
  // Phase 1 tags run through the whole run; beta_factor follows RAVE's warm-up (tiny_rave: 1e-6
  // → 1e-2 over 100 steps; BetaWarmupCallback counts the batch first, so step 0 already sits at
  // 1/100 of the way, log-linearly), and reaches beta_end by step 100.
  ASSERT_EQ(scalars["beta_factor"].size(), 300u);
  const double first_beta = std::exp(std::log(1e-6) * 0.99 + std::log(1e-2) * 0.01);
  EXPECT_NEAR(scalars["beta_factor"].front().second, first_beta, 1e-6 * first_beta);
  EXPECT_NEAR(scalars["beta_factor"].back().second, 1e-2, 1e-6);
  ASSERT_FALSE(scalars["validation"].empty());

  auto summary = read_json(run / "training_summary.json");
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["total_steps"], 300);
}

}  // namespace
}  // namespace rt::e2e
