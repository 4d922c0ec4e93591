// Top operators of a run, read back from its Chrome/Kineto trace files: the same
// self-time aggregation as torch's key_averages(), but over the JSON on disk, so profile-report
// works on any run directory without the process that wrote it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "util/json.h"

namespace rt::report {

struct OpTotal {
  std::string name;
  int64_t count = 0;
  double self_us = 0;   // duration minus the durations of direct children on the same thread
  double total_us = 0;  // sum of durations
};

struct TraceOps {
  std::vector<std::filesystem::path> files;
  std::vector<OpTotal> cpu_ops;     // cat "cpu_op", by self time descending
  std::vector<OpTotal> device_ops;  // cat "kernel" / "gpu_memcpy" / "gpu_memset", by time descending
  double cpu_self_total_us = 0;
  double device_total_us = 0;
  int64_t profiler_steps = 0;  // ProfilerStep#N spans seen
};

// An operator's name as the report shows it (table, --json, --compare): a custom autograd
// function's node, which torch names after its C++ type
// ("torch::autograd::CppNode<rt::models::(anonymous namespace)::WnConv1dGemm>", also inside
// "autograd::engine::evaluate_function: …"), by the type's own name: "WnConv1dGemm (C++ node)".
// Other names are unchanged.
std::string op_display_name(const std::string& name);

// Aggregates the complete ("ph":"X") events of one parsed trace into `into`. Nesting, and so
// self time, is computed per (pid, tid) over cpu_op and user_annotation spans.
void aggregate_trace(const Json& trace, TraceOps& into);

// Reads each file (".json" or ".json.gz"), aggregates them all and sorts the lists. Throws
// rt::Error naming the file when one cannot be read or parsed (or is gzipped and this build has
// no zlib).
TraceOps read_trace_ops(const std::vector<std::filesystem::path>& files);

// Reads a ".json" or ".json.gz" file into text. Throws rt::Error naming the file.
std::string read_maybe_gzipped(const std::filesystem::path& file);

}  // namespace rt::report
