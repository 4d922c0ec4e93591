#include "profiling/report/run_report.h"

#include "profiling/report/findings.h"
#include "profiling/report/run_files.h"
#include "util/error.h"
#include "util/run_pointer.h"

namespace rt::report {
namespace fs = std::filesystem;

std::string phase_label(const std::string& key) {
  static const std::map<std::string, std::string> labels = {
      {"data", "data loading"}, {"forward", "forward"},          {"loss", "loss"},
      {"backward", "backward"}, {"optimizer", "optimizer step"}, {"other", "other (untimed)"}};
  auto it = labels.find(key);
  return it == labels.end() ? key : it->second;
}

const MemoryPeak* find_memory_peak(const RunAnalysis& a, const std::string& series) {
  for (const auto& p : a.memory_peaks) {
    if (p.name == series) return &p;
  }
  return nullptr;
}

std::string sample_unit_of(const RunAnalysis& a) { return a.sample_unit.empty() ? "samples" : a.sample_unit; }

RunAnalysis analyse_run(const fs::path& run_dir_given, const ReportOptions& options) {
  std::error_code ec;
  const fs::path run_dir_in = resolve_run_pointer(run_dir_given);  // runs/latest
  if (!fs::is_directory(run_dir_in, ec)) {
    throw Error("profile-report: " + run_dir_in.string() +
                " is not a directory (expected a run directory such as "
                "runs/<name>_<date>_<hex> or runs/latest)");
  }
  RunAnalysis a;
  a.run_dir = fs::canonical(run_dir_in, ec);
  if (ec) a.run_dir = run_dir_in;
  a.name = a.run_dir.filename().string();
  load_run_files(a);
  judge_memory(a, options.leak);
  find_bottleneck(a);
  if (static_cast<int>(a.ops.cpu_ops.size()) > options.top_ops)
    a.ops.cpu_ops.resize(static_cast<size_t>(options.top_ops));
  if (static_cast<int>(a.ops.device_ops.size()) > options.top_ops) {
    a.ops.device_ops.resize(static_cast<size_t>(options.top_ops));
  }
  add_findings(a);
  return a;
}

}  // namespace rt::report
