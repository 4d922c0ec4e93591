// One memory measurement of a training step (profiling.memory, every profiling.memory_every
// steps), and its TensorBoard scalars. The trainer measures (RunProfilers::after_step); the
// same measurement becomes memory_profile.json's entry (MemoryProfileWriter::record) and the
// memory/… scalars (log_memory_metrics), so the profile and TensorBoard show the same values.
#pragma once

#include <cstdint>
#include <optional>

#include "profiling/memory.h"
#include "profiling/memory_categories.h"
#include "profiling/scalar_sink.h"

namespace rt::prof {

struct MemoryMeasurement {
  MemorySample sample;
  bool cuda_device = false;  // the model trains on a CUDA device: the GPU scalars are logged
  // With memory categories watched: the split of the bytes in use (the CUDA allocator's on a
  // CUDA device, the counting CPU allocator's otherwise).
  std::optional<CategorySplit> split;
  // With them, on CPU runs: the peak since the previous measurement and its composition.
  std::optional<PeakComposition> interval_peak;
};

// The memory/… scalars of `m` at `step`, in this order: per category (memory_category_name
// order) memory/<category>_bytes (with a split) and memory/interval_peak/<category>_bytes (with
// an interval peak); memory/interval_peak/bytes_in_use (with an interval peak);
// memory/cpu_bytes_in_use, memory/cpu_peak_bytes_in_use, memory/rss_bytes,
// memory/cpu_memory_percent; on a CUDA device memory/gpu_memory_allocated_gb and
// memory/gpu_memory_reserved_gb (GiB). Bytes go as doubles (exact below 2^53), which the sink
// rounds to float32 as it would the integer.
void log_memory_metrics(const MemoryMeasurement& m, ScalarSink& sink, int64_t step);

}  // namespace rt::prof
