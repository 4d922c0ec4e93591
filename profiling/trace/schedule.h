// The detailed-profiling schedule: which steps are traced, as torch.profiler.schedule decides it.
//
// Semantics are torch.profiler.schedule's, exactly (torch/profiler/profiler.py schedule()):
// steps < skip_first → NONE; s = step − skip_first; with repeat > 0, s ≥ repeat·cycle → NONE;
// m = s mod cycle (cycle = wait + warmup + active): m < wait → NONE, m < wait + warmup → WARMUP,
// the last active step of a cycle → RECORD_AND_SAVE, other active steps → RECORD.
// repeat = 0 cycles until the end of training.
//
// The recording state machine is one enum and one switch (transition()), with the step passed
// in, so it is deterministic to test (as libkineto's AsyncActivityProfilerHandler).
#pragma once

#include <cstdint>
#include <string>

namespace rt::prof {

enum class ProfilerAction { kNone, kWarmup, kRecord, kRecordAndSave };

const char* action_name(ProfilerAction action);

struct ProfilerSchedule {
  int64_t wait = 0;
  int64_t warmup = 1;
  int64_t active = 3;
  int64_t repeat = 1;  // 0 = cycle until the end
  int64_t skip_first = 10;

  // Throws rt::Error naming the field ("profiling.<key>") and the accepted range when a field
  // is out of range (wait, warmup, repeat, skip_first ≥ 0; active ≥ 1).
  void validate() const;

  // REQUIRES: step ≥ 0.
  ProfilerAction action(int64_t step) const;

  // The RAVE guide's `--enable_profiling --profile_steps N`: after skip_first steps and
  // `warmup` warm-up steps, record N steps once (wait 0, active N, repeat 1).
  static ProfilerSchedule for_profile_steps(int64_t n, int64_t skip_first = 10, int64_t warmup = 1);

  // The first cycle's first recorded step (skip_first + wait + warmup) and the step after its
  // last (+ active).
  int64_t first_recorded_step() const { return skip_first + wait + warmup; }
  int64_t first_window_end() const { return first_recorded_step() + active; }
  // "" when a run that trains steps from..max_steps-1 records a window; otherwise which steps
  // the first window would record and which the run trains, with what to change.
  std::string missed_window(int64_t from, int64_t max_steps) const;

  std::string to_string() const;
};

// What the tracer must do when the action changes from one step to the next; mirrors
// torch.profiler.profile's action map. `from`/`to` are the previous and the new step's
// actions; `at_exit` means training ended (no new step): a RECORD window still open is saved,
// a window that only warmed up is dropped.
struct Transition {
  bool start = false;    // install the tracer (a new window begins)
  bool discard = false;  // drop what was collected so far (warm-up ends, recording begins)
  bool stop = false;     // remove the tracer
  bool save = false;     // write the window collected so far
};
Transition transition(ProfilerAction from, ProfilerAction to);
Transition transition_at_exit(ProfilerAction last);

}  // namespace rt::prof
