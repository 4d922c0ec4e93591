// An extra event source for the detailed profiler (e.g. the CUPTI GPU collector), behind an
// interface a test can replace (as libkineto's CuptiActivityApi, replaced by MockCuptiActivities in its
// tests).
#pragma once

#include "profiling/trace/timeline.h"

namespace rt::prof {

class ActivitySource {
 public:
  virtual ~ActivitySource() = default;
  virtual const char* name() const = 0;
  // A window begins (warm-up or recording). Called on the training thread at a step boundary.
  virtual void start() = 0;
  // Warm-up ends: drop what was collected so far.
  virtual void clear() = 0;
  // The window ends: stop collecting and append this source's activities, flows, device
  // properties and dropped-record count to `timeline` (whose CPU activities are already in).
  virtual void stop_into(Timeline& timeline) = 0;
};

}  // namespace rt::prof
