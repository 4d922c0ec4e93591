#pragma once

#include <chrono>
#include <cstdint>

namespace rt {

// Nanoseconds on the steady (monotonic) clock: the one time base of timers, spans and
// collective timings, so that they subtract from each other.
inline int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace rt
