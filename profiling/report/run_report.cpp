#include "profiling/report/run_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <toml++/toml.h>

#include "tensorboard/tfevents.h"
#include "util/error.h"

namespace rt::report {
namespace fs = std::filesystem;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// Thresholds of the findings, in one place.
constexpr double kDataBoundShare = 0.10;     // the loader's goal is < 1%; 10% is clearly data-bound
constexpr double kDominantShare = 0.50;      // one compute phase above half the step
constexpr double kLossHeavyShare = 0.40;
constexpr double kOptimizerHeavyShare = 0.25;
constexpr double kLowExamplesPerSecond = 100;  // RAVE guide: "> 100 samples/second" (its samples = batch elements)
constexpr double kSlowStartRatio = 1.5;
constexpr double kJitterRatio = 1.5;
constexpr double kFragmentationShare = 0.20;
constexpr double kFragmentationMinBytes = 256.0 * kMiB;
constexpr double kHighRamPercent = 90.0;

std::string fmt(double v, int precision = 1) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}
std::string pct(double share) { return fmt(100.0 * share) + "%"; }
std::string ms(double seconds) { return fmt(seconds * 1e3, seconds < 0.01 ? 2 : 1) + " ms"; }
std::string mib(double bytes) { return fmt(bytes / kMiB) + " MiB"; }

