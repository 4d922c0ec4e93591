#include "trainer/phases.h"

namespace rt {
namespace {

thread_local StepPhaseTimes t_step_times;
}  // namespace

const char* phase_name(Phase p) { return prof::timers().name(phase_timer(p)).c_str(); }

const StepPhaseTimes& current_step_phase_times() { return t_step_times; }
void reset_step_phase_times() { t_step_times = StepPhaseTimes{}; }

PhaseScope::PhaseScope(Phase phase) : phase_(phase), token_(prof::timers().start_timer(phase_timer(phase))) {
  if (prof::annotations_recording()) {
    annotation_.emplace(phase_name(phase));
    if (phase == Phase::kData) loader_annotation_.emplace(prof::kDataLoaderNextSpan);
  }
}

void PhaseScope::stop() {
  if (!open_) return;
  open_ = false;
  loader_annotation_.reset();
  annotation_.reset();
  if (token_.valid) {
    auto& reg = prof::timers();
    reg.end_timer(phase_timer(phase_), token_);
    t_step_times.seconds[static_cast<int>(phase_)] += reg.last_seconds(phase_timer(phase_));
  }
}

}  // namespace rt
