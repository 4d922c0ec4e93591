#include "profiling/trace/collapsed_stacks.h"

#include <map>

#include "util/atomic_file.h"

namespace rt::prof {

std::string collapsed_stacks(const Timeline& t) {
  const auto& acts = t.activities;
  std::vector<int64_t> children_ns(acts.size(), 0);
  for (const auto& a : acts) {
    if (a.parent >= 0 && is_cpu_kind(a.kind)) children_ns[a.parent] += a.end_ns - a.start_ns;
  }
  std::map<std::string, int64_t> self_ns;
  for (size_t i = 0; i < acts.size(); ++i) {
    const Activity& a = acts[i];
    if (a.kind != ActivityKind::kCpuOp || a.call_stack.empty()) continue;
    std::string key;
    for (auto it = a.call_stack.rbegin(); it != a.call_stack.rend(); ++it) {
      key += *it;
      key += ';';
    }
    for (char c : a.name) key += (c == ';' ? ':' : c);
    self_ns[key] += a.end_ns - a.start_ns - children_ns[i];
  }
  std::string out;
  for (const auto& [stack, ns] : self_ns) {
    const int64_t us = ns / 1000;
    if (us > 0) out += stack + " " + std::to_string(us) + "\n";
  }
  return out;
}

void write_collapsed_stacks(const Timeline& timeline, const std::filesystem::path& path) {
  write_file_atomic(path, collapsed_stacks(timeline));
}

void CollapsedStacksOutput::write(const Timeline& timeline, const WindowContext& window,
                                  OutputResult& result) {
  const std::filesystem::path path = window.output_dir / (profile_step_stem(timeline, window.file_tag) + "_stacks.txt");
  write_collapsed_stacks(timeline, path);
  result.files.push_back(path);
}

}  // namespace rt::prof
