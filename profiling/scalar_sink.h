// Where the profilers send their TensorBoard scalars (TimerRegistry::log_metrics: profiling/…,
// log_memory_metrics: memory/…). The trainer adapts its TensorBoard writer to this, so
// profiling does not depend on it, and owns no tag names.
#pragma once

#include <cstdint>
#include <string>

namespace rt::prof {

struct ScalarSink {
  virtual ~ScalarSink() = default;
  // TensorBoard stores float32: an adapter rounds `value` once, there.
  virtual void add_scalar(const std::string& tag, double value, int64_t step) = 0;
};

}  // namespace rt::prof
