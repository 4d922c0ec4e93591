#include "profiling/trace/schedule.h"

#include <sstream>

#include "util/error.h"

namespace rt::prof {

const char* action_name(ProfilerAction action) {
  switch (action) {
    case ProfilerAction::kNone:
      return "NONE";
    case ProfilerAction::kWarmup:
      return "WARMUP";
    case ProfilerAction::kRecord:
      return "RECORD";
    case ProfilerAction::kRecordAndSave:
      return "RECORD_AND_SAVE";
  }
  return "?";
}

void ProfilerSchedule::validate() const {
  auto check = [](const char* key, int64_t value, int64_t min) {
    if (value < min) {
      throw Error(std::string("profiling.") + key + " = " + std::to_string(value) +
                  " is invalid: expected an integer >= " + std::to_string(min));
    }
  };
  check("wait", wait, 0);
  check("warmup", warmup, 0);
  check("active", active, 1);
  check("repeat", repeat, 0);
  check("skip_first", skip_first, 0);
}

ProfilerAction ProfilerSchedule::action(int64_t step) const {
  if (step < skip_first) return ProfilerAction::kNone;
  const int64_t s = step - skip_first;
  const int64_t cycle = wait + warmup + active;
  // torch compares s / cycle >= repeat in floating point; for integers that is s >= repeat·cycle.
  if (repeat > 0 && s >= repeat * cycle) return ProfilerAction::kNone;
  const int64_t m = s % cycle;
  if (m < wait) return ProfilerAction::kNone;
  if (m < wait + warmup) return ProfilerAction::kWarmup;
  return m < cycle - 1 ? ProfilerAction::kRecord : ProfilerAction::kRecordAndSave;
}

ProfilerSchedule ProfilerSchedule::for_profile_steps(int64_t n, int64_t skip_first, int64_t warmup) {
  if (n < 1) {
    throw Error("--profile_steps " + std::to_string(n) + " is invalid: expected an integer >= 1");
  }
  ProfilerSchedule s;
  s.wait = 0;
  s.warmup = warmup;
  s.active = n;
  s.repeat = 1;
  s.skip_first = skip_first;
  s.validate();
  return s;
}

std::string ProfilerSchedule::missed_window(int64_t from, int64_t max_steps) const {
  const int64_t first = first_recorded_step();
  const int64_t end = first_window_end();
  // A resumed run past the only window records nothing either.
  if (first < max_steps && !(repeat == 1 && from >= end)) return "";
  return "profiling is on, but its first window records steps " + std::to_string(first) + "–" +
         std::to_string(end - 1) + " (skip_first + wait + warmup, then active) and this run trains steps " +
         std::to_string(from) + "–" + std::to_string(max_steps - 1) +
         ": lower profiling.skip_first or raise train.max_steps; no trace";
}

std::string ProfilerSchedule::to_string() const {
  std::ostringstream out;
  out << "wait=" << wait << " warmup=" << warmup << " active=" << active << " repeat=" << repeat
      << " skip_first=" << skip_first;
  return out.str();
}

Transition transition(ProfilerAction from, ProfilerAction to) {
  using A = ProfilerAction;
  Transition t;
  switch (from) {
    case A::kNone:
      t.start = (to != A::kNone);
      break;
    case A::kWarmup:
      // Warm-up data is dropped when recording begins; warm-up followed by nothing is a
      // schedule torch also tolerates (it starts and stops the trace without saving).
      t.discard = (to == A::kRecord || to == A::kRecordAndSave);
      t.stop = (to == A::kNone);
      break;
    case A::kRecord:
      t.stop = t.save = (to == A::kNone);  // only reachable at exit or a malformed schedule
      t.stop = t.save = t.stop || (to == A::kWarmup);
      break;
    case A::kRecordAndSave:
      // The window closes after its last step; the next one may start right away.
      t.stop = t.save = true;
      t.start = (to != A::kNone);
      break;
  }
  return t;
}

Transition transition_at_exit(ProfilerAction last) {
  Transition t;
  switch (last) {
    case ProfilerAction::kNone:
      break;
    case ProfilerAction::kWarmup:
      t.stop = true;
      break;
    case ProfilerAction::kRecord:
    case ProfilerAction::kRecordAndSave:
      t.stop = t.save = true;
      break;
  }
  return t;
}

}  // namespace rt::prof
