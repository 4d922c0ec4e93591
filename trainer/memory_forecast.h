// --smoke_test's forecast of a later phase's peak memory, made before that phase starts (RAVE's
// phase 2 adds the discriminator's activations, gradients and Adam moments to what phase 1 held:
// RAVE issue #59, an out-of-memory error days into a run). The phase's heaviest step runs once
// at the run's batch and once at half of it, changing nothing (ModelFamily::probe_phase_step);
// the peak above what the run held is measured each time (CUDA: the caching allocator's
// allocated bytes; CPU: the counting allocator's, profiling/memory.h). Memory grows with the
// batch by a fixed part (weights, gradients, moments) and a per-example part (activations), so
// the two measurements give the largest batch that fits.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>

#include "trainer/progress.h"

namespace rt {

class ModelFamily;

struct PhaseMemoryForecast {
  std::string phase;  // the phase's name, as the step line shows it
  int64_t first_step = 0;
  std::string device;  // "cuda:0 (NVIDIA H200)", "cpu"
  int64_t batch = 0;
  int64_t half_batch = 0;
  int64_t held_bytes = 0;       // what the run holds before the phase (CUDA: allocated; CPU: resident)
  int64_t step_bytes = 0;       // the probed step's peak above held_bytes, at `batch`
  int64_t half_step_bytes = 0;  // the same at `half_batch`
  int64_t new_state_bytes = 0;  // optimizer state the phase creates (ModelFamily::phase_new_state_bytes)
  int64_t capacity_bytes = 0;   // what the run may use: the GPU's memory, the host's, or the target's
  std::string capacity_source;  // where capacity_bytes comes from, for the text

  // held + step + new state.
  int64_t peak_bytes() const;
  bool fits() const { return peak_bytes() <= capacity_bytes; }
  // The largest batch whose forecast fits, from the line through the two probed batches (at most
  // 1024 times `batch`); 0 when not even one example fits beside what is held.
  int64_t largest_batch_that_fits() const;
  // The forecast, in lines of the smoke test's report; when it does not fit, what to change.
  std::string text() const;
};

// Probes the phase of `family` that starts at `first_step` on `input` (the batch its first step
// would train on; the half batch is its first half). `capacity_gib` > 0 forecasts against a
// target of that many GiB (train.smoke_test_memory_gib) instead of the device's own memory.
// Returns nullopt when the family has nothing to probe for that phase.
std::optional<PhaseMemoryForecast> forecast_phase_memory(ModelFamily& family, const torch::Tensor& input,
                                                         int64_t first_step, const std::string& phase,
                                                         const torch::Device& device, double capacity_gib);

// --smoke_test, before a later phase's first step `first_step` (`phase` its name, "" for
// unnamed): that phase's forecast, printed at once on this process's standard output (an
// out-of-memory failure in the phase then follows it; `rank_label` "rank R: " in a job of
// several ranks, which may sit on GPUs with different free memory) and added to `smoke`'s report.
void forecast_smoke_phase(SmokeTest& smoke, ModelFamily& family, const torch::Tensor& input,
                          int64_t first_step, const std::string& phase, const torch::Device& device,
                          double capacity_gib, const std::string& rank_label);

}  // namespace rt
