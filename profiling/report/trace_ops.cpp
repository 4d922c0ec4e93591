#include "profiling/report/trace_ops.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/strings.h"

#ifdef RT_HAS_ZLIB
#include <zlib.h>
#endif

namespace rt::report {
namespace fs = std::filesystem;

namespace {

struct Span {
  double ts = 0, dur = 0;
  std::string name;
  bool is_op = false;
};

void add(std::unordered_map<std::string, OpTotal>& into, const std::string& name, double self, double total) {
  OpTotal& t = into[name];
  t.name = name;
  ++t.count;
  t.self_us += self;
  t.total_us += total;
}

std::vector<OpTotal> merge_sorted(std::vector<OpTotal> existing,
                                  const std::unordered_map<std::string, OpTotal>& add_in) {
  std::map<std::string, OpTotal> all;
  for (auto& op : existing) all[op.name] = op;
  for (const auto& [name, op] : add_in) {
    OpTotal& t = all[name];
    t.name = name;
    t.count += op.count;
    t.self_us += op.self_us;
    t.total_us += op.total_us;
  }
  std::vector<OpTotal> out;
  for (auto& [name, op] : all) out.push_back(op);
  std::stable_sort(out.begin(), out.end(),
                   [](const OpTotal& a, const OpTotal& b) { return a.self_us > b.self_us; });
  return out;
}

}  // namespace

std::string op_display_name(const std::string& name) {
  static const std::string kNode = "torch::autograd::CppNode<";
  std::string out;
  size_t at = 0;
  for (size_t found; (found = name.find(kNode, at)) != std::string::npos;) {
    // The node's type, to its matching '>'.
    size_t end = found + kNode.size();
    int depth = 1;
    for (; end < name.size() && depth > 0; ++end) depth += name[end] == '<' ? 1 : name[end] == '>' ? -1 : 0;
    if (depth != 0) break;  // unbalanced: leave the rest as it is
    const std::string type = name.substr(found + kNode.size(), end - 1 - found - kNode.size());
    // Its last component outside template arguments: "rt::models::(anonymous namespace)::X" → "X".
    size_t last = 0;
    depth = 0;
    for (size_t i = 0; i + 1 < type.size(); ++i) {
      depth += type[i] == '<' ? 1 : type[i] == '>' ? -1 : 0;
      if (depth == 0 && type[i] == ':' && type[i + 1] == ':') last = i + 2;
    }
    out += name.substr(at, found - at) + type.substr(last) + " (C++ node)";
    at = end;
  }
  return out + name.substr(at);
}

std::string read_maybe_gzipped(const fs::path& file) {
  if (!ends_with(file.string(), ".gz")) return read_file(file);
#ifdef RT_HAS_ZLIB
  gzFile gz = gzopen(file.c_str(), "rb");
  if (!gz) throw Error("cannot open trace file " + file.string());
  std::string text;
  char buf[1 << 16];
  int n;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  const bool failed = n < 0;
  gzclose(gz);
  if (failed) throw Error("trace file " + file.string() + " is not a valid gzip file");
  return text;
#else
  throw Error("trace file " + file.string() + " is gzipped but this build has no zlib; gunzip it first");
#endif
}

void aggregate_trace(const Json& trace, TraceOps& into) {
  const Json* events = &trace;
  if (trace.is_object()) {
    auto it = trace.find("traceEvents");
    if (it == trace.end() || !it->is_array()) return;
    events = &*it;
  }
  if (!events->is_array()) return;

  std::map<std::pair<std::string, std::string>, std::vector<Span>> by_thread;
  std::unordered_map<std::string, OpTotal> cpu, device;
  for (const Json& e : *events) {
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    const std::string cat = e.value("cat", "");
    const std::string name = e.value("name", "");
    const double ts = e.value("ts", 0.0), dur = e.value("dur", 0.0);
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
      add(device, name, dur, dur);
      into.device_total_us += dur;
      continue;
    }
    if (cat != "cpu_op" && cat != "user_annotation") continue;
    if (cat == "user_annotation" && name.rfind("ProfilerStep#", 0) == 0) ++into.profiler_steps;
    // pid/tid are numbers in Kineto traces but strings in some tools' output.
    by_thread[{e.contains("pid") ? e["pid"].dump() : "", e.contains("tid") ? e["tid"].dump() : ""}].push_back(
        {ts, dur, name, cat == "cpu_op"});
  }

  for (auto& [thread, spans] : by_thread) {
    // Parents before children: earlier start first, longer first on ties.
    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return std::tie(a.ts, b.dur) < std::tie(b.ts, a.dur); });
    std::vector<double> self(spans.size());
    std::vector<size_t> open;
    for (size_t i = 0; i < spans.size(); ++i) {
      self[i] = spans[i].dur;
      while (!open.empty() && spans[open.back()].ts + spans[open.back()].dur <= spans[i].ts) open.pop_back();
      if (!open.empty()) self[open.back()] -= spans[i].dur;
      open.push_back(i);
    }
    for (size_t i = 0; i < spans.size(); ++i) {
      if (!spans[i].is_op) continue;
      const double s = std::max(0.0, self[i]);
      add(cpu, op_display_name(spans[i].name), s, spans[i].dur);
      into.cpu_self_total_us += s;
    }
  }
  into.cpu_ops = merge_sorted(std::move(into.cpu_ops), cpu);
  into.device_ops = merge_sorted(std::move(into.device_ops), device);
}

TraceOps read_trace_ops(const std::vector<fs::path>& files) {
  TraceOps ops;
  for (const auto& f : files) {
    Json j;
    try {
      j = Json::parse(read_maybe_gzipped(f));
    } catch (const Json::exception& e) {
      throw Error("cannot parse trace file " + f.string() + ": " + e.what());
    }
    aggregate_trace(j, ops);
    ops.files.push_back(f);
  }
  return ops;
}

}  // namespace rt::report
