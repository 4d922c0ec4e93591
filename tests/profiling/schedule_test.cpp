// torch.profiler.schedule semantics, pinned by tables computed from its definition.
#include "profiling/trace/schedule.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace rt::prof {
namespace {

std::string actions(const ProfilerSchedule& s, int64_t steps) {
  std::string out;
  for (int64_t i = 0; i < steps; ++i) {
    switch (s.action(i)) {
      case ProfilerAction::kNone:
        out += '.';
        break;
      case ProfilerAction::kWarmup:
        out += 'w';
        break;
      case ProfilerAction::kRecord:
        out += 'r';
        break;
      case ProfilerAction::kRecordAndSave:
        out += 'S';
        break;
    }
  }
  return out;
}

ProfilerSchedule make(int64_t wait, int64_t warmup, int64_t active, int64_t repeat, int64_t skip_first) {
  ProfilerSchedule s;
  s.wait = wait;
  s.warmup = warmup;
  s.active = active;
  s.repeat = repeat;
  s.skip_first = skip_first;
  return s;
}

TEST(ScheduleTest, MatchesTorchScheduleTable) {
  // wait 1, warmup 1, active 2, repeat 1: records exactly steps 2-3.
  EXPECT_EQ(actions(make(1, 1, 2, 1, 0), 8), ".wrS....");
  // repeat 2: two windows.
  EXPECT_EQ(actions(make(1, 1, 2, 2, 0), 10), ".wrS.wrS..");
  // repeat 0 cycles until the end.
  EXPECT_EQ(actions(make(1, 1, 2, 0, 0), 12), ".wrS.wrS.wrS");
  // skip_first shifts everything.
  EXPECT_EQ(actions(make(1, 1, 2, 1, 3), 10), "....wrS...");
  // active 1: every recorded step saves.
  EXPECT_EQ(actions(make(0, 0, 1, 3, 0), 5), "SSS..");
  // no warm-up, back-to-back windows.
  EXPECT_EQ(actions(make(0, 0, 2, 2, 1), 7), ".rSrS..");
  // torch.profiler's documented example: wait=1, warmup=1, active=3, repeat=2.
  EXPECT_EQ(actions(make(1, 1, 3, 2, 0), 12), ".wrrS.wrrS..");
}

TEST(ScheduleTest, ProfileStepsShorthandRecordsNStepsAfterSkipFirst) {
  const ProfilerSchedule s = ProfilerSchedule::for_profile_steps(3, 2, 1);
  EXPECT_EQ(actions(s, 9), "..wrrS...");
  EXPECT_THROW(ProfilerSchedule::for_profile_steps(0), Error);
}

TEST(ScheduleTest, MissedWindowAgreesWithTheActions) {
  // wait 1, warmup 1, active 2, repeat 1, skip_first 3: records steps 5 and 6.
  const ProfilerSchedule s = make(1, 1, 2, 1, 3);
  EXPECT_EQ(actions(s, 8), "....wrS.");
  EXPECT_EQ(s.first_recorded_step(), 5);
  EXPECT_EQ(s.first_window_end(), 7);
  EXPECT_EQ(s.missed_window(0, 6), "") << "step 5 is recorded";
  EXPECT_EQ(s.missed_window(0, 5).rfind("profiling is on, but its first window records steps 5–6", 0), 0u)
      << s.missed_window(0, 5);
  EXPECT_NE(s.missed_window(7, 20), "") << "a resume past the only window records nothing";
  EXPECT_EQ(make(1, 1, 2, 0, 3).missed_window(7, 20), "") << "repeat = 0 cycles on";
}

TEST(ScheduleTest, ValidateNamesTheKey) {
  try {
    make(0, 0, 0, 1, 0).validate();
    FAIL() << "active = 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("profiling.active"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make(-1, 0, 1, 1, 0).validate(), Error);
  EXPECT_NO_THROW(make(0, 0, 1, 0, 0).validate());
}

TEST(ScheduleTest, TransitionsFollowTorchActionMap) {
  using A = ProfilerAction;
  auto t = transition(A::kNone, A::kWarmup);
  EXPECT_TRUE(t.start && !t.stop && !t.save && !t.discard);
  t = transition(A::kWarmup, A::kRecord);
  EXPECT_TRUE(t.discard && !t.start && !t.stop);
  t = transition(A::kRecord, A::kRecordAndSave);
  EXPECT_TRUE(!t.start && !t.stop && !t.save && !t.discard);
  t = transition(A::kRecordAndSave, A::kWarmup);
  EXPECT_TRUE(t.stop && t.save && t.start);
  t = transition(A::kRecordAndSave, A::kNone);
  EXPECT_TRUE(t.stop && t.save && !t.start);
  t = transition(A::kWarmup, A::kNone);
  EXPECT_TRUE(t.stop && !t.save);
  EXPECT_TRUE(transition_at_exit(A::kRecord).save);
  EXPECT_FALSE(transition_at_exit(A::kWarmup).save);
  EXPECT_TRUE(transition_at_exit(A::kWarmup).stop);
  EXPECT_FALSE(transition_at_exit(A::kNone).stop);
}

}  // namespace
}  // namespace rt::prof