double num(const Json& j, const char* key, double fallback = 0.0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}
std::string str(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// The settings of the resolved config.toml the trainer writes that the advice refers to, as
// text ("2", "v2", "runs/x"). A file that does not parse is a warning, not an error.
std::map<std::string, std::string> read_settings(const fs::path& path, RunAnalysis& a) {
  static const std::vector<std::string> wanted = {
      "data.workers",       "data.prefetch",         "data.slowdown_ms",      "train.batch",
      "train.max_steps",    "train.log_every",       "profiling.memory_every", "profiling.output_dir",
      "profiling.timing_every", "model.version",     "data.n_signal"};
  std::map<std::string, std::string> out;
  toml::table config;
  try {
    config = toml::parse_file(path.string());
  } catch (const toml::parse_error& e) {
    a.warnings.push_back(path.filename().string() + " does not parse (" + std::string(e.description()) +
                         "); its settings are not used");
    return out;
  }
  for (const auto& key : wanted) {
    const toml::node* node = config.at_path(key).node();
    if (node == nullptr) continue;
    if (const auto* s = node->as_string()) {
      out[key] = s->get();
    } else {
      std::ostringstream text;
      node->visit([&](const auto& v) {
        if constexpr (toml::is_value<decltype(v)>) text << v.get();
      });
      out[key] = text.str();
    }
  }
  return out;
}

Json read_json_list(const fs::path& path, RunAnalysis& a) {
  try {
    Json j = read_json(path);
    if (j.is_array()) return j;
    a.warnings.push_back(path.filename().string() + " is not a JSON list; ignored");
  } catch (const std::exception& e) {
    a.warnings.push_back(e.what());
  }
  return Json::array();
}

void load_summary(const fs::path& path, RunAnalysis& a) {
  Json s;
  try {
    s = read_json(path);
  } catch (const std::exception& e) {
    a.warnings.push_back(e.what());
    return;
  }
  a.model = str(s, "model");
  a.model_family = str(s, "model_family");
  a.config = str(s, "config");
  a.device = str(s, "device");
  a.status = str(s, "status");
  a.sample_unit = str(s, "sample_unit");
  a.threads = static_cast<int64_t>(num(s, "threads"));
  a.batch = static_cast<int64_t>(num(s, "batch"));
  a.total_steps = static_cast<int64_t>(num(s, "total_steps"));
  a.first_step = static_cast<int64_t>(num(s, "first_step"));
  a.last_step = static_cast<int64_t>(num(s, "last_step", -1));
  a.total_time_s = num(s, "total_training_time_seconds");
  a.steps_per_second = num(s, "steps_per_second");
  a.samples_per_second = num(s, "samples_per_second");

  // Fallback breakdown from the accumulated timers (SSM guide names).
  auto t = s.find("timers");
  if (t == s.end() || !t->is_object()) return;
  auto total = [&](const char* name) { return t->contains(name) ? num((*t)[name], "total_time") : 0.0; };
  const double steps = t->contains("training_step") ? num((*t)["training_step"], "count") : 0.0;
  const double step_total = total("training_step");
  if (steps <= 0 || step_total <= 0 || !a.phases.empty()) return;
  const std::vector<std::pair<std::string, const char*>> names = {{"data", "data_batch_production"},
                                                                  {"forward", "forward"},
                                                                  {"loss", "loss_fn_computation"},
                                                                  {"backward", "backward"},
                                                                  {"optimizer", "optimizer_step"}};
  double covered = 0;
  for (const auto& [key, timer] : names) {
    const double sec = total(timer) / steps;
    covered += sec;
    a.phases.push_back({key, phase_label(key), sec, 0});
  }
  a.phase_step_seconds = step_total / steps;
  a.phases.push_back({"other", phase_label("other"), std::max(0.0, a.phase_step_seconds - covered), 0});
  a.phase_source = "training_summary.json timers";
}

void load_timing(const fs::path& path, RunAnalysis& a) {
  const Json list = read_json_list(path, a);
  std::vector<double> examples, samples;
  struct Row {
    double data, forward, loss, backward, optimizer, total;
  };
  std::vector<Row> rows;
  for (const Json& e : list) {
    if (!e.is_object()) continue;
    const double total = num(e, "total_batch_time");
    a.steps.push_back(num(e, "step"));
    a.step_times.push_back(total);
    a.data_times.push_back(num(e, "data_time"));
    examples.push_back(num(e, "examples_per_second"));
    samples.push_back(num(e, "samples_per_second"));
    rows.push_back({num(e, "data_time"), num(e, "forward_time"), num(e, "loss_time"), num(e, "backward_time"),
                    num(e, "optimizer_time"), total});
  }
  if (rows.empty()) return;
  a.step_time_source = "timing_profile.json";
  const auto n = static_cast<int64_t>(rows.size());
  a.warmup_steps = warmup_count(n);
  const auto w = static_cast<std::ptrdiff_t>(a.warmup_steps);
  a.step_time = describe(a.step_times);
  a.warmup_step_time = describe({a.step_times.begin(), a.step_times.begin() + w});
  a.steady_step_time = describe({a.step_times.begin() + w, a.step_times.end()});
  a.steady_examples_per_second = describe({examples.begin() + w, examples.end()});
  a.steady_samples_per_second = describe({samples.begin() + w, samples.end()});

  Row mean{};
  for (auto it = rows.begin() + w; it != rows.end(); ++it) {
    mean.data += it->data, mean.forward += it->forward, mean.loss += it->loss;
    mean.backward += it->backward, mean.optimizer += it->optimizer, mean.total += it->total;
  }
  const double k = static_cast<double>(n - w);
  a.phases = {{"data", phase_label("data"), mean.data / k, 0},
              {"forward", phase_label("forward"), mean.forward / k, 0},
              {"loss", phase_label("loss"), mean.loss / k, 0},
              {"backward", phase_label("backward"), mean.backward / k, 0},
              {"optimizer", phase_label("optimizer"), mean.optimizer / k, 0}};
  const double covered = (mean.data + mean.forward + mean.loss + mean.backward + mean.optimizer) / k;
  a.phase_step_seconds = mean.total / k;
  a.phases.push_back({"other", phase_label("other"), std::max(0.0, a.phase_step_seconds - covered), 0});
  a.phase_source = a.warmup_steps > 0 ? "timing_profile.json (steady state)" : "timing_profile.json";
}

void load_memory(const fs::path& path, RunAnalysis& a) {
  const Json list = read_json_list(path, a);
  std::map<std::string, std::vector<double>> series;
  size_t i = 0;
  for (const Json& e : list) {
    if (!e.is_object()) continue;
    a.memory_steps.push_back(num(e, "step"));
    auto put = [&](const std::string& name, double v) {
      auto& s = series[name];
      s.resize(i, v);  // a series that starts late is back-filled with its first value
      s.push_back(v);
    };
    if (e.contains("rss_bytes")) put("rss", num(e, "rss_bytes"));
    if (e.contains("rss_anon_bytes")) put("rss anon", num(e, "rss_anon_bytes"));
    if (e.contains("rss_file_bytes")) put("rss file", num(e, "rss_file_bytes"));
    auto m = e.find("memory");
    if (m != e.end() && m->is_object()) {
      for (auto d = m->begin(); d != m->end(); ++d) {
        if (!d->is_object()) continue;
        if (d->contains("bytes_in_use")) put(d.key() + " bytes_in_use", num(*d, "bytes_in_use"));
        if (d->contains("peak_bytes_in_use")) put(d.key() + " peak", num(*d, "peak_bytes_in_use"));
        if (d->contains("reserved_bytes")) put(d.key() + " reserved", num(*d, "reserved_bytes"));
      }
    }
    a.peak_cpu_memory_percent = std::max(a.peak_cpu_memory_percent, num(e, "cpu_memory_percent"));
    const double alloc = num(e, "gpu_memory_allocated_gb") * kGiB, reserved = num(e, "gpu_memory_reserved_gb") * kGiB;
    a.gpu_allocated_peak_bytes = std::max(a.gpu_allocated_peak_bytes, alloc);
    a.gpu_reserved_peak_bytes = std::max(a.gpu_reserved_peak_bytes, reserved);
    a.gpu_fragmentation_bytes = std::max(a.gpu_fragmentation_bytes, reserved - alloc);
    ++i;
  }
  for (auto& [name, values] : series) values.resize(i, values.empty() ? 0.0 : values.back());
  a.memory_series = std::move(series);
}

std::vector<fs::path> sorted_matches(const fs::path& dir, const std::function<bool(const std::string&)>& match) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec) && match(e.path().filename().string())) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string phase_label(const std::string& key) {
  static const std::map<std::string, std::string> labels = {{"data", "data loading"},   {"forward", "forward"},
                                                            {"loss", "loss"},           {"backward", "backward"},
                                                            {"optimizer", "optimizer step"},
                                                            {"other", "other (untimed)"}};
  auto it = labels.find(key);
  return it == labels.end() ? key : it->second;
}

