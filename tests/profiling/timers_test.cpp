#include "profiling/timers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "support/recording_sink.h"

namespace rt::prof {
namespace {

// A fake clock: every read advances 10 ms and is counted.
std::atomic<int64_t> g_clock_reads{0};
int64_t fake_clock_ns() { return 10'000'000 * (++g_clock_reads); }

class TimersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    timers().set_clock(nullptr);
    timers().set_synchronize({});
    timers().reset();
    timers().set_enabled(true);
    g_clock_reads = 0;
  }
  void TearDown() override {
    timers().set_clock(nullptr);
    timers().set_synchronize({});
    timers().reset();
    timers().set_enabled(false);
  }
};

// Real sleeps, bounded by what the test itself measured around them rather than by a figure
// for the machine's speed: a sleep lasts at least what it asks, and the timers' total cannot
// exceed the wall time enclosing the three scopes however loaded the machine is.
TEST_F(TimersTest, AccumulatesAndAveragesRealSleeps) {
  const auto t0 = std::chrono::steady_clock::now();
  double last_scope = 0.0;
  for (int i = 0; i < 3; ++i) {
    const auto s0 = std::chrono::steady_clock::now();
    {
      ScopedTimer t("sleep_20ms");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    last_scope = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
  }
  const double enclosing = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const TimerStats s = timers().get_summary().at("sleep_20ms");
  EXPECT_EQ(s.count, 3);
  EXPECT_GE(s.avg_time, 0.019);
  EXPECT_LE(s.total_time, enclosing);
  EXPECT_NEAR(s.total_time, 3 * s.avg_time, 1e-9);
  const double last = timers().last_seconds(timers().id("sleep_20ms"));
  EXPECT_GE(last, 0.019);
  EXPECT_LE(last, last_scope);
}

TEST_F(TimersTest, FakeClockGivesExactTotalsAndLastInterval) {
  timers().set_clock(&fake_clock_ns);
  const TimerId id = timers().id("phase");
  for (int i = 0; i < 4; ++i) {
    TimerToken tok = timers().start_timer(id);
    timers().end_timer(id, tok);
  }
  const TimerStats s = timers().stats(id);
  EXPECT_EQ(s.count, 4);
  EXPECT_DOUBLE_EQ(s.total_time, 0.04);
  EXPECT_DOUBLE_EQ(s.avg_time, 0.01);
  EXPECT_DOUBLE_EQ(timers().last_seconds(id), 0.01);
  EXPECT_EQ(g_clock_reads.load(), 8);
}

TEST_F(TimersTest, DisabledTimersReadNoClockAndRecordNothing) {
  timers().set_clock(&fake_clock_ns);
  timers().set_enabled(false);
  int sync_calls = 0;
  timers().set_synchronize([&] { ++sync_calls; });
  for (int i = 0; i < 100; ++i) {
    ScopedTimer t(kForwardTimer);
    ScopedTimer u("by_name");
  }
  TimerToken tok = timers().start_timer("manual");
  EXPECT_FALSE(tok.valid);
  timers().end_timer("manual", tok);
  EXPECT_EQ(g_clock_reads.load(), 0);
  EXPECT_EQ(sync_calls, 0);
  EXPECT_EQ(timers().stats(kForwardTimer).count, 0);
  EXPECT_TRUE(timers().get_summary().empty());
}

TEST_F(TimersTest, EnablingMidIntervalRecordsNothingForThatInterval) {
  timers().set_clock(&fake_clock_ns);
  timers().set_enabled(false);
  TimerToken tok = timers().start_timer(kBackwardTimer);
  timers().set_enabled(true);
  timers().end_timer(kBackwardTimer, tok);
  EXPECT_EQ(timers().stats(kBackwardTimer).count, 0);
}

TEST_F(TimersTest, SynchronizeHookRunsBeforeEveryClockRead) {
  timers().set_clock(&fake_clock_ns);
  std::vector<int64_t> reads_at_sync;
  timers().set_synchronize([&] { reads_at_sync.push_back(g_clock_reads.load()); });
  { ScopedTimer t(kForwardTimer); }
  ASSERT_EQ(reads_at_sync.size(), 2u);
  EXPECT_EQ(reads_at_sync[0], 0);  // before the start read
  EXPECT_EQ(reads_at_sync[1], 1);  // before the end read
  timers().set_synchronize({});
  { ScopedTimer t(kForwardTimer); }
  EXPECT_EQ(reads_at_sync.size(), 2u);
}

TEST_F(TimersTest, BuiltinNamesHaveConstantIdsAndInterningIsStable) {
  EXPECT_EQ(timers().name(kDataBatchProductionTimer), "data_batch_production");
  EXPECT_EQ(timers().name(kForwardTimer), "forward");
  EXPECT_EQ(timers().name(kLossFnComputationTimer), "loss_fn_computation");
  EXPECT_EQ(timers().name(kBackwardTimer), "backward");
  EXPECT_EQ(timers().name(kOptimizerStepTimer), "optimizer_step");
  EXPECT_EQ(timers().name(kMakeStepTotalTimer), "make_step_total");
  EXPECT_EQ(timers().name(kTrainingStepTimer), "training_step");
  EXPECT_EQ(timers().name(kValidationTimer), "validation");
  EXPECT_EQ(timers().name(kCheckpointTimer), "checkpoint");
  EXPECT_EQ(timers().id("forward"), kForwardTimer);
  const TimerId a = timers().id("custom_op");
  EXPECT_EQ(timers().id("custom_op"), a);
  EXPECT_FALSE(a == timers().id("custom_op2"));
  EXPECT_THROW(timers().id(""), std::exception);
}

TEST_F(TimersTest, ConsoleBlockMatchesTheGuideExactly) {
  for (int i = 0; i < 100; ++i) {
    timers().record(kDataBatchProductionTimer, 0.0234);
    timers().record(kLossFnComputationTimer, 0.0456);
    timers().record(kMakeStepTotalTimer, 0.0789);
  }
  EXPECT_EQ(timers().format_metrics(100),
            "--- Profiling Metrics (Step 100) ---\n"
            "data_batch_production: avg=0.0234s, total=2.34s, count=100\n"
            "loss_fn_computation: avg=0.0456s, total=4.56s, count=100\n"
            "make_step_total: avg=0.0789s, total=7.89s, count=100\n");
  timers().reset();
  EXPECT_EQ(timers().format_metrics(7), "--- Profiling Metrics (Step 7) ---\n");
}

using rt::testing::RecordingSink;

TEST_F(TimersTest, ScalarTagsAreProfilingNameAvgTotalCount) {
  timers().record(kForwardTimer, 0.5);
  timers().record(kForwardTimer, 1.5);
  RecordingSink sink;
  timers().log_metrics(sink, 42);
  ASSERT_EQ(sink.rows.size(), 3u);
  EXPECT_EQ(sink.rows[0].tag, "profiling/forward_avg_time");
  EXPECT_DOUBLE_EQ(sink.rows[0].value, 1.0);
  EXPECT_EQ(sink.rows[1].tag, "profiling/forward_total_time");
  EXPECT_DOUBLE_EQ(sink.rows[1].value, 2.0);
  EXPECT_EQ(sink.rows[2].tag, "profiling/forward_count");
  EXPECT_DOUBLE_EQ(sink.rows[2].value, 2.0);
  for (const auto& r : sink.rows) EXPECT_EQ(r.step, 42);
}

TEST_F(TimersTest, ResetZeroesButKeepsIds) {
  const TimerId id = timers().id("to_reset");
  timers().record(id, 1.0);
  timers().reset();
  EXPECT_EQ(timers().stats(id).count, 0);
  EXPECT_EQ(timers().id("to_reset"), id);
  EXPECT_TRUE(timers().get_summary().empty());
}

TEST_F(TimersTest, ConcurrentTimersLoseNoInterval) {
  timers().set_clock(&fake_clock_ns);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i) ScopedTimer s(kTrainingStepTimer);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(timers().stats(kTrainingStepTimer).count, 4000);
  EXPECT_EQ(g_clock_reads.load(), 8000);
}

TEST_F(TimersTest, TimedRangeTimesEveryFetchAsDataBatchProduction) {
  timers().set_clock(&fake_clock_ns);
  std::vector<int> loader = {1, 2, 3};
  int sum = 0;
  for (int v : TimedRange<std::vector<int>>(loader)) sum += v;
  EXPECT_EQ(sum, 6);
  // begin() plus one ++ per element (the last one finds the end), as a Python
  // `for batch in loader` calls next() once more than there are batches.
  EXPECT_EQ(timers().stats(kDataBatchProductionTimer).count, 4);

  const int batch = timed_next([] { return 7; });
  EXPECT_EQ(batch, 7);
  EXPECT_EQ(timers().stats(kDataBatchProductionTimer).count, 5);
  const TimerId custom = timers().id("make_step");
  EXPECT_EQ(timed_call(custom, [] { return 3; }), 3);
  EXPECT_EQ(timers().stats(custom).count, 1);
}

}  // namespace
}  // namespace rt::prof
