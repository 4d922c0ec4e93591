// A family's training schedule as phases by first step (ModelFamily::schedule_phases): the step
// line names the phase a step is in and estimates its end (trainer/progress.h), and --smoke_test
// times a few steps of each phase.
#pragma once

#include <cstdint>
#include <string>

namespace rt {

struct SchedulePhase {
  int64_t first_step = 0;
  std::string name;         // "phase 1", "phase 2 (adversarial)"; "" for a one-phase schedule
  int64_t smoke_steps = 2;  // steps the smoke test times in this phase (after one warm-up step)
};

}  // namespace rt
