#include "trainer/memory_forecast.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>

#include "profiling/memory.h"
#include "training/model_family.h"

namespace rt {
namespace {

std::string gib(int64_t bytes) {
  char buf[48];
  const double g = static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
  if (g >= 1.0) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", g);
  } else if (g * 1024.0 >= 1.0) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", g * 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KiB", g * 1024.0 * 1024.0);
  }
  return buf;
}

// The peak of what `run` allocates above what was allocated when it started.
int64_t peak_above_start(const torch::Device& device, const std::function<void()>& run) {
  if (device.is_cuda()) {
    const int index = device.index() < 0 ? 0 : device.index();
    torch::cuda::synchronize(index);
    const int64_t before = prof::read_cuda_memory(index).allocated_bytes;
    prof::reset_cuda_peak(index);
    run();
    torch::cuda::synchronize(index);
    return prof::read_cuda_memory(index).peak_allocated_bytes - before;
  }
  // A reporter of its own counts exactly the blocks allocated while `run` runs (profiling/memory.h).
  auto reporter = std::make_shared<prof::MemoryReporter>();
  prof::MemoryTrackingScope scope(reporter);
  run();
  return reporter->cpu_peak_bytes_in_use();
}

}  // namespace

int64_t PhaseMemoryForecast::peak_bytes() const { return held_bytes + step_bytes + new_state_bytes; }

int64_t PhaseMemoryForecast::largest_batch_that_fits() const {
  const int64_t room = capacity_bytes - held_bytes - new_state_bytes;
  // Memory = fixed + per_example × batch through the two probes (one probe: all per example).
  double per_example = static_cast<double>(step_bytes) / static_cast<double>(batch);
  double fixed = 0.0;
  if (half_batch > 0 && half_batch < batch && step_bytes > half_step_bytes) {
    per_example = static_cast<double>(step_bytes - half_step_bytes) / static_cast<double>(batch - half_batch);
    fixed = static_cast<double>(step_bytes) - per_example * static_cast<double>(batch);
  }
  const int64_t cap = 1024 * batch;
  if (per_example <= 0.0) return room >= step_bytes ? cap : 0;
  const double n = (static_cast<double>(room) - fixed) / per_example;
  if (n < 1.0) return 0;
  return std::min<int64_t>(cap, static_cast<int64_t>(n));
}

std::string PhaseMemoryForecast::text() const {
  std::ostringstream o;
  o << "memory forecast for " << phase << " (from step " << first_step << "), made before it starts, on "
    << device << ":\n";
  o << "  held now " << gib(held_bytes) << "; its heaviest step adds " << gib(step_bytes) << " at batch "
    << batch;
  if (half_batch > 0) o << " (" << gib(half_step_bytes) << " at batch " << half_batch << ")";
  if (new_state_bytes > 0) o << "; its optimizer state " << gib(new_state_bytes);
  o << "\n  peak " << gib(peak_bytes()) << " of " << gib(capacity_bytes) << " (" << capacity_source << "): ";
  const int64_t largest = largest_batch_that_fits();
  if (fits()) {
    o << "fits";
    if (peak_bytes() > capacity_bytes - capacity_bytes / 10)
      o << ", within 10 % of the limit (the allocator's rounding and fragmentation take some of it)";
    o << "; the largest batch that fits: " << (largest >= 1024 * batch ? "over " : "") << largest << "\n";
    return o.str();
  }
  o << "does NOT fit. Change one of:\n";
  if (largest >= 1) {
    o << "  - --batch " << largest << " (the largest batch whose forecast fits)\n";
  } else {
    o << "  - not even batch 1 fits beside what the run holds\n";
  }
  o << "  - --n_signal: shorter examples; activations grow with the example's length\n"
       "  - --precision bf16: activations in half the bytes\n"
       "  - a device with more free memory (--gpu N; nvidia-smi shows what other processes hold)\n";
  return o.str();
}

std::optional<PhaseMemoryForecast> forecast_phase_memory(ModelFamily& family, const torch::Tensor& input,
                                                         int64_t first_step, const std::string& phase,
                                                         const torch::Device& device, double capacity_gib) {
  PhaseMemoryForecast f;
  f.phase = phase;
  f.first_step = first_step;
  f.device = device.str();
  f.batch = input.size(0);
  f.half_batch = f.batch / 2;
  bool probed = true;
  // On CUDA the first run of new shapes includes cuDNN's algorithm search (its workspace is what
  // is free: docs/gpu.md), so each batch is probed twice and the second run counts.
  const int runs = device.is_cuda() ? 2 : 1;
  auto probe = [&](const torch::Tensor& x) {
    int64_t bytes = 0;
    for (int i = 0; i < runs && probed; ++i)
      bytes = peak_above_start(device, [&] { probed = family.probe_phase_step(x, first_step); });
    return bytes;
  };
  if (f.half_batch > 0) f.half_step_bytes = probe(input.narrow(0, 0, f.half_batch));
  f.step_bytes = probe(input);
  if (!probed) return std::nullopt;
  // What is held, read after the probes dropped the last step's gradients (as the phase's first
  // step does).
  if (device.is_cuda()) {
    f.held_bytes = prof::read_cuda_memory(device.index() < 0 ? 0 : device.index()).allocated_bytes;
  } else {
    f.held_bytes = prof::read_process_memory().rss_bytes;
  }
  f.new_state_bytes = family.phase_new_state_bytes(first_step);
  if (capacity_gib > 0) {
    f.capacity_bytes = static_cast<int64_t>(capacity_gib * 1024.0 * 1024.0 * 1024.0);
    f.capacity_source = "train.smoke_test_memory_gib";
  } else if (device.is_cuda()) {
    const int index = device.index() < 0 ? 0 : device.index();
    const prof::CudaDeviceMemory d = prof::read_cuda_device_memory(index);
    // What this process may use: what its allocator reserved (in use or cached) and what the
    // device has free.
    f.capacity_bytes = prof::read_cuda_memory(index).reserved_bytes + d.free_bytes;
    f.capacity_source = "free on " + f.device + " now, and held by this run, of " + gib(d.total_bytes);
  } else {
    const prof::SystemMemory s = prof::read_system_memory();
    f.capacity_bytes = f.held_bytes + s.available_bytes;
    f.capacity_source = "resident now and available on this host";
  }
  return f;
}

void forecast_smoke_phase(SmokeTest& smoke, ModelFamily& family, const torch::Tensor& input,
                          int64_t first_step, const std::string& phase, const torch::Device& device,
                          double capacity_gib, const std::string& rank_label) {
  const auto f = forecast_phase_memory(family, input, first_step, phase.empty() ? "the next phase" : phase,
                                       device, capacity_gib);
  if (!f) return;
  const std::string text = rank_label + f->text();
  std::cout << "smoke test: " << text << std::flush;
  smoke.add_forecast(first_step, text, f->fits());
}

}  // namespace rt
