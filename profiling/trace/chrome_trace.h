// Chrome trace writer in the Kineto trace schema (libkineto output_json.cpp;
// "Kineto trace schema" and "What the trace consumers actually require"), readable by
// Perfetto, chrome://tracing, speedscope, TensorBoard's PyTorch profiler plugin and Holistic
// Trace Analysis.
//
// Layout: top-level keys in Kineto's order — schemaVersion, deviceProperties,
// distributedInfo (written `"rank": 0` with a space: HTA reads it with "rank":\s+(\d+)),
// free metadata, displayTimeUnit, baseTimeNanoseconds, traceEvents, traceName. ts/dur are µs
// relative to baseTimeNanoseconds (Unix epoch ns): whole µs by default (whole_us_times.h: what
// Holistic Trace Analysis needs), or with 3 decimals (ns resolution); pid/tid are integers;
// every event, metadata ones included, has a name; the last event is the global instant
// "Record Window End".
#pragma once

#include <filesystem>
#include <string>

#include "profiling/trace/timeline.h"
#include "profiling/trace/trace_output.h"

namespace rt::prof {

// Schema constants, in one place.
inline constexpr int kSchemaVersion = 1;
inline constexpr const char* kTraceFileSuffix = ".pt.trace.json";

struct ChromeTraceOptions {
  std::string backend = "none";  // distributedInfo.backend (no process group: single process)
  int rank = 0;
  int world_size = 1;
  std::string trace_name;  // traceName; the writer sets it to the file path when empty
  std::string file_tag;    // appended to the profile_step_<N> copy's stem (WindowContext::file_tag)
  // profiling.whole_us_timestamps: ts/dur as whole µs, nesting kept (whole_us_times.h) and the
  // largest shift written as whole_us_timestamps.max_shift_us; false: ns resolution.
  bool whole_us = true;
};

// The trace as JSON text. REQUIRES: finalize_timeline(timeline) was called.
std::string chrome_trace_json(const Timeline& timeline, const ChromeTraceOptions& options);

struct TraceFiles {
  std::filesystem::path trace;      // <dir>/profiler_traces/<host>_<pid>.<unix_ns>.pt.trace.json[.gz]
  std::filesystem::path step_copy;  // <dir>/profile_step_<N>.json (RAVE guide name, never gzipped)
};

// Writes the trace once, atomically, under profiler_traces/ (the file name TensorBoard's
// plugin and HTA look for; gzipped when `gzip` and zlib is available), and names it also
// profile_step_<first_step>.json (N = 0 when the window recorded no step): a hard link to the
// same inode (a symbolic link where hard links are not possible; util/atomic_file.h), or, for a
// gzipped trace, the uncompressed JSON written out. Before: two copies of the same bytes.
// REQUIRES: finalize_timeline(timeline) was called. Throws rt::Error naming the path on I/O
// failure.
TraceFiles write_chrome_trace(const Timeline& timeline, const std::filesystem::path& dir, bool gzip,
                              ChromeTraceOptions options = {});

// True when the build has zlib (gzip output possible).
bool chrome_trace_gzip_available();

// The trace as a window output ("chrome_trace"): write_chrome_trace() into the window's
// directory; files: the profiler_traces/ copy, then profile_step_<N>.json.
class ChromeTraceOutput : public TraceOutput {
 public:
  // Throws rt::Error naming profiling.gzip when `gzip` is asked for and the build has no zlib.
  ChromeTraceOutput(bool gzip, ChromeTraceOptions options);
  const char* name() const override { return "chrome_trace"; }
  void write(const Timeline& timeline, const WindowContext& window, OutputResult& result) override;

 private:
  bool gzip_;
  ChromeTraceOptions options_;
};

// gzip-compresses `data` (RFC 1952). Throws rt::Error when zlib is unavailable or fails.
std::string gzip_compress(const std::string& data);

}  // namespace rt::prof
