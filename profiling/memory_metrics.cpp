#include "profiling/memory_metrics.h"

#include <string>

#include "util/profile_schema.h"

namespace rt::prof {

void log_memory_metrics(const MemoryMeasurement& m, ScalarSink& sink, int64_t step) {
  auto bytes = [](int64_t b) { return static_cast<double>(b); };
  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    const auto category = static_cast<MemoryCategory>(c);
    const std::string name = memory_category_name(category);
    if (m.split) sink.add_scalar("memory/" + name + "_bytes", bytes(m.split->bytes[category]), step);
    if (m.interval_peak) {
      sink.add_scalar("memory/interval_peak/" + name + "_bytes", bytes(m.interval_peak->categories[category]),
                      step);
    }
  }
  if (m.interval_peak)
    sink.add_scalar("memory/interval_peak/bytes_in_use", bytes(m.interval_peak->bytes_in_use), step);
  const MemorySample& s = m.sample;
  sink.add_scalar("memory/cpu_bytes_in_use", bytes(s.cpu_bytes_in_use), step);
  sink.add_scalar("memory/cpu_peak_bytes_in_use", bytes(s.cpu_peak_bytes_in_use), step);
  sink.add_scalar("memory/rss_bytes", bytes(s.process.rss_bytes), step);
  sink.add_scalar("memory/cpu_memory_percent", s.system.used_percent, step);
  if (m.cuda_device) {
    const double per_gb = profile_schema::kBytesPerGb;
    sink.add_scalar("memory/gpu_memory_allocated_gb", bytes(s.cuda.allocated_bytes) / per_gb, step);
    sink.add_scalar("memory/gpu_memory_reserved_gb", bytes(s.cuda.reserved_bytes) / per_gb, step);
  }
}

}  // namespace rt::prof
