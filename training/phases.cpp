#include "training/phases.h"

#include <exception>

namespace rt {
namespace {

thread_local StepPhaseTimes t_step_times;
thread_local std::optional<Phase> t_unwound_phase;
}  // namespace

const char* phase_name(Phase p) { return prof::timers().name(phase_timer(p)).c_str(); }

const StepPhaseTimes& current_step_phase_times() { return t_step_times; }
void reset_step_phase_times() {
  t_step_times = StepPhaseTimes{};
  t_unwound_phase.reset();
}
std::optional<Phase> unwound_phase() { return t_unwound_phase; }

PhaseScope::PhaseScope(Phase phase)
    : phase_(phase),
      token_(prof::timers().start_timer(phase_timer(phase))),
      uncaught_at_start_(std::uncaught_exceptions()) {
  if (prof::annotations_recording()) {
    annotation_.emplace(phase_name(phase));
    if (phase == Phase::kData) loader_annotation_.emplace(prof::kDataLoaderNextSpan);
  }
}

void PhaseScope::stop() {
  if (!open_) return;
  open_ = false;
  // Ended by an exception thrown inside it: the innermost such scope ends first.
  if (std::uncaught_exceptions() > uncaught_at_start_ && !t_unwound_phase) t_unwound_phase = phase_;
  loader_annotation_.reset();
  annotation_.reset();
  if (token_.valid) {
    auto& reg = prof::timers();
    reg.end_timer(phase_timer(phase_), token_);
    t_step_times.seconds[static_cast<int>(phase_)] += reg.last_seconds(phase_timer(phase_));
  }
}

}  // namespace rt
