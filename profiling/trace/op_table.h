// The end-of-window operator summary in torch's key_averages().table() layout
// (torch/autograd/profiler_util.py _build_table): right-aligned columns separated by two
// spaces, a dashed rule above and below the header, "Self CPU time total: X" as the footer;
// times in us/ms/s with 3 decimals, shares as "12.34%", memory in b/Kb/Mb/Gb.
//
// Columns: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg,
// [Self CUDA, Self CUDA %, CUDA total, CUDA time avg] when any GPU time is linked,
// [CPU Mem, Self CPU Mem, (CUDA Mem, Self CUDA Mem)] with profile_memory, # of Calls,
// [Input Shapes] when shapes were recorded (rows then group by name and input shapes).
#pragma once

#include <string>
#include <vector>

#include "profiling/trace/timeline.h"
#include "profiling/trace/trace_output.h"

namespace rt::prof {

struct OpStats {
  std::string key;           // operator / annotation name
  std::string input_shapes;  // Python list repr, "" when not recorded
  int64_t count = 0;
  int64_t self_cpu_ns = 0;
  int64_t cpu_total_ns = 0;
  int64_t self_device_ns = 0;
  int64_t device_total_ns = 0;
  int64_t self_cpu_memory = 0;
  int64_t cpu_memory = 0;
  int64_t self_device_memory = 0;
  int64_t device_memory = 0;
};

// Aggregates the CPU activities (operators, annotations, runtime calls) of a finalized
// timeline by name (and input shapes when `group_by_input_shape`), in first-seen order.
// Self time = duration minus direct children; GPU time is linked through External ids.
std::vector<OpStats> key_averages(const Timeline& timeline, bool group_by_input_shape);

struct OpTableOptions {
  // self_cpu_time_total | cpu_time_total | self_cuda_time_total | cuda_time_total | count |
  // self_cpu_memory_usage | cpu_memory_usage (profiling.sort_by)
  std::string sort_by = "self_cpu_time_total";
  int row_limit = 10;
  bool profile_memory = false;
  std::string device_name = "CUDA";
};

// The sort keys op_table() accepts.
const std::vector<std::string>& op_table_sort_keys();

// Throws rt::Error naming profiling.sort_by, the value and the accepted keys when sort_by is
// unknown. Returns "" when there are no rows.
std::string op_table(const std::vector<OpStats>& stats, const OpTableOptions& options);

// The table as a window output ("op_table"): its text, for the console; no file. Rows group by
// input shapes when `group_by_input_shape` (record_shapes).
class OpTableOutput : public TraceOutput {
 public:
  // Throws rt::Error naming profiling.sort_by or profiling.row_limit when one is invalid.
  OpTableOutput(OpTableOptions options, bool group_by_input_shape);
  const char* name() const override { return "op_table"; }
  void write(const Timeline& timeline, const WindowContext& window, OutputResult& result) override;

 private:
  OpTableOptions options_;
  bool group_by_input_shape_;
};

// torch's _format_time / _format_time_share / _format_memory.
std::string format_time_us(double us);
std::string format_time_share(double part, double total);
std::string format_memory(int64_t bytes);

}  // namespace rt::prof
