#include "profiling/report/run_files.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <regex>
#include <sstream>

#include "config/run_keys.h"
#include "tensorboard/tfevents.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/profile_files.h"
#include "util/profile_schema.h"
#include "util/strings.h"

namespace rt::report {
namespace fs = std::filesystem;

namespace {

namespace schema = profile_schema;

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
// text (config/run_keys.h). A file that does not parse is a warning, not an error.
std::map<std::string, std::string> read_settings(const fs::path& path, RunAnalysis& a) {
  StoredSettings stored = read_stored_settings(path);
  if (!stored.error.empty()) {
    a.warnings.push_back(path.filename().string() + " does not parse (" + stored.error +
                         "); its settings are not used");
  }
  return std::move(stored.text);
}

// Keeps the largest recorded peak of `series` (a memory profile holds one per sample, the
// summary one more for RSS).
void raise_peak(RunAnalysis& a, const std::string& series, double bytes, const std::string& source) {
  if (bytes <= 0) return;
  for (auto& p : a.memory_peaks) {
    if (p.name != series) continue;
    if (bytes > p.bytes) p = {series, source, bytes};
    return;
  }
  a.memory_peaks.push_back({series, source, bytes});
}

// A per-step profile: its rotated parts and the file, as one list (util/profile_files.h); a file
// cut short by a killed run is read line by line, with a warning.
Json read_json_list(const fs::path& path, RunAnalysis& a) {
  try {
    return read_profile_entries(path, &a.warnings);
  } catch (const std::exception& e) {
    a.warnings.push_back(std::string(e.what()) + "; ignored");
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
  namespace key = schema::summary;
  a.model = str(s, key::kModel);
  a.model_family = str(s, key::kModelFamily);
  a.config = str(s, key::kConfig);
  a.run_name = str(s, key::kRunName);
  a.device = str(s, key::kDevice);
  a.status = str(s, key::kStatus);
  a.sample_unit = str(s, key::kSampleUnit);
  a.threads = static_cast<int64_t>(num(s, key::kThreads));
  a.batch = static_cast<int64_t>(num(s, key::kBatch));
  a.total_steps = static_cast<int64_t>(num(s, key::kTotalSteps));
  a.first_step = static_cast<int64_t>(num(s, key::kFirstStep));
  a.last_step = static_cast<int64_t>(num(s, key::kLastStep, -1));
  a.total_time_s = num(s, key::kTotalTrainingTimeSeconds);
  a.steps_per_second = num(s, key::kStepsPerSecond);
  a.samples_per_second = num(s, key::kSamplesPerSecond);
  if (auto m = s.find(key::kMetrics); m != s.end() && m->is_object()) {
    for (const auto& [name, value] : m->items()) {
      if (value.is_number()) a.validation[name] = value.get<double>();
    }
  }
  raise_peak(a, "rss", num(s, key::kPeakRssBytes), std::string("VmHWM, ") + key::kPeakRssBytes);
  a.world_size = std::max<int64_t>(1, static_cast<int64_t>(num(s, key::kWorldSize, 1)));
  if (auto d = s.find(key::kDistributed); d != s.end() && d->is_object()) {
    a.backend = str(*d, key::kBackend);
    a.wait_policy = str(*d, key::kWaitPolicy);
    a.step_time_skew = num(*d, key::kStepTimeSkew, 1.0);
    if (auto per = d->find(key::kPerRank); per != d->end() && per->is_array() && per->size() > 1) {
      for (const auto& r : *per) {
        a.ranks.push_back({static_cast<int>(num(r, key::kRank)),
                           static_cast<int64_t>(num(r, key::kRankSteps)), num(r, key::kRankStepTime),
                           num(r, key::kExamplesPerSecond), num(r, key::kCommBusyShare),
                           num(r, key::kCommWaitShare)});
      }
    }
  }

  // Fallback breakdown from the accumulated timers (SSM guide names).
  auto t = s.find(key::kTimers);
  if (t == s.end() || !t->is_object()) return;
  auto total = [&](const char* name) { return t->contains(name) ? num((*t)[name], key::kTotalTime) : 0.0; };
  namespace timer = schema::timer_names;
  const double steps = t->contains(timer::kTrainingStep) ? num((*t)[timer::kTrainingStep], key::kCount) : 0.0;
  const double step_total = total(timer::kTrainingStep);
  if (steps <= 0 || step_total <= 0 || !a.phases.empty()) return;
  const std::vector<std::pair<std::string, const char*>> names = {{"data", timer::kDataBatchProduction},
                                                                  {"forward", timer::kForward},
                                                                  {"loss", timer::kLossFnComputation},
                                                                  {"backward", timer::kBackward},
                                                                  {"optimizer", timer::kOptimizerStep}};
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
  namespace key = schema::timing;
  for (const Json& e : list) {
    if (!e.is_object()) continue;
    const double total = num(e, key::kTotalBatchTime);
    a.steps.push_back(num(e, key::kStep));
    a.step_times.push_back(total);
    a.data_times.push_back(num(e, key::kDataTime));
    examples.push_back(num(e, key::kExamplesPerSecond));
    samples.push_back(num(e, key::kSamplesPerSecond));
    rows.push_back({num(e, key::kDataTime), num(e, key::kForwardTime), num(e, key::kLossTime),
                    num(e, key::kBackwardTime), num(e, key::kOptimizerTime), total});
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
  namespace key = schema::memory;
  for (const Json& e : list) {
    if (!e.is_object()) continue;
    a.memory_steps.push_back(num(e, key::kStep));
    auto put = [&](const std::string& name, double v) {
      auto& s = series[name];
      s.resize(i, v);  // a series that starts late is back-filled with its first value
      s.push_back(v);
    };
    if (e.contains(key::kRssBytes)) put("rss", num(e, key::kRssBytes));
    if (e.contains(key::kRssAnonBytes)) put("rss anon", num(e, key::kRssAnonBytes));
    if (e.contains(key::kRssFileBytes)) put("rss file", num(e, key::kRssFileBytes));
    raise_peak(a, "rss", num(e, key::kPeakRssBytes), std::string("VmHWM, ") + key::kPeakRssBytes);
    auto m = e.find(key::kMemory);
    if (m != e.end() && m->is_object()) {
      for (auto d = m->begin(); d != m->end(); ++d) {
        if (!d->is_object()) continue;
        // Series names: "<device> bytes_in_use", "<device> peak", "<device> reserved".
        if (d->contains(key::kBytesInUse)) put(d.key() + " bytes_in_use", num(*d, key::kBytesInUse));
        if (d->contains(key::kPeakBytesInUse)) put(d.key() + " peak", num(*d, key::kPeakBytesInUse));
        if (d->contains(key::kReservedBytes)) put(d.key() + " reserved", num(*d, key::kReservedBytes));
        raise_peak(a, d.key() + " bytes_in_use", num(*d, key::kPeakBytesInUse),
                   std::string("allocator's ") + key::kPeakBytesInUse);
        raise_peak(a, d.key() + " reserved", num(*d, key::kPeakReservedBytes),
                   std::string("allocator's ") + key::kPeakReservedBytes);
      }
    }
    if (auto c = e.find(key::kCategories); c != e.end() && c->is_object()) {
      for (auto k = c->begin(); k != c->end(); ++k) {
        if (!k->is_number()) continue;
        auto& s = a.category_series[k.key()];
        s.resize(a.memory_steps.size() - 1, 0.0);  // a category that appears late was 0 before
        s.push_back(k->get<double>());
      }
    }
    if (auto p = e.find(key::kIntervalPeak);
        p != e.end() && p->is_object() && num(*p, key::kBytesInUse) > a.category_peak_bytes) {
      a.category_peak_bytes = num(*p, key::kBytesInUse);
      a.category_peak_step = num(e, key::kStep);
      a.category_peak.clear();
      if (auto c = p->find(key::kCategories); c != p->end() && c->is_object()) {
        for (auto k = c->begin(); k != c->end(); ++k) {
          if (k->is_number()) a.category_peak[k.key()] = k->get<double>();
        }
      }
    }
    a.peak_cpu_memory_percent = std::max(a.peak_cpu_memory_percent, num(e, key::kCpuMemoryPercent));
    const double alloc = num(e, key::kGpuMemoryAllocatedGb) * schema::kBytesPerGb,
                 reserved = num(e, key::kGpuMemoryReservedGb) * schema::kBytesPerGb;
    a.gpu_allocated_peak_bytes = std::max(a.gpu_allocated_peak_bytes, alloc);
    a.gpu_reserved_peak_bytes = std::max(a.gpu_reserved_peak_bytes, reserved);
    a.gpu_fragmentation_bytes = std::max(a.gpu_fragmentation_bytes, reserved - alloc);
    ++i;
  }
  for (auto& [name, values] : series) values.resize(i, values.empty() ? 0.0 : values.back());
  for (auto& [name, values] : a.category_series)
    values.resize(a.memory_steps.size(), values.empty() ? 0.0 : values.back());
  a.memory_series = std::move(series);
}
// train/step_time as logged to TensorBoard: a step-time curve (means per log interval) for runs
// without timing_profile.json.
void load_logged_step_times(const fs::path& events, RunAnalysis& a) {
  try {
    std::string damage;  // a run killed mid-write leaves a truncated tail: use what precedes it
    for (const auto& p : read_tfevents(events, &damage)) {
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

std::vector<fs::path> sorted_matches(const fs::path& dir,
                                     const std::function<bool(const std::string&)>& match) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec) && match(e.path().filename().string())) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The distributedInfo rank of an uncompressed trace, read from its head as Holistic Trace
// Analysis does ("rank":\s+(\d+)); -1 when absent.
int trace_rank(const fs::path& path) {
  std::ifstream in(path);
  std::string head(8192, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  std::smatch m;
  if (!std::regex_search(head, m, std::regex("\"rank\":\\s+(\\d+)"))) return -1;
  // A rank too large for any world is no rank (stoi would throw a bare "stoi").
  const auto rank = parse_int64(m[1].str());
  return rank && *rank <= std::numeric_limits<int>::max() ? static_cast<int>(*rank) : -1;
}
}  // namespace

void load_run_files(RunAnalysis& a) {
  std::error_code ec;
  const fs::path summary = a.run_dir / "training_summary.json";
  if (fs::exists(a.run_dir / "config.toml")) a.settings = read_settings(a.run_dir / "config.toml", a);
  // Profiles live in profiling.output_dir when it was set (relative paths: as train saw them).
  fs::path prof_dir = a.run_dir;
  if (auto it = a.settings.find("profiling.output_dir"); it != a.settings.end() && !it->second.empty()) {
    if (fs::is_directory(it->second, ec)) prof_dir = it->second;
  }
  const fs::path timing = prof_dir / "timing_profile.json", memory = prof_dir / "memory_profile.json";
  const bool has_summary = fs::exists(summary), has_timing = fs::exists(timing),
             has_memory = fs::exists(memory);
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
  const auto events =
      sorted_matches(a.run_dir, [](const std::string& n) { return n.rfind("events.out.tfevents.", 0) == 0; });
  const auto stacks =
      sorted_matches(prof_dir, [](const std::string& n) { return ends_with(n, "_stacks.txt"); });

  auto rel = [&](const fs::path& p) { return fs::relative(p, a.run_dir, ec).string(); };
  for (const auto& p : {fs::path(a.run_dir / "config.toml"), summary, timing, memory}) {
    if (fs::exists(p)) a.files.push_back(rel(p));
  }
  for (const auto& group : {traces, stacks, events}) {
    for (const auto& p : group) a.files.push_back(rel(p));
  }

  // A data-parallel run: every rank wrote its traces; the operator table is rank 0's (the
  // ranks run the same step; summing them would double every count).
  if (a.world_size > 1) {
    std::vector<fs::path> rank0;
    for (const auto& p : traces) {
      if (ends_with(p.string(), ".gz") || trace_rank(p) == 0) rank0.push_back(p);
    }
    traces = rank0;
  }
  if (!traces.empty()) {
    try {
      a.ops = read_trace_ops(traces);
    } catch (const std::exception& e) {
      a.warnings.push_back(e.what());
    }
  }

  if (a.step_times.empty() && !events.empty()) load_logged_step_times(events.back(), a);
}

}  // namespace rt::report
