// StepLog: the loop's record of step results between host reads.
#include "trainer/step_log.h"

#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <limits>

namespace rt {
namespace {

StepResult result(double loss, double scalar, int64_t examples = 4) {
  StepResult r;
  r.loss = torch::tensor(loss, torch::kFloat32);
  r.scalars.add("spectral", torch::tensor(scalar, torch::kFloat32));
  r.scalars.add("train/lr", 1e-3);
  r.examples = examples;
  return r;
}

TEST(StepLog, FlushReturnsEveryStepsLossInOrderAndMeansAccumulateUntilTaken) {
  StepLog log;
  log.record(0, result(3.0, 1.0));
  log.record(1, result(2.0, 3.0, 2));
  auto f = log.flush();
  ASSERT_EQ(f.steps.size(), 2u);
  EXPECT_EQ(f.first_nonfinite_step, -1);
  EXPECT_EQ(f.steps[0].step, 0);
  EXPECT_DOUBLE_EQ(f.steps[0].loss, 3.0);
  EXPECT_EQ(f.steps[1].examples, 2);
  log.record(2, result(1.0, 5.0));
  EXPECT_EQ(log.flush().steps.size(), 1u);  // a second read before the log step
  log.add_host("train/step_time", 0.5);
  auto means = log.take_means();
  EXPECT_DOUBLE_EQ(means.at("spectral"), 3.0);  // (1 + 3 + 5) / 3 over both reads
  EXPECT_DOUBLE_EQ(means.at("train/lr"), 1e-3);
  EXPECT_DOUBLE_EQ(means.at("train/step_time"), 0.5);
  EXPECT_TRUE(log.take_means().empty());
  EXPECT_TRUE(log.flush().steps.empty());
}

TEST(StepLog, FirstNonFiniteLossIsNamedAndLaterStepsAreLeftOut) {
  StepLog log;
  log.record(10, result(1.0, 1.0));
  log.record(11, result(std::numeric_limits<double>::quiet_NaN(), 100.0));
  log.record(12, result(std::numeric_limits<double>::infinity(), 100.0));
  auto f = log.flush();
  EXPECT_EQ(f.first_nonfinite_step, 11);
  ASSERT_EQ(f.steps.size(), 1u);
  EXPECT_EQ(f.steps[0].step, 10);
  EXPECT_DOUBLE_EQ(log.take_means().at("spectral"), 1.0);  // step 11's scalars are not averaged
}

int64_t g_ops = 0;

TEST(StepLog, RecordingIssuesNoTensorOperation) {
  StepLog log;
  const auto r = result(1.0, 2.0);
  g_ops = 0;
  auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
        ++g_ops;
        return nullptr;
      }));
  for (int i = 0; i < 100; ++i) log.record(i, r);
  const int64_t while_recording = g_ops;
  EXPECT_EQ(log.flush().steps.size(), 100u);
  const int64_t with_flush = g_ops;
  at::removeCallback(handle);
  EXPECT_EQ(while_recording, 0);
  EXPECT_GT(with_flush, 0);  // the callback does see operators: the read is where they happen
}

}  // namespace
}  // namespace rt
