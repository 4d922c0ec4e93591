#include "profiling/trace/op_table.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <unordered_map>

#include "util/error.h"

namespace rt::prof {

namespace {

std::string shapes_repr(const std::vector<std::vector<int64_t>>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += "[";
    for (size_t j = 0; j < dims[i].size(); ++j) {
      if (j) s += ", ";
      s += std::to_string(dims[i][j]);
    }
    s += "]";
  }
  return s + "]";
}

bool is_device_kind(ActivityKind k) {
  return k == ActivityKind::kKernel || k == ActivityKind::kGpuMemcpy || k == ActivityKind::kGpuMemset;
}

std::string pad_left(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

}  // namespace

std::string format_time_us(double us) {
  char buf[64];
  if (us >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.3fs", us / 1e6);
  } else if (us >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.3fms", us / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.3fus", us);
  }
  return buf;
}

std::string format_time_share(double part, double total) {
  if (total == 0) return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f%%", part * 100.0 / total);
  return buf;
}

std::string format_memory(int64_t bytes) {
  const double kb = 1024.0, mb = kb * 1024, gb = mb * 1024;
  const double a = std::abs(static_cast<double>(bytes));
  char buf[64];
  if (a >= gb) {
    std::snprintf(buf, sizeof buf, "%.2f Gb", bytes / gb);
  } else if (a >= mb) {
    std::snprintf(buf, sizeof buf, "%.2f Mb", bytes / mb);
  } else if (a >= kb) {
    std::snprintf(buf, sizeof buf, "%.2f Kb", bytes / kb);
  } else {
    return std::to_string(bytes) + " b";
  }
  return buf;
}

std::vector<OpStats> key_averages(const Timeline& t, bool group_by_input_shape) {
  const auto& acts = t.activities;
  const size_t n = acts.size();
  std::vector<int64_t> children_ns(n, 0), self_dev(n, 0), total_dev(n, 0), self_mem(n, 0), total_mem(n, 0),
      self_dmem(n, 0), total_dmem(n, 0);
  std::unordered_map<int64_t, size_t> by_external;
  for (size_t i = 0; i < n; ++i) {
    if (is_cpu_kind(acts[i].kind) && acts[i].external_id >= 0 && acts[i].kind != ActivityKind::kCudaRuntime &&
        acts[i].kind != ActivityKind::kCudaDriver) {
      by_external.emplace(acts[i].external_id, i);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const Activity& a = acts[i];
    if (is_cpu_kind(a.kind) && a.parent >= 0) children_ns[a.parent] += a.end_ns - a.start_ns;
    if (is_device_kind(a.kind) && a.external_id >= 0) {
      auto it = by_external.find(a.external_id);
      if (it != by_external.end()) self_dev[it->second] += a.end_ns - a.start_ns;
    }
  }
  for (const auto& m : t.memory) {
    if (m.owner < 0 || static_cast<size_t>(m.owner) >= n) continue;
    (m.device_type == 0 ? self_mem : self_dmem)[m.owner] += m.bytes;
  }
  // Inclusive totals: children come after their parent in the finalized order, so one
  // reverse pass accumulates them.
  for (size_t i = n; i-- > 0;) {
    total_dev[i] += self_dev[i];
    total_mem[i] += self_mem[i];
    total_dmem[i] += self_dmem[i];
    const int64_t p = acts[i].parent;
    if (p >= 0 && is_cpu_kind(acts[i].kind)) {
      total_dev[p] += total_dev[i];
      total_mem[p] += total_mem[i];
      total_dmem[p] += total_dmem[i];
    }
  }
  std::vector<OpStats> out;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (size_t i = 0; i < n; ++i) {
    const Activity& a = acts[i];
    if (!is_cpu_kind(a.kind)) continue;
    std::string shapes = group_by_input_shape ? shapes_repr(a.input_dims) : "";
    auto key = std::make_pair(a.name, shapes);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, out.size()).first;
      OpStats s;
      s.key = a.name;
      s.input_shapes = shapes;
      out.push_back(s);
    }
    OpStats& s = out[it->second];
    const int64_t dur = a.end_ns - a.start_ns;
    s.count += 1;
    s.cpu_total_ns += dur;
    s.self_cpu_ns += dur - children_ns[i];
    s.self_device_ns += self_dev[i];
    s.device_total_ns += total_dev[i];
    s.self_cpu_memory += self_mem[i];
    s.cpu_memory += total_mem[i];
    s.self_device_memory += self_dmem[i];
    s.device_memory += total_dmem[i];
  }
  return out;
}

const std::vector<std::string>& op_table_sort_keys() {
  static const std::vector<std::string> keys = {
      "self_cpu_time_total",   "cpu_time_total",  "self_cuda_time_total", "cuda_time_total", "count",
      "self_cpu_memory_usage", "cpu_memory_usage"};
  return keys;
}

