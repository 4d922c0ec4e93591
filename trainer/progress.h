// How far a run has come, for the step line, and `train --smoke_test`'s plan and report.
//
// A family states its schedule as phases (ModelFamily::schedule_phases: RAVE's phase 1 and its
// adversarial phase 2 from train.phase_1_duration); the step line then reads
//   step 1200/6000000 (0.02 %) | phase 1 | … | 4.10 steps/s | elapsed 4m52s | ETA 16d 22h
// The ETA divides the steps left by the rate of the last log intervals (an exponential mean, so
// that one slow interval — validation, a checkpoint — moves it little); it is the current
// phase's rate, so it jumps once when phase 2's heavier steps begin.
//
// The smoke test runs a few steps at the start of every phase (RAVE: phase 1 from step 0 and
// phase 2 from train.phase_1_duration, with enough steps to include a discriminator update),
// then one validation and the final checkpoint, and reports each phase's step time, the peak
// memory and what the whole run would take at those rates: what a week-long run costs, known
// in a minute.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "training/schedule_phase.h"

namespace rt {

// "3d 04h", "2h05m", "4m52s", "12s".
std::string format_duration(double seconds);

class Progress {
 public:
  Progress(std::vector<SchedulePhase> phases, int64_t max_steps);
  // One log interval ended at `step` (exclusive) after `steps` steps in `seconds`.
  void interval(int64_t step, int64_t steps, double seconds);
  // The phase `step` belongs to ("" when the schedule has one phase).
  std::string phase_at(int64_t step) const;
  // " (0.02 %)": after "step N/M".
  std::string percent(int64_t step) const;
  // "elapsed 4m52s | ETA 16d 22h" (no ETA before the first interval).
  std::string timing(int64_t step, double elapsed_seconds) const;
  double steps_per_second() const { return rate_; }
  // The console line of a log interval ending at `step`: "step N/M (x %) | phase | loss L |"
  // then the model's scalars (every tag outside train/, and train/loss), the interval's steps/s
  // and the timing. `elapsed_seconds` < 0 (the smoke test) leaves out the percentage and timing.
  std::string line(int64_t step, int64_t max_steps, double loss, const std::map<std::string, double>& means,
                   double steps_per_second, double elapsed_seconds) const;

 private:
  std::vector<SchedulePhase> phases_;
  int64_t max_steps_;
  double rate_ = 0.0;  // steps/s, exponential mean over intervals
};

class SmokeTest {
 public:
  // `max_steps` is the run's: the report projects it. Phases starting at or after it are left out.
  SmokeTest(std::vector<SchedulePhase> phases, int64_t max_steps);
  int64_t first_step() const;
  // The loop's end: one past the last step the smoke test runs.
  int64_t end_step() const;
  // Step `step` took `seconds`; returns the step to run next (the next phase's first step after
  // the last one of a phase).
  int64_t after_step(int64_t step, double seconds);
  // Whether `step` is the first step of a phase after the first one the smoke test runs: where the
  // trainer forecasts that phase's memory (trainer/memory_forecast.h) before running it.
  bool starts_later_phase(int64_t step) const;
  // The forecast made before the phase that starts at `first_step`, for the report; `fits`
  // false makes forecast_unfit() true.
  void add_forecast(int64_t first_step, std::string text, bool fits);
  bool forecast_unfit() const { return unfit_; }
  // The report: per phase the steps timed and their median time, the peak memory, and the
  // projected duration of the whole run.
  std::string report(const std::string& peak_memory) const;

 private:
  struct Planned {
    SchedulePhase phase;
    int64_t end_step = 0;       // first_step + 1 warm-up + smoke_steps, capped at the next phase / max
    int64_t last_step = 0;      // the projection's end of this phase
    std::vector<double> times;  // timed steps (the warm-up excluded)
    double warmup = 0.0;
    std::string forecast;  // the memory forecast made before the phase, if any
  };
  std::vector<Planned> plan_;
  int64_t max_steps_;
  bool unfit_ = false;
};

}  // namespace rt
