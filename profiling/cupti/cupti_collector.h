// The live GPU source: CUPTI's activity API (as libkineto's CuptiActivityApi uses
// it"). Built only when RT_HAS_CUPTI (CUPTI and a CUDA LibTorch); the conversion it feeds is
// cupti_convert.h.
//
// Records kernels, memcpy, memset, runtime (and optionally driver) calls and external
// correlations. Activity buffers are 4 MiB, taken from a pool preallocated before the window
// (allocating inside it distorts the launches that trigger it) and capped in total (128 MiB by
// default); when the cap is hit CUPTI drops records, and the count is reported in the
// timeline. Ops are linked to their GPU work by pushing the op's RecordFunction handle as a
// CUSTOM0 external correlation id on op entry and popping it on exit (OpTracer hooks).
// Windows end with cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED).
#pragma once

#include <cstddef>
#include <memory>

#include "profiling/trace/activity_source.h"

namespace rt::prof {

struct CuptiCollectorOptions {
  size_t buffer_bytes = size_t{4} << 20;
  size_t max_total_bytes = size_t{128} << 20;
  size_t preallocated_buffers = 8;
  bool driver_api = false;  // also record cuda_driver calls
};

class CuptiCollector : public ActivitySource {
 public:
  // Returns nullptr, after logging one line to stderr, when there is no CUDA device or CUPTI
  // cannot be initialised; training then goes on with CPU tracing only. At most one
  // collector exists per process (CUPTI's callbacks are process-wide).
  static std::unique_ptr<CuptiCollector> create(CuptiCollectorOptions options = {});
  ~CuptiCollector() override;

  const char* name() const override { return "cupti"; }
  void start() override;
  void clear() override;
  void stop_into(Timeline& timeline) override;

  struct State;

 private:
  explicit CuptiCollector(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace rt::prof