RunAnalysis analyse_run(const fs::path& run_dir_in, const ReportOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(run_dir_in, ec)) {
    throw Error("profile-report: " + run_dir_in.string() + " is not a directory (expected a run directory such as "
                "runs/<name>_<date>_<hex> or runs/latest)");
  }
  RunAnalysis a;
  a.run_dir = fs::canonical(run_dir_in, ec);
  if (ec) a.run_dir = run_dir_in;
  a.name = a.run_dir.filename().string();

  const fs::path summary = a.run_dir / "training_summary.json";
  if (fs::exists(a.run_dir / "config.toml")) a.settings = read_settings(a.run_dir / "config.toml", a);
  // Profiles live in profiling.output_dir when it was set (relative paths: as train saw them).
  fs::path prof_dir = a.run_dir;
  if (auto it = a.settings.find("profiling.output_dir"); it != a.settings.end() && !it->second.empty()) {
    if (fs::is_directory(it->second, ec)) prof_dir = it->second;
  }
  const fs::path timing = prof_dir / "timing_profile.json", memory = prof_dir / "memory_profile.json";
  const bool has_summary = fs::exists(summary), has_timing = fs::exists(timing), has_memory = fs::exists(memory);
  if (!has_summary && !has_timing && !has_memory) {
    throw Error("profile-report: " + a.run_dir.string() +
                " holds none of training_summary.json, timing_profile.json, memory_profile.json (is it a run "
                "directory written by train?)");
  }

  if (has_timing) load_timing(timing, a);
  if (has_summary) load_summary(summary, a);
  if (has_memory) load_memory(memory, a);

  std::vector<fs::path> traces = sorted_matches(prof_dir / "profiler_traces", [](const std::string& n) {
    return ends_with(n, ".pt.trace.json") || ends_with(n, ".pt.trace.json.gz");
  });
  if (traces.empty()) {
    traces = sorted_matches(prof_dir, [](const std::string& n) {
      return n.rfind("profile_step_", 0) == 0 && (ends_with(n, ".json") || ends_with(n, ".json.gz"));
    });
  }
  const auto events = sorted_matches(a.run_dir, [](const std::string& n) { return n.rfind("events.out.tfevents.", 0) == 0; });
  const auto stacks = sorted_matches(prof_dir, [](const std::string& n) { return ends_with(n, "_stacks.txt"); });

  auto rel = [&](const fs::path& p) { return fs::relative(p, a.run_dir, ec).string(); };
  for (const auto& p : {fs::path(a.run_dir / "config.toml"), summary, timing, memory}) {
    if (fs::exists(p)) a.files.push_back(rel(p));
  }
  for (const auto& group : {traces, stacks, events}) {
    for (const auto& p : group) a.files.push_back(rel(p));
  }

  if (!traces.empty()) {
    try {
      a.ops = read_trace_ops(traces);
    } catch (const std::exception& e) {
      a.warnings.push_back(e.what());
    }
  }

  // Without timing_profile.json, the logged step time (means over log_every steps) still gives
  // a step-time curve.
  if (a.step_times.empty() && !events.empty()) {
    try {
      std::string damage;  // a run killed mid-write leaves a truncated tail: use what precedes it
      for (const auto& p : read_tfevents(events.back(), &damage)) {
        if (p.kind == TbRecord::Kind::Scalar && p.tag == "train/step_time") {
          a.steps.push_back(static_cast<double>(p.step));
          a.step_times.push_back(p.value);
        }
      }
      if (!a.step_times.empty()) {
        a.step_time_source = "tfevents train/step_time, means per log interval";
        a.step_time = describe(a.step_times);
        a.steady_step_time = a.step_time;
      }
    } catch (const std::exception& e) {
      a.warnings.push_back(e.what());
    }
  }

  for (const auto& [name, values] : a.memory_series) {
    // A peak series only rises by construction: plotted, not tested for growth.
    if (ends_with(name, " peak")) continue;
    // RSS also holds malloc's free lists and library caches, which move in steps of several MiB
    // (a 300-step tiny_rave run: +8% when phase 2 brings the discriminator in): it must rise
    // by 10% of its level to count, the exact allocator series by the configured share.
    LeakOptions leak = options.leak;
    if (name.rfind("rss", 0) == 0) leak.min_relative_growth = std::max(leak.min_relative_growth, 0.10);
    MemoryTrend t = analyse_memory_trend(name, a.memory_steps, values, leak);
    // With RSS split (newer profiles), total RSS is judged through its anonymous part: file-backed
    // pages (a memory-mapped LMDB dataset read in random order) grow without any leak.
    if (name == "rss file" || (name == "rss" && a.memory_series.count("rss anon") > 0)) {
      t.file_backed = name == "rss file";
      t.grew = t.leak_suspected;
      t.leak_suspected = false;
    }
    a.memory_trends.push_back(t);
  }
  for (auto& p : a.phases) p.share = a.phase_step_seconds > 0 ? p.seconds / a.phase_step_seconds : 0.0;
  if (!a.phases.empty() && a.phase_step_seconds > 0) {
    a.bottleneck = std::max_element(a.phases.begin(), a.phases.end(), [](const PhaseTime& x, const PhaseTime& y) {
                     return x.share < y.share;
                   })->key;
  }
  if (static_cast<int>(a.ops.cpu_ops.size()) > options.top_ops) a.ops.cpu_ops.resize(static_cast<size_t>(options.top_ops));
  if (static_cast<int>(a.ops.device_ops.size()) > options.top_ops) {
    a.ops.device_ops.resize(static_cast<size_t>(options.top_ops));
  }
  add_findings(a);
  return a;
}