std::string op_table(const std::vector<OpStats>& input, const OpTableOptions& options) {
  using Key = std::function<double(const OpStats&)>;
  static const std::map<std::string, Key> sort_keys = {
      {"self_cpu_time_total", [](const OpStats& s) { return double(s.self_cpu_ns); }},
      {"cpu_time_total", [](const OpStats& s) { return double(s.cpu_total_ns); }},
      {"self_cuda_time_total", [](const OpStats& s) { return double(s.self_device_ns); }},
      {"cuda_time_total", [](const OpStats& s) { return double(s.device_total_ns); }},
      {"count", [](const OpStats& s) { return double(s.count); }},
      {"self_cpu_memory_usage", [](const OpStats& s) { return double(s.self_cpu_memory); }},
      {"cpu_memory_usage", [](const OpStats& s) { return double(s.cpu_memory); }},
  };
  auto key_it = sort_keys.find(options.sort_by);
  if (key_it == sort_keys.end()) {
    std::string accepted;
    for (const auto& k : op_table_sort_keys()) accepted += (accepted.empty() ? "" : ", ") + k;
    const std::string hint = closest_match(options.sort_by, op_table_sort_keys());
    throw Error("profiling.sort_by = \"" + options.sort_by + "\" is not a known sort key; accepted: " +
                accepted + (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)"));
  }
  if (input.empty()) return "";
  std::vector<OpStats> events = input;
  std::stable_sort(events.begin(), events.end(),
                   [&](const OpStats& a, const OpStats& b) { return key_it->second(a) > key_it->second(b); });

  const bool has_device_time =
      std::any_of(events.begin(), events.end(), [](const OpStats& s) { return s.self_device_ns > 0; });
  const bool has_device_mem =
      std::any_of(events.begin(), events.end(), [](const OpStats& s) { return s.self_device_memory > 0; });
  const bool has_input_shapes =
      std::any_of(events.begin(), events.end(), [](const OpStats& s) { return s.input_shapes.size() > 2; });

  constexpr size_t kMaxName = 55, kMaxShapes = 80, kDefault = 12;
  size_t name_width = 0, shapes_width = 0;
  for (const auto& e : events) {
    name_width = std::max(name_width, e.key.size() + 4);
    shapes_width = std::max(shapes_width, e.input_shapes.size() + 4);
  }
  name_width = std::min(name_width, kMaxName);
  shapes_width = std::min(shapes_width, kMaxShapes);

  const std::string& dev = options.device_name;
  std::vector<std::string> headers = {"Name",        "Self CPU %", "Self CPU",
                                      "CPU total %", "CPU total",  "CPU time avg"};
  if (has_device_time) {
    for (const auto& h : {"Self " + dev, "Self " + dev + " %", dev + " total", dev + " time avg"})
      headers.push_back(h);
  }
  if (options.profile_memory) {
    headers.push_back("CPU Mem");
    headers.push_back("Self CPU Mem");
    if (has_device_mem) {
      headers.push_back(dev + " Mem");
      headers.push_back("Self " + dev + " Mem");
    }
  }
  headers.push_back("# of Calls");
  std::vector<size_t> widths(headers.size(), kDefault);
  widths[0] = name_width;
  if (has_input_shapes) {
    headers.push_back("Input Shapes");
    widths.push_back(shapes_width);
  }

  auto row = [&](const std::vector<std::string>& values) {
    std::string line;
    for (size_t i = 0; i < values.size(); ++i) line += pad_left(values[i], widths[i]) + "  ";
    return line + "\n";
  };
  std::string sep;
  for (size_t w : widths) sep += std::string(w, '-') + "  ";
  sep += "\n";

  double sum_self_cpu = 0, sum_self_device = 0;
  for (const auto& e : events) {
    sum_self_cpu += e.self_cpu_ns / 1e3;
    sum_self_device += e.self_device_ns / 1e3;
  }

  std::string out = sep + row(headers) + sep;
  int shown = 0;
  for (const auto& e : events) {
    if (shown++ == options.row_limit) break;
    std::string name = e.key;
    if (name.size() >= kMaxName - 3) name = name.substr(0, kMaxName - 3) + "...";
    const double self_us = e.self_cpu_ns / 1e3, total_us = e.cpu_total_ns / 1e3;
    std::vector<std::string> v = {name,
                                  format_time_share(self_us, sum_self_cpu),
                                  format_time_us(self_us),
                                  format_time_share(total_us, sum_self_cpu),
                                  format_time_us(total_us),
                                  format_time_us(total_us / std::max<int64_t>(e.count, 1))};
    if (has_device_time) {
      const double sd = e.self_device_ns / 1e3, td = e.device_total_ns / 1e3;
      v.push_back(format_time_us(sd));
      v.push_back(format_time_share(sd, sum_self_device));
      v.push_back(format_time_us(td));
      v.push_back(format_time_us(td / std::max<int64_t>(e.count, 1)));
    }
    if (options.profile_memory) {
      v.push_back(format_memory(e.cpu_memory));
      v.push_back(format_memory(e.self_cpu_memory));
      if (has_device_mem) {
        v.push_back(format_memory(e.device_memory));
        v.push_back(format_memory(e.self_device_memory));
      }
    }
    v.push_back(std::to_string(e.count));
    if (has_input_shapes) v.push_back(e.input_shapes.substr(0, shapes_width));
    out += row(v);
  }
  out += sep;
  out += "Self CPU time total: " + format_time_us(sum_self_cpu) + "\n";
  if (has_device_time) out += "Self " + dev + " time total: " + format_time_us(sum_self_device) + "\n";
  return out;
}

OpTableOutput::OpTableOutput(OpTableOptions options, bool group_by_input_shape)
    : options_(std::move(options)), group_by_input_shape_(group_by_input_shape) {
  op_table({}, options_);  // validates sort_by
  if (options_.row_limit < 1) {
    throw Error("profiling.row_limit = " + std::to_string(options_.row_limit) +
                " is invalid: expected an integer >= 1");
  }
}

void OpTableOutput::write(const Timeline& timeline, const WindowContext&, OutputResult& result) {
  result.text = op_table(key_averages(timeline, group_by_input_shape_), options_);
}

}  // namespace rt::prof
