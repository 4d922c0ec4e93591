// Collapsed stacks (flamegraph.pl / speedscope input) from a finalized timeline recorded with
// with_stack (profile_step_<N>_stacks.txt in torch's export_stacks format).
//
// One line per unique stack: `frame;frame;…;<op name> <self µs>`, root first, the operator's
// name as the leaf frame, value = the summed self CPU time of the operators with that stack
// in whole microseconds; lines whose value is 0 are omitted. Lines are sorted for stable
// output. Nothing else: the format has no comments (flamegraph.pl calls any other line invalid).
#pragma once

#include <filesystem>
#include <string>

#include "profiling/trace/timeline.h"
#include "profiling/trace/trace_output.h"

namespace rt::prof {

std::string collapsed_stacks(const Timeline& timeline);

// When frames of the written stacks stay unresolved (Timeline::unresolved_frames): "N of M
// distinct frames unresolved …: <module> (count) …", per module; "" otherwise. The stacks
// output prints it on the console after the window's line.
std::string unresolved_frames_note(const Timeline& timeline);

// Writes collapsed_stacks() atomically; throws rt::Error naming the path on failure.
void write_collapsed_stacks(const Timeline& timeline, const std::filesystem::path& path);

// The stacks as a window output ("collapsed_stacks"): <dir>/profile_step_<N>_stacks.txt.
class CollapsedStacksOutput : public TraceOutput {
 public:
  const char* name() const override { return "collapsed_stacks"; }
  void write(const Timeline& timeline, const WindowContext& window, OutputResult& result) override;
};

}  // namespace rt::prof