void add_findings(RunAnalysis& a) {
  auto add = [&](const char* code, const char* severity, std::string message, std::string advice) {
    a.findings.push_back({code, severity, std::move(message), std::move(advice)});
  };
  auto setting = [&](const std::string& key, const std::string& fallback) {
    auto it = a.settings.find(key);
    return it == a.settings.end() ? fallback : it->second;
  };
  auto phase = [&](const std::string& key) -> const PhaseTime* {
    for (const auto& p : a.phases) {
      if (p.key == key) return &p;
    }
    return nullptr;
  };

  if (!a.status.empty() && a.status != "completed") {
    add("status", "warning", "the run did not complete (status: " + a.status + "); figures cover the steps it made",
        "check the end of train's output for the reason");
  }
  if (a.step_time_source != "timing_profile.json") {
    add("missing_profile", "info", "no timing_profile.json: no per-step phase times",
        "rerun with --enable_timing_profiling (RAVE guide: start with basic profiling)");
  }

  double slowdown_ms = 0;
  try {
    slowdown_ms = std::stod(setting("data.slowdown_ms", "0"));
  } catch (const std::exception&) {
  }
  if (const PhaseTime* d = phase("data"); d && (d->share >= kDataBoundShare || a.bottleneck == "data")) {
    const bool gpu = a.device.rfind("cuda", 0) == 0;
    add("data_bound", "warning",
        "data-bound: data loading takes " + pct(d->share) + " of the step (" + ms(d->seconds) + " of " +
            ms(a.phase_step_seconds) + ")",
        "raise data.workers (--workers, now " + setting("data.workers", "?") + ") and data.prefetch (now " +
            setting("data.prefetch", "?") + "); preprocess offline" +
            (slowdown_ms > 0 ? "; data.slowdown_ms adds an artificial " + fmt(slowdown_ms, 0) + " ms per example"
                             : std::string()) +
            (gpu ? "; keep pinned memory for host-to-device copies" : "") + " (SSM guide: high data_batch_production)");
  }
  if (a.bottleneck == "backward" && phase("backward")->share >= kDominantShare) {
    add("backward_dominated", "info", "backward dominates: " + pct(phase("backward")->share) + " of the step",
        "run --enable_profiling to see which *Backward operators cost most; reduce model size (capacity) or, on "
        "GPU, use mixed precision");
  }
  if (a.bottleneck == "forward" && phase("forward")->share >= kDominantShare) {
    add("forward_dominated", "info", "forward dominates: " + pct(phase("forward")->share) + " of the step",
        "look for expensive operators with --enable_profiling (RAVE guide: long batch times); on GPU, mixed precision");
  }
  if (const PhaseTime* l = phase("loss"); l && l->share >= kLossHeavyShare) {
    add("loss_dominated", "info", "loss computation takes " + pct(l->share) + " of the step",
        "SSM guide (high loss_fn_computation): reduce model/loss complexity (e.g. fewer STFT scales), mixed precision");
  }
  if (const PhaseTime* o = phase("optimizer"); o && o->share >= kOptimizerHeavyShare) {
    add("optimizer_heavy", "info", "the optimizer step takes " + pct(o->share) + " of the step",
        "many small parameter tensors make per-tensor updates dominate; a larger batch amortises them");
  }
  if (a.steady_examples_per_second.n > 0 && a.steady_examples_per_second.median < kLowExamplesPerSecond) {
    add("low_throughput", "info",
        "throughput " + fmt(a.steady_examples_per_second.median) + " examples/s (median, steady state) is below the "
        "RAVE guide's 100/s target",
        "check for CPU bottlenecks (threads: " + std::to_string(a.threads) + ") and data loading; increase the batch "
        "size if memory allows (JAX guide: compare batch sizes)");
  }
  if (a.warmup_step_time.n > 0 && a.steady_step_time.median > 0 &&
      a.warmup_step_time.median > kSlowStartRatio * a.steady_step_time.median) {
    add("slow_start", "info",
        (a.warmup_steps == 1 ? std::string("the first step is slower: ")
                             : "the first " + std::to_string(a.warmup_steps) + " steps are slower: median ") +
            ms(a.warmup_step_time.median) +
            " vs " + ms(a.steady_step_time.median) + " after",
        "warm-up (allocator, caches); skip it when tracing (--profiling.skip_first N / profiling.wait), as the "
        "guides advise");
  }
  if (a.steady_step_time.n >= 10 && a.steady_step_time.median > 0 &&
      a.steady_step_time.p90 > kJitterRatio * a.steady_step_time.median) {
    add("jitter", "info",
        "step time varies: p90 " + ms(a.steady_step_time.p90) + " vs median " + ms(a.steady_step_time.median),
        "other processes on the machine, or periodic work (validation, checkpoints) falling inside steps");
  }
  if (a.gpu_reserved_peak_bytes > 0 && a.gpu_fragmentation_bytes > kFragmentationMinBytes &&
      a.gpu_fragmentation_bytes > kFragmentationShare * a.gpu_reserved_peak_bytes) {
    add("fragmentation", "warning",
        "GPU memory fragmentation: reserved - allocated reaches " + fmt(a.gpu_fragmentation_bytes / kGiB, 2) + " GiB",
        "RAVE guide: a large reserved-allocated gap is fragmentation; reduce the batch size or use gradient "
        "checkpointing; PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 limits block splitting");
  }
  if (a.peak_cpu_memory_percent > kHighRamPercent) {
    add("high_ram", "warning", "system RAM use reached " + fmt(a.peak_cpu_memory_percent) + "%",
        "reduce the batch size, data.prefetch or data.workers (RAVE guide: optimise data loading if CPU memory is high)");
  }
  for (const auto& t : a.memory_trends) {
    if (t.file_backed && t.grew) {
      add("file_backed_growth", "info",
          "file-backed memory grew " + mib(t.last_half_growth) + " over the last half of the run (" +
              fmt(t.slope_per_step / 1024.0) + " KiB/step): pages of memory-mapped files (the LMDB dataset) "
              "counted in RSS as records are first read; bounded by the files' size, not a leak",
          "nothing to fix; watch `rss anon` (heap) for leaks");
    }
    if (!t.leak_suspected) continue;
    add("memory_growth", "warning",
        "memory keeps growing: " + t.name + " +" + mib(t.last_half_growth) + " over the last half of the run (" +
            fmt(t.slope_per_step / 1024.0) + " KiB/step)",
        "JAX guide (memory leaks): look for state accumulated across steps (tensors kept in lists, graphs kept "
        "alive by stored losses); trace with --enable_profiling --profiling.profile_memory true");
  }
  if (!a.ops.cpu_ops.empty() && a.ops.cpu_self_total_us > 0) {
    const OpTotal& top = a.ops.cpu_ops.front();
    add("top_operator", "info",
        "top operator: " + top.name + " with " + pct(top.self_us / a.ops.cpu_self_total_us) + " of CPU self time",
        "open the trace in Perfetto / chrome://tracing to see where it is called");
  }
}

}  // namespace rt::report
