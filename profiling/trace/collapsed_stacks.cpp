#include "profiling/trace/collapsed_stacks.h"

#include <algorithm>
#include <map>
#include <set>

#include "util/atomic_file.h"

namespace rt::prof {

namespace {

// "# 367 of 1210 distinct frames unresolved …: libtorch_cpu.so.1.13.0 (366), …". A comment
// line: flamegraph.pl and speedscope read only lines ending in " <count>", so it must not.
std::string unresolved_footer(const std::set<std::string>& unresolved, size_t frames) {
  std::map<std::string, size_t> by_module;
  for (const auto& f : unresolved) {
    const size_t plus = f.rfind("+0x");
    by_module[plus == std::string::npos ? "(no module)" : f.substr(0, plus)]++;
  }
  std::string out = "# " + std::to_string(unresolved.size()) + " of " + std::to_string(frames) +
                    " distinct frames unresolved, shown as <module>+0x<offset>: no symbol in the module's "
                    "debug info, .symtab or .dynsym contains them (functions it does not export); its debug "
                    "symbols would name them:";
  for (const auto& [module, n] : by_module) out += " " + module + " (" + std::to_string(n) + ")";
  return out + "\n";
}

}  // namespace

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
  std::set<std::string> frames, unresolved;
  for (const auto& [stack, ns] : self_ns) {
    const int64_t us = ns / 1000;
    if (us <= 0) continue;
    out += stack + " " + std::to_string(us) + "\n";
    for (size_t begin = 0, end; begin < stack.size(); begin = end + 1) {
      end = std::min(stack.find(';', begin), stack.size());
      std::string frame = stack.substr(begin, end - begin);
      if (t.unresolved_frames.count(frame)) unresolved.insert(frame);
      frames.insert(std::move(frame));
    }
  }
  if (!unresolved.empty()) out += unresolved_footer(unresolved, frames.size());
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
