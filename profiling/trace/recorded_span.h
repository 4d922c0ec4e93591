// Spans of work the operator tracer (op_tracer.h) cannot see, because it runs on threads that
// record no operators — a collective executed on the communication backend's own thread —
// recorded by the code that launched the work once it is complete. They join the open trace
// window on rows of their own, like the "gloo:all_reduce" rows of torch.profiler's traces.
#pragma once

#include <cstdint>
#include <string_view>

#include "profiling/trace/timeline.h"

namespace rt::prof {

// Adds `span` to the open window on the row named `row` ("gloo") of this process, keeping its
// kind, name, start/end (steady ns), input_dims/input_types and args (pid, tid and the linking
// fields are set here). Thread-safe; does nothing unless a window is open.
// REQUIRES: spans of one row do not overlap.
void record_span(std::string_view row, Activity span);

// First tid of these rows (row i has tid kSpanRowTid + i): above Linux's pid_max (2^22), so
// they never collide with a real thread.
inline constexpr int64_t kSpanRowTid = int64_t{1} << 30;

}  // namespace rt::prof
