// The outputs of a detailed-profiling window, each one format written from the window's
// finalized timeline (libkineto's ActivityLogger, output_base.h: ChromeTraceLogger is one
// implementation). A TraceSession runs its outputs in order at the end of every window; one
// that throws is reported and the others still run. The standard ones: ChromeTraceOutput
// (chrome_trace.h), CollapsedStacksOutput (collapsed_stacks.h), OpTableOutput (op_table.h).
//
// Why one write() per window rather than libkineto's handleTraceStart / handleActivity /
// finalizeTrace stream: our outputs run after finalize_timeline(), and each needs the window as
// a whole — the Chrome trace resolves flows and memory owners by activity index, collapsed stacks
// subtract children found through parent indices, the op table links GPU time through External
// ids. Fed one activity at a time, every output would first rebuild the window it was handed.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "profiling/trace/timeline.h"

namespace rt::prof {

// What a session tells every output about the window besides its timeline.
struct WindowContext {
  std::filesystem::path output_dir;  // where the window's files go (the run directory)
  // Appended to the stem of the files named after the window ("" or ".rank1": ranks other than
  // 0 of a data-parallel job sharing the run directory).
  std::string file_tag;
};

// What one output produced for one window.
struct OutputResult {
  std::string output;                        // the output's name()
  std::vector<std::filesystem::path> files;  // the files written, the main one first
  std::string text;                          // shown on the console after the window's line ("" = none)
  std::string error;                         // why the output failed ("" = it did not)
};

class TraceOutput {
 public:
  virtual ~TraceOutput() = default;
  // Short and unique within a session ("chrome_trace"): a session refuses a second output of
  // the same name.
  virtual const char* name() const = 0;
  // Writes the window and adds the files written and the console text to `result`.
  // REQUIRES: finalize_timeline(timeline) was called. Throws (rt::Error naming the path) on
  // failure.
  virtual void write(const Timeline& timeline, const WindowContext& window, OutputResult& result) = 0;
};

// "profile_step_<N><tag>", N the window's first recorded step (0 when it recorded none): the
// stem of the files a window writes (the RAVE guide's profile_step_<N>.json).
inline std::string profile_step_stem(const Timeline& timeline, const std::string& tag = "") {
  return "profile_step_" + std::to_string(timeline.first_step < 0 ? 0 : timeline.first_step) + tag;
}

}  // namespace rt::prof
