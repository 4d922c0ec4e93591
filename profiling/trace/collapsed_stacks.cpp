#include "profiling/trace/collapsed_stacks.h"

#include <algorithm>
#include <map>
#include <set>

#include "util/atomic_file.h"

namespace rt::prof {

namespace {

// "367 of 1210 distinct frames unresolved …: libtorch_cpu.so.1.13.0 (366), …".
std::string unresolved_text(const std::set<std::string>& unresolved, size_t frames) {
  std::map<std::string, size_t> by_module;
  for (const auto& f : unresolved) {
    const size_t plus = f.rfind("+0x");
    by_module[plus == std::string::npos ? "(no module)" : f.substr(0, plus)]++;
  }
  std::string out = std::to_string(unresolved.size()) + " of " + std::to_string(frames) +
                    " distinct frames unresolved, shown as <module>+0x<offset>: no symbol in the module's "
                    "debug info, .symtab or .dynsym contains them (functions it does not export); its debug "
                    "symbols would name them:";
  for (const auto& [module, n] : by_module) out += " " + module + " (" + std::to_string(n) + ")";
  return out;
}

// Self time per stack key ("root;…;leaf;op"), in ns.
std::map<std::string, int64_t> self_times(const Timeline& t) {
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
  return self_ns;
}

}  // namespace

std::string collapsed_stacks(const Timeline& t) {
  std::string out;
  for (const auto& [stack, ns] : self_times(t)) {
    const int64_t us = ns / 1000;
    if (us > 0) out += stack + " " + std::to_string(us) + "\n";
  }
  return out;
}

std::string unresolved_frames_note(const Timeline& t) {
  std::set<std::string> frames, unresolved;
  for (const auto& [stack, ns] : self_times(t)) {
    if (ns / 1000 <= 0) continue;  // the frames of the lines written
    for (size_t begin = 0, end; begin < stack.size(); begin = end + 1) {
      end = std::min(stack.find(';', begin), stack.size());
      std::string frame = stack.substr(begin, end - begin);
      if (t.unresolved_frames.count(frame)) unresolved.insert(frame);
      frames.insert(std::move(frame));
    }
  }
  return unresolved.empty() ? std::string() : unresolved_text(unresolved, frames.size());
}

void write_collapsed_stacks(const Timeline& timeline, const std::filesystem::path& path) {
  write_file_atomic(path, collapsed_stacks(timeline));
}

void CollapsedStacksOutput::write(const Timeline& timeline, const WindowContext& window,
                                  OutputResult& result) {
  const std::filesystem::path path =
      window.output_dir / (profile_step_stem(timeline, window.file_tag) + "_stacks.txt");
  write_collapsed_stacks(timeline, path);
  result.files.push_back(path);
  // The folded format has no comments (flamegraph.pl reports any other line as invalid): the
  // note goes to the console, after the window's line.
  if (const std::string note = unresolved_frames_note(timeline); !note.empty())
    result.text = "stacks: " + note;
}

}  // namespace rt::prof
