// Training phases, and the one RAII scope that marks a phase for every profiler at once: the
// accumulated timers (profiling/timers.h, SSM guide), the per-step phase times that fill
// timing_profile.json, and — while a detailed window records — a user_annotation span in the
// trace (prof::ScopedAnnotation, only while a tracer is active); the data phase's span holds
// one named as torch's DataLoader records it, which TensorBoard's plugin counts as data loading.
//
// Cost with every profiler off: two relaxed atomic loads per scope, no clock read.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

#include "profiling/annotation.h"
#include "profiling/timers.h"

namespace rt {

// The phases are the built-in timers ; their ids are the registry's constant ids.
enum class Phase : int {
  kData = 0,       // data_batch_production
  kForward = 1,    // forward
  kLoss = 2,       // loss_fn_computation
  kBackward = 3,   // backward
  kOptimizer = 4,  // optimizer_step
  kMakeStep = 5,   // make_step_total: forward + loss + backward + optimizer
  kStep = 6,       // training_step: the whole step, data included
  kValidation = 7,
  kCheckpoint = 8,
};
inline constexpr int kPhaseCount = 9;

inline prof::TimerId phase_timer(Phase p) { return prof::TimerId{static_cast<uint32_t>(p)}; }
const char* phase_name(Phase p);

// Seconds spent in each phase since reset_step_phase_times() (training thread).
struct StepPhaseTimes {
  std::array<double, kPhaseCount> seconds{};
  double operator[](Phase p) const { return seconds[static_cast<int>(p)]; }
};
const StepPhaseTimes& current_step_phase_times();
// Also forgets the phase an exception left (unwound_phase).
void reset_step_phase_times();
// The innermost phase an exception propagated out of since the last reset (training thread):
// where a step failed (an out-of-memory message names it). nullopt when none did.
std::optional<Phase> unwound_phase();

class PhaseScope {
 public:
  explicit PhaseScope(Phase phase);
  ~PhaseScope() { stop(); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;
  // Ends the phase early (idempotent).
  void stop();

 private:
  Phase phase_;
  prof::TimerToken token_;
  std::optional<prof::ScopedAnnotation> annotation_;
  // kData: the batch fetch under torch's DataLoader span name too (prof::kDataLoaderNextSpan).
  std::optional<prof::ScopedAnnotation> loader_annotation_;
  bool open_ = true;
  int uncaught_at_start_;
};

}  // namespace rt
