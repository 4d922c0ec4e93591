#include "profiling/report/report_format.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <optional>
#include <sstream>

#include "util/error.h"
#include "util/printable.h"
#include "util/profile_schema.h"

namespace rt::report {

namespace {

std::string fixed(double v, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

std::string pad(const std::string& s, size_t width, bool right = false) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

// A name cut to `width` characters in the middle, keeping its first 8 and most of its end:
// the end is what tells long names apart ("autograd::engine::evaluate_function: <node>", a C++
// node's type).
std::string fit_name(const std::string& name, size_t width) {
  if (name.size() <= width) return name;
  const size_t head = 8, tail = width - 3 - head;
  return name.substr(0, head) + "..." + name.substr(name.size() - tail);
}

std::string rate(double v) {
  if (v >= 1e6) return fixed(v / 1e6, 2) + "M";
  if (v >= 1e4) return fixed(v / 1e3, 1) + "k";
  return fixed(v, 1);
}

Json dist_json(const Distribution& d) {
  return {{"n", d.n}, {"mean", d.mean}, {"median", d.median}, {"p90", d.p90}, {"min", d.min}, {"max", d.max}};
}

std::string dist_row(const std::string& label, const Distribution& d) {
  return "  " + pad(label, 14) + pad(std::to_string(d.n), 6, true) + pad(format_seconds(d.median), 11, true) +
         pad(format_seconds(d.p90), 11, true) + pad(format_seconds(d.max), 11, true) +
         pad(format_seconds(d.mean), 11, true) + "\n";
}

// The metrics compared side by side, each read from an analysis (nullopt when it lacks it).
struct Metric {
  std::string key, label;
  std::function<std::optional<double>(const RunAnalysis&)> get;
  std::function<std::string(double)> show;
};

std::optional<double> positive(double v) { return v > 0 ? std::optional<double>(v) : std::nullopt; }

const PhaseTime* find_phase(const RunAnalysis& a, const std::string& key) {
  for (const auto& p : a.phases) {
    if (p.key == key) return &p;
  }
  return nullptr;
}

// The true peak when the run recorded one, else the largest sample.
double peak_of(const RunAnalysis& a, const std::string& series) {
  if (const MemoryPeak* p = find_memory_peak(a, series)) return p->bytes;
  for (const auto& t : a.memory_trends) {
    if (t.name == series) return t.peak;
  }
  return 0;
}

std::vector<Metric> metrics() {
  std::vector<Metric> m = {
      {"steps", "steps", [](const RunAnalysis& a) { return positive(static_cast<double>(a.total_steps)); },
       [](double v) { return fixed(v, 0); }},
      {"steps_per_second", "steps/s (whole run)",
       [](const RunAnalysis& a) { return positive(a.steps_per_second); },
       [](double v) { return fixed(v, 2); }},
      // In each run's unit ("throughput unit" row): audio samples for RAVE, time bins for SSM.
      {"samples_per_second", "throughput/s (whole run)",
       [](const RunAnalysis& a) { return positive(a.samples_per_second); }, rate},
      {"examples_per_second", "examples/s (steady median)",
       [](const RunAnalysis& a) { return positive(a.steady_examples_per_second.median); }, rate},
      {"median_step_time", "step time median (steady)",
       [](const RunAnalysis& a) { return positive(a.steady_step_time.median); }, format_seconds},
      {"p90_step_time", "step time p90 (steady)",
       [](const RunAnalysis& a) { return positive(a.steady_step_time.p90); }, format_seconds},
      {"max_step_time", "step time max", [](const RunAnalysis& a) { return positive(a.step_time.max); },
       format_seconds},
      {"warmup_step_time", "step time median (warm-up)",
       [](const RunAnalysis& a) { return positive(a.warmup_step_time.median); }, format_seconds},
  };
  for (const std::string key : {"data", "forward", "loss", "backward", "optimizer", "other"}) {
    m.push_back({"phase_" + key, phase_label(key) + " / step",
                 [key](const RunAnalysis& a) -> std::optional<double> {
                   const PhaseTime* p = find_phase(a, key);
                   return p ? std::optional<double>(p->seconds) : std::nullopt;
                 },
                 format_seconds});
  }
  for (const std::string series : {"rss", "cpu bytes_in_use", "cuda:0 bytes_in_use", "cuda:0 reserved"}) {
    m.push_back({"peak_" + series, "peak " + series,
                 [series](const RunAnalysis& a) { return positive(peak_of(a, series)); }, format_bytes});
  }
  return m;
}

}  // namespace

std::string format_seconds(double s) {
  const double a = std::abs(s);
  if (a >= 1.0) return fixed(s, 2) + " s";
  if (a >= 1e-3) return fixed(s * 1e3, a >= 0.1 ? 0 : (a >= 0.01 ? 1 : 2)) + " ms";
  return fixed(s * 1e6, 0) + " us";
}

std::string format_bytes(double b) {
  const double a = std::abs(b);
  if (a >= 1024.0 * 1024 * 1024) return fixed(b / (1024.0 * 1024 * 1024), 2) + " GiB";
  if (a >= 1024.0 * 1024) return fixed(b / (1024.0 * 1024), 1) + " MiB";
  if (a >= 1024.0) return fixed(b / 1024.0, 1) + " KiB";
  return fixed(b, 0) + " B";
}

namespace {

// The validation metrics split for display: R² per session (val/r2_group_<name>), per output
// dimension (val/r2_<d>), and the others.
struct ValidationParts {
  std::map<std::string, double> sessions, dims, others;
};

ValidationParts validation_parts(const RunAnalysis& a) {
  const std::string group = profile_schema::summary::kSessionR2Prefix, dim = "val/r2_";
  ValidationParts v;
  for (const auto& [name, value] : a.validation) {
    if (name.rfind(group, 0) == 0) {
      v.sessions[name.substr(group.size())] = value;
    } else if (name.rfind(dim, 0) == 0 && name.size() > dim.size() &&
               name.find_first_not_of("0123456789", dim.size()) == std::string::npos) {
      v.dims[name] = value;
    } else {
      v.others[name] = value;
    }
  }
  return v;
}

std::string validation_text(const RunAnalysis& a) {
  if (a.validation.empty()) return "";
  const ValidationParts v = validation_parts(a);
  std::ostringstream o;
  auto list = [&o](const std::map<std::string, double>& values, size_t cut) {
    const char* sep = "";
    for (const auto& [name, value] : values) {
      o << sep << printable(name.substr(cut)) << " " << fixed(value, 4);
      sep = ", ";
    }
    o << "\n";
  };
  o << "\nValidation (the last, training_summary.json)\n  ";
  list(v.others, 0);
  if (!v.dims.empty()) {
    o << "  R² per dimension: ";
    list(v.dims, std::string("val/r2_").size());
  }
  if (!v.sessions.empty()) {
    size_t width = 7;
    for (const auto& [name, value] : v.sessions) width = std::max(width, printable(name).size());
    o << "  R² per session:\n";
    for (const auto& [name, value] : v.sessions)
      o << "    " << pad(printable(name), width + 2) << fixed(value, 4) << "\n";
  }
  return o.str();
}

}  // namespace

std::string format_report(const RunAnalysis& a) {
  std::ostringstream o;
  o << "profile-report: " << terminal_safe(a.run_dir.string()) << "\n\nRun\n";
  o << "  model      " << (a.model.empty() ? "?" : a.model);
  if (!a.config.empty()) o << "  (config " << a.config << ")";
  if (!a.run_name.empty()) o << "\n  run name   " << a.run_name;
  o << "\n  device     " << (a.device.empty() ? "?" : a.device) << ", " << count_text(a.threads, "thread")
    << ", batch " << a.batch << "\n";
  o << "  status     "
    << (a.status.empty()        ? "?"
        : a.status == "running" ? "did not finish (summary written while running)"
                                : a.status)
    << ", " << a.total_steps << " steps";
  if (a.last_step >= 0) o << " (" << a.first_step << ".." << a.last_step << ")";
  o << " in " << format_seconds(a.total_time_s) << "\n";

  const std::string unit = sample_unit_of(a);
  o << validation_text(a);
  o << "\nThroughput\n  " << fixed(a.steps_per_second, 2) << " steps/s, " << rate(a.samples_per_second) << " "
    << unit << "/s over the whole run";
  if (a.steady_examples_per_second.n > 0) {
    o << "\n  steady state: " << rate(a.steady_examples_per_second.median) << " examples/s, "
      << rate(a.steady_samples_per_second.median) << " " << unit << "/s (median)";
  }
  o << "\n";

  if (!a.step_times.empty()) {
    o << "\nStep time (" << a.step_time_source << ")\n  " << pad("", 14) << pad("n", 6, true)
      << pad("median", 11, true) << pad("p90", 11, true) << pad("max", 11, true) << pad("mean", 11, true)
      << "\n";
    o << dist_row("all", a.step_time);
    if (a.warmup_steps > 0) {
      o << dist_row("first " + std::to_string(a.warmup_steps), a.warmup_step_time);
      o << dist_row("steady", a.steady_step_time);
    }
  }

  if (!a.phases.empty()) {
    o << "\nTime per step by phase (" << a.phase_source << ", " << format_seconds(a.phase_step_seconds)
      << " per step)\n";
    for (const auto& p : a.phases) {
      const int bar = static_cast<int>(std::lround(p.share * 40));
      o << "  " << pad(p.label, 17) << pad(format_seconds(p.seconds), 10, true)
        << pad(fixed(100 * p.share, 1) + "%", 8, true) << "  "
        << std::string(static_cast<size_t>(std::max(0, bar)), '#') << "\n";
    }
    if (!a.bottleneck.empty()) {
      const PhaseTime* b = find_phase(a, a.bottleneck);
      o << "  Bottleneck: " << phase_label(a.bottleneck) << " (" << fixed(100 * b->share, 1)
        << "% of step time)\n";
    }
  }

  if (!a.ranks.empty()) {
    o << "\nData parallel: " << a.world_size << " ranks (" << (a.backend.empty() ? "?" : a.backend)
      << (a.wait_policy.empty() ? "" : ", " + a.wait_policy + " waits") << "), training_summary.json\n  "
      << pad("rank", 6) << pad("steps", 8, true) << pad("step time", 12, true) << pad("examples/s", 12, true)
      << pad("comm running", 14, true) << pad("comm waiting", 14, true) << "\n";
    for (const auto& r : a.ranks) {
      o << "  " << pad(std::to_string(r.rank), 6) << pad(std::to_string(r.steps), 8, true)
        << pad(format_seconds(r.step_time), 12, true) << pad(rate(r.examples_per_second), 12, true)
        << pad(fixed(100 * r.comm_busy_share, 1) + "%", 14, true)
        << pad(fixed(100 * r.comm_wait_share, 1) + "%", 14, true) << "\n";
    }
    o << "  straggler skew (slowest / fastest mean step): " << fixed(a.step_time_skew, 2)
      << "; per-rank profiles: timing_profile.rank<R>.json\n";
  }

  if (!a.memory_trends.empty()) {
    o << "\nMemory (memory_profile.json, " << a.memory_steps.size() << " samples";
    if (!a.memory_steps.empty()) o << ", steps " << a.memory_steps.front() << ".." << a.memory_steps.back();
    o << ")\n  " << pad("", 22) << pad("first", 11, true) << pad("last", 11, true)
      << pad("sampled max", 13, true) << pad("slope (last half)", 20, true) << "  leak?\n";
    for (const auto& t : a.memory_trends) {
      o << "  " << pad(t.name, 22) << pad(format_bytes(t.first), 11, true)
        << pad(format_bytes(t.last), 11, true) << pad(format_bytes(t.peak), 13, true)
        << pad(t.enough_samples ? format_bytes(t.slope_per_step) + "/step" : "-", 20, true) << "  "
        << (!t.enough_samples  ? "too few samples"
            : t.leak_suspected ? "LIKELY"
            : t.file_backed    ? "no (file-backed)"
                               : "no")
        << "\n";
    }
    if (!a.memory_peaks.empty()) {
      // The samples miss what is allocated and freed between two of them: the recorded peaks.
      o << "  true peaks:";
      for (size_t i = 0; i < a.memory_peaks.size(); ++i) {
        const auto& p = a.memory_peaks[i];
        o << (i ? "," : "") << " " << p.name << " " << format_bytes(p.bytes) << " (" << p.source << ")";
      }
      o << "\n";
    }
    if (!a.category_series.empty()) {
      // The model's categories first, in the order training creates them, then the rest.
      std::vector<std::string> names;
      for (const char* n :
           {"parameters", "buffers", "gradients", "optimizer_state", "activations_and_temporaries"}) {
        if (a.category_series.count(n) > 0) names.push_back(n);
      }
      for (const auto& [name, values] : a.category_series) {
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      }
      const bool with_peak = a.category_peak_bytes > 0;
      o << "  " << pad("by category", 32) << pad("at the last sample", 20, true);
      if (with_peak) o << pad("at the peak (step " + fixed(a.category_peak_step, 0) + ")", 26, true);
      o << "\n";
      double last_total = 0;
      for (const auto& name : names) {
        const double last = a.category_series.at(name).back();
        last_total += last;
        o << "    " << pad(name, 30) << pad(format_bytes(last), 20, true);
        if (with_peak) {
          auto it = a.category_peak.find(name);
          o << pad(it == a.category_peak.end() ? "-" : format_bytes(it->second), 26, true);
        }
        o << "\n";
      }
      o << "    " << pad("total", 30) << pad(format_bytes(last_total), 20, true);
      if (with_peak) o << pad(format_bytes(a.category_peak_bytes), 26, true);
      o << "\n";
    }
    o << "  peak system RAM use " << fixed(a.peak_cpu_memory_percent, 1) << "%";
    if (a.gpu_reserved_peak_bytes > 0) {
      o << "; GPU allocated peak " << format_bytes(a.gpu_allocated_peak_bytes) << ", reserved peak "
        << format_bytes(a.gpu_reserved_peak_bytes) << ", reserved - allocated up to "
        << format_bytes(a.gpu_fragmentation_bytes);
    }
    o << "\n";
  }

  if (!a.ops.cpu_ops.empty()) {
    o << "\nTop operators by CPU self time (" << a.ops.files.size() << " trace file(s)"
      << (a.world_size > 1 ? " of rank 0" : "") << ", " << a.ops.profiler_steps << " profiled steps)\n  "
      << pad("name", 42) << pad("self", 11, true) << pad("self %", 8, true) << pad("total", 11, true)
      << pad("calls", 8, true) << "\n";
    for (const auto& op : a.ops.cpu_ops) {
      o << "  " << pad(fit_name(op.name, 41), 42) << pad(format_seconds(op.self_us * 1e-6), 11, true)
        << pad(fixed(a.ops.cpu_self_total_us > 0 ? 100 * op.self_us / a.ops.cpu_self_total_us : 0, 1) + "%",
               8, true)
        << pad(format_seconds(op.total_us * 1e-6), 11, true) << pad(std::to_string(op.count), 8, true)
        << "\n";
    }
  }
  if (!a.ops.device_ops.empty()) {
    o << "\nTop GPU kernels / copies by time\n";
    for (const auto& op : a.ops.device_ops) {
      o << "  " << pad(fit_name(op.name, 60), 61) << pad(format_seconds(op.self_us * 1e-6), 11, true)
        << pad(std::to_string(op.count), 8, true) << "\n";
    }
  }

  o << "\nFindings\n";
  if (a.findings.empty()) o << "  none: no bottleneck or memory growth beyond the thresholds\n";
  for (const auto& f : a.findings) {
    o << "  [" << f.severity << "] " << f.message << "\n      -> " << f.advice << "\n";
  }
  for (const auto& w : a.warnings) o << "  [unreadable] " << w << "\n";

  o << "\nFiles\n";
  for (const auto& f : a.files) o << "  " << f << "\n";
  return o.str();
}

Json to_json(const RunAnalysis& a) {
  Json j;
  j["run_dir"] = a.run_dir.string();
  j["name"] = a.name;
  j["identity"] = {{"model", a.model},
                   {"model_family", a.model_family},
                   {"config", a.config},
                   {"run_name", a.run_name},
                   {"device", a.device},
                   {"threads", a.threads},
                   {"batch", a.batch},
                   {"status", a.status},
                   {"total_steps", a.total_steps},
                   {"first_step", a.first_step},
                   {"last_step", a.last_step},
                   {"total_time_s", a.total_time_s},
                   {"settings", a.settings}};
  j["files"] = a.files;
  if (!a.validation.empty()) {
    const ValidationParts v = validation_parts(a);
    j["validation"] = {{"metrics", a.validation}, {"per_session_r2", v.sessions}};
  }
  if (!a.ranks.empty()) {
    Json ranks = Json::array();
    for (const auto& r : a.ranks) {
      ranks.push_back({{"rank", r.rank},
                       {"steps", r.steps},
                       {"step_time", r.step_time},
                       {"examples_per_second", r.examples_per_second},
                       {"comm_busy_share", r.comm_busy_share},
                       {"comm_wait_share", r.comm_wait_share}});
    }
    j["distributed"] = {{"world_size", a.world_size},
                        {"backend", a.backend},
                        {"wait_policy", a.wait_policy},
                        {"step_time_skew", a.step_time_skew},
                        {"per_rank", ranks}};
  }
  j["step_time"] = {{"source", a.step_time_source},
                    {"warmup_steps", a.warmup_steps},
                    {"all", dist_json(a.step_time)},
                    {"warmup", dist_json(a.warmup_step_time)},
                    {"steady", dist_json(a.steady_step_time)}};
  j["throughput"] = {{"steps_per_second", a.steps_per_second},
                     {"samples_per_second", a.samples_per_second},
                     {"sample_unit", a.sample_unit},
                     {"steady_examples_per_second", dist_json(a.steady_examples_per_second)},
                     {"steady_samples_per_second", dist_json(a.steady_samples_per_second)}};
  Json phases = Json::array();
  for (const auto& p : a.phases) {
    phases.push_back({{"key", p.key}, {"label", p.label}, {"seconds", p.seconds}, {"share", p.share}});
  }
  j["phases"] = {{"source", a.phase_source},
                 {"step_seconds", a.phase_step_seconds},
                 {"bottleneck", a.bottleneck},
                 {"items", phases}};
  Json trends = Json::array();
  for (const auto& t : a.memory_trends) {
    trends.push_back({{"name", t.name},
                      {"samples", t.samples},
                      {"first", t.first},
                      {"last", t.last},
                      {"peak", t.peak},
                      {"slope_per_step", t.slope_per_step},
                      {"last_half_growth", t.last_half_growth},
                      {"rising_fraction", t.rising_fraction},
                      {"enough_samples", t.enough_samples},
                      {"leak_suspected", t.leak_suspected},
                      {"file_backed", t.file_backed}});
  }
  Json peaks = Json::array();
  for (const auto& p : a.memory_peaks)
    peaks.push_back({{"name", p.name}, {"source", p.source}, {"bytes", p.bytes}});
  Json categories = Json::object();
  for (const auto& [name, values] : a.category_series) categories[name] = values.back();
  j["memory"] = {{"samples", a.memory_steps.size()},
                 {"trends", trends},
                 {"peaks", peaks},
                 {"categories_last_sample", categories},
                 {"category_peak",
                  {{"step", a.category_peak_step},
                   {"bytes_in_use", a.category_peak_bytes},
                   {"categories", a.category_peak}}},
                 {"peak_cpu_memory_percent", a.peak_cpu_memory_percent},
                 {"gpu",
                  {{"allocated_peak_bytes", a.gpu_allocated_peak_bytes},
                   {"reserved_peak_bytes", a.gpu_reserved_peak_bytes},
                   {"fragmentation_bytes", a.gpu_fragmentation_bytes}}}};
  auto ops_json = [](const std::vector<OpTotal>& ops) {
    Json out = Json::array();
    for (const auto& op : ops) {
      out.push_back(
          {{"name", op.name}, {"count", op.count}, {"self_us", op.self_us}, {"total_us", op.total_us}});
    }
    return out;
  };
  Json files = Json::array();
  for (const auto& f : a.ops.files) files.push_back(f.string());
  j["top_operators"] = {{"files", files},
                        {"profiler_steps", a.ops.profiler_steps},
                        {"cpu_self_total_us", a.ops.cpu_self_total_us},
                        {"cpu", ops_json(a.ops.cpu_ops)},
                        {"device", ops_json(a.ops.device_ops)}};
  Json findings = Json::array();
  for (const auto& f : a.findings) {
    findings.push_back(
        {{"code", f.code}, {"severity", f.severity}, {"message", f.message}, {"advice", f.advice}});
  }
  j["findings"] = findings;
  j["warnings"] = a.warnings;
  return j;
}

std::string format_comparison(const RunAnalysis& a, const RunAnalysis& b) {
  std::ostringstream o;
  o << "profile-report --compare\n  A: " << terminal_safe(a.run_dir.string())
    << "\n  B: " << terminal_safe(b.run_dir.string()) << "\n\n";
  const size_t w = 30, c = std::max<size_t>(22, std::max(a.name.size(), b.name.size()) + 2);
  o << pad("", w) << pad("A", c, true) << pad("B", c, true) << pad("B/A", 9, true) << "\n";
  auto text_row = [&](const std::string& label, const std::string& x, const std::string& y) {
    o << pad(label, w) << pad(x, c, true) << pad(y, c, true) << "\n";
  };
  text_row("run", a.name, b.name);
  text_row("config", a.config, b.config);
  text_row("throughput unit", sample_unit_of(a), sample_unit_of(b));
  text_row("device", a.device, b.device);
  text_row("threads", std::to_string(a.threads), std::to_string(b.threads));
  text_row("batch", std::to_string(a.batch), std::to_string(b.batch));
  text_row("status", a.status, b.status);
  for (const auto& m : metrics()) {
    const auto x = m.get(a), y = m.get(b);
    if (!x && !y) continue;
    const bool comparable =
        x && y && *x != 0 && (m.key != "samples_per_second" || sample_unit_of(a) == sample_unit_of(b));
    o << pad(m.label, w) << pad(x ? m.show(*x) : "-", c, true) << pad(y ? m.show(*y) : "-", c, true)
      << pad(comparable ? fixed(*y / *x, 2) + "x" : "-", 9, true) << "\n";
  }
  text_row("bottleneck", a.bottleneck.empty() ? "-" : phase_label(a.bottleneck),
           b.bottleneck.empty() ? "-" : phase_label(b.bottleneck));
  auto leak = [](const RunAnalysis& r) {
    return std::any_of(r.memory_trends.begin(), r.memory_trends.end(),
                       [](const MemoryTrend& t) { return t.leak_suspected; })
               ? "suspected"
               : "no";
  };
  text_row("memory growth", leak(a), leak(b));
  for (const auto* r : {&a, &b}) {
    o << "\nFindings for " << (r == &a ? "A" : "B") << " (" << r->name << ")\n";
    if (r->findings.empty()) o << "  none\n";
    for (const auto& f : r->findings) o << "  [" << f.severity << "] " << f.message << "\n";
  }
  return o.str();
}

Json comparison_json(const RunAnalysis& a, const RunAnalysis& b) {
  Json ratios = Json::object();
  for (const auto& m : metrics()) {
    const auto x = m.get(a), y = m.get(b);
    if (m.key == "samples_per_second" && sample_unit_of(a) != sample_unit_of(b)) continue;  // other units
    if (x && y && *x != 0) ratios[m.key] = *y / *x;
  }
  return {{"a", to_json(a)}, {"b", to_json(b)}, {"ratios", ratios}};
}

}  // namespace rt::report
