// trainer/memory_forecast.h: --smoke_test's forecast of RAVE's phase-2 memory before phase 2
// starts. The probe is held against the step it forecasts, measured the same way (the counting
// CPU allocator, profiling/memory.h), and the arithmetic of what fits against hand-computed cases.
#include "trainer/memory_forecast.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>

#include "config/config.h"
#include "profiling/memory.h"
#include "support/test_support.h"
#include "training/model_family.h"

namespace rt {
namespace {

using testing::contains;

constexpr int64_t kGiB = int64_t{1} << 30;

// 1 GiB held; the step adds 3 GiB at batch 8 and 2 GiB at batch 4: 1 GiB fixed, 0.25 GiB per example.
PhaseMemoryForecast line_forecast(int64_t capacity_bytes) {
  PhaseMemoryForecast f;
  f.phase = "phase 2 (adversarial)";
  f.first_step = 1000;
  f.device = "cuda:0";
  f.batch = 8;
  f.half_batch = 4;
  f.held_bytes = kGiB;
  f.step_bytes = 3 * kGiB;
  f.half_step_bytes = 2 * kGiB;
  f.capacity_bytes = capacity_bytes;
  f.capacity_source = "train.smoke_test_memory_gib";
  return f;
}

TEST(MemoryForecast, TheLargestBatchFollowsTheLineThroughTheTwoProbes) {
  const PhaseMemoryForecast exact = line_forecast(4 * kGiB);
  EXPECT_EQ(exact.peak_bytes(), 4 * kGiB);
  EXPECT_TRUE(exact.fits());
  EXPECT_EQ(exact.largest_batch_that_fits(), 8);
  EXPECT_TRUE(contains(exact.text(), "fits, within 10 % of the limit")) << exact.text();

  // Room for 1 GiB fixed + 6 examples: (3.5 - 1 - 1) / 0.25.
  const PhaseMemoryForecast tight = line_forecast(7 * kGiB / 2);
  EXPECT_FALSE(tight.fits());
  EXPECT_EQ(tight.largest_batch_that_fits(), 6);
  EXPECT_TRUE(contains(tight.text(), "peak 4.00 GiB of 3.50 GiB (train.smoke_test_memory_gib): does NOT fit"))
      << tight.text();
  EXPECT_TRUE(contains(tight.text(), "--batch 6 (the largest batch whose forecast fits)")) << tight.text();

  // Optimizer state the phase creates comes off the room: (3.5 - 1 - 0.5 - 1) / 0.25 = 4.
  PhaseMemoryForecast with_state = line_forecast(7 * kGiB / 2);
  with_state.new_state_bytes = kGiB / 2;
  EXPECT_EQ(with_state.peak_bytes(), 9 * kGiB / 2);
  EXPECT_EQ(with_state.largest_batch_that_fits(), 4);

  // Less than the fixed part and one example beside what is held.
  const PhaseMemoryForecast none = line_forecast(2 * kGiB);
  EXPECT_EQ(none.largest_batch_that_fits(), 0);
  EXPECT_TRUE(contains(none.text(), "not even batch 1 fits")) << none.text();
}

TEST(MemoryForecast, OneProbedBatchCountsItsStepAsPerExample) {
  PhaseMemoryForecast f = line_forecast(5 * kGiB);
  f.batch = 1;
  f.half_batch = 0;
  f.step_bytes = kGiB;
  // (5 - 1) / 1 examples.
  EXPECT_EQ(f.largest_batch_that_fits(), 4);
  EXPECT_FALSE(contains(f.text(), "at batch 0")) << f.text();
}

// What `run` allocates at its peak above what was live when it started.
int64_t counted_peak(const std::function<void()>& run) {
  auto reporter = std::make_shared<prof::MemoryReporter>();
  prof::MemoryTrackingScope scope(reporter);
  run();
  return reporter->cpu_peak_bytes_in_use();
}

// A batch at example `example` of its epoch: RAVE's generator updates on batch_in_epoch 1.
Batch audio_batch(const torch::Tensor& input, int64_t example) {
  Batch b;
  b.input = input;
  b.global_examples = input.size(0);
  b.position.example = example;
  return b;
}

TEST(MemoryForecast, RavesProbeAddsWhatItsFirstGeneratorStepOfPhaseTwoAdds) {
  torch::manual_seed(0);
  Config c = load_config_file(testing::source_path("configs/tiny_rave.toml"));
  c.set("train.phase_1_duration", "1", "test");
  auto family = make_model_family(c);
  family->build(FamilyContext{}, nullptr);
  const int64_t batch = 4, n_signal = c.get_int("data.n_signal");
  const torch::Tensor x = torch::randn({batch, 1, n_signal}) * 0.1;
  family->train_step(audio_batch(x, batch), 0);  // phase 1: the generator's Adam has its moments

  const auto forecast =
      forecast_phase_memory(*family, x, 1, "phase 2 (adversarial)", torch::Device(torch::kCPU), 0);
  ASSERT_TRUE(forecast.has_value());
  EXPECT_EQ(forecast->batch, batch);
  EXPECT_EQ(forecast->half_batch, batch / 2);
  EXPECT_GT(forecast->step_bytes, forecast->half_step_bytes);
  EXPECT_GT(forecast->half_step_bytes, 0);
  // The discriminator's Adam moments: two per parameter, float32.
  int64_t dis = 0;
  for (const auto& [name, module] : family->modules()) {
    if (name != "discriminator") continue;
    for (const auto& p : module->parameters()) dis += p.numel() * p.element_size();
  }
  EXPECT_EQ(forecast->new_state_bytes, 2 * dis);

  // Phase 2's first generator step, from where the probe left the model.
  family->probe_phase_step(x, 1);
  const int64_t step = counted_peak([&] { family->train_step(audio_batch(x, 2 * batch), 1); });
  const double ratio = static_cast<double>(forecast->step_bytes) / static_cast<double>(step);
  EXPECT_GT(ratio, 0.95) << forecast->step_bytes << " forecast, " << step << " stepped";
  EXPECT_LT(ratio, 1.05) << forecast->step_bytes << " forecast, " << step << " stepped";
}

TEST(MemoryForecast, ThePhaseBeforeTheDiscriminatorJoinsHasNothingToProbe) {
  Config c = load_config_file(testing::source_path("configs/tiny_rave.toml"));
  auto family = make_model_family(c);
  family->build(FamilyContext{}, nullptr);
  const torch::Tensor x = torch::zeros({2, 1, c.get_int("data.n_signal")});
  EXPECT_FALSE(forecast_phase_memory(*family, x, 0, "phase 1", torch::Device(torch::kCPU), 0).has_value());
  EXPECT_FALSE(family->probe_phase_step(x, 0));
}

}  // namespace
}  // namespace rt
