// Whole-microsecond times for the Chrome trace (profiling.whole_us_timestamps, on by default).
//
// Why: Holistic Trace Analysis rounds ns-resolution timestamps inward to whole µs (ceil the
// start, floor the end: hta/common/trace_parser.py round_down_time_stamps), which gives
// sub-µs operators a negative duration and fails its call graph ("Unexpected case" in
// hta/common/trace_call_stack.py). It leaves integer timestamps alone.
//
// Contract: the nesting of every (pid, tid) survives, read by either consumer's rule:
//  - HTA sorts span ends by time; at equal times longer opens first, shorter closes first,
//    and a zero-length span goes after the opens and before the closes
//    (trace_call_stack.py _less_than);
//  - TensorBoard's plugin sorts by (start, -end) and nests a span when start < parent end
//    (torch_tb_profiler/profiler/op_tree.py).
// Each end is rounded to the nearest µs and then moved later only as far as needed: spans are
// placed in nesting order, a span keeps zero length only as a leaf that shares its µs with no
// close and no other zero-length span, and nothing else lands in the µs of a zero-length span.
// Times never move earlier; dense bursts of sub-µs operators shift later by about 1 µs per
// operator until an idle gap absorbs the shift (max_shift_us).
#pragma once

#include <cstdint>
#include <vector>

#include "profiling/trace/timeline.h"

namespace rt::prof {

struct WholeUsTimes {
  std::vector<int64_t> start_us;   // per activity, µs after base_ns
  std::vector<int64_t> end_us;     // ≥ start_us
  std::vector<int64_t> memory_us;  // per memory event, inside its owner's span
  int64_t window_end_us = 0;       // ≥ every time above
  int64_t max_shift_us = 0;        // the largest move later than plain rounding
};

// REQUIRES: finalize_timeline(timeline) was called; base_ns ≤ every time in it.
WholeUsTimes whole_us_times(const Timeline& timeline, int64_t base_ns);

}  // namespace rt::prof
