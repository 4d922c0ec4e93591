#include "trainer/resume.h"

#include <iostream>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/config_history.h"
#include "distributed/parameter_broadcast.h"
#include "trainer/job_start.h"
#include "trainer/job_summary.h"
#include "training/model_family.h"
#include "util/error.h"
#include "util/profile_schema.h"

namespace rt {
namespace S = profile_schema::summary;
namespace {

constexpr const char* kRngKey = "trainer_cpu_rng_state";
constexpr const char* kStreamKey = "trainer_stream_position";

}  // namespace

torch::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cpu_rng_state(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

Resumed load_resume_checkpoint(const std::filesystem::path& checkpoint, const CheckpointMeta& expected,
                               ModelFamily& family, const std::string& fix) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (auto& [name, module] : family.modules()) {
    for (const auto& p : module->named_parameters(true))
      tensors.emplace_back(name + "." + p.key(), p.value());
    for (const auto& b : module->named_buffers(true)) tensors.emplace_back(name + "." + b.key(), b.value());
  }
  std::vector<std::vector<int64_t>> before;
  for (const auto& t : tensors) before.push_back(t.second.sizes().vec());
  Resumed r;
  const CheckpointMeta m = load_checkpoint(checkpoint, expected, [&](torch::serialize::InputArchive& a) {
    family.load(a);
    std::string mismatches;
    int count = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].second.sizes().vec() == before[i]) continue;
      if (++count <= 4) {
        mismatches += "\n  " + tensors[i].first + ": " + shape_text(tensors[i].second.sizes().vec()) +
                      " in the checkpoint, " + shape_text(before[i]) + " in this model";
      }
    }
    if (count > 0) {
      throw Error("checkpoint '" + checkpoint.string() +
                  "' does not fit the model built from this config and " + "database (" + family.describe() +
                  "): " + std::to_string(count) + " tensor(s) differ in shape" + mismatches +
                  (count > 4 ? "\n  …" : "") + "\n" + fix);
    }
    torch::Tensor rng, stream;
    if (a.try_read(kRngKey, rng)) set_cpu_rng_state(rng);
    if (a.try_read(kStreamKey, stream)) {
      r.state.stream =
          StreamPosition{static_cast<uint64_t>(stream[0].item<int64_t>()), stream[1].item<int64_t>()};
    }
  });
  r.state.step = m.step;
  r.state.best = m.best;
  r.state.has_best = m.has_best;
  r.config_toml = m.config_toml;
  return r;
}

void save_training_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta,
                              ModelFamily& family, const TrainingState& state) {
  CheckpointMeta m = meta;
  m.step = state.step;
  m.best = state.best;
  m.has_best = state.has_best;
  const torch::Tensor rng = cpu_rng_state();
  save_checkpoint(path, m, [&](torch::serialize::OutputArchive& a) {
    family.save(a);
    a.write(kRngKey, rng, /*is_buffer=*/true);
    if (state.stream) {
      a.write(kStreamKey,
              torch::tensor({static_cast<int64_t>(state.stream->epoch), state.stream->example}, torch::kLong),
              /*is_buffer=*/true);
    }
  });
}

OpenedRun open_run(const Config& config, const JobStart& job, ModelFamily& family, const CheckpointMeta& meta,
                   JobSummary& summary) {
  OpenedRun opened;
  std::filesystem::path checkpoint;
  if (job.writer) checkpoint = resolve_checkpoint(job.keys.ckpt, job.keys.out_path);
  if (job.distributed) checkpoint = dist::broadcast_text(*job.comm, checkpoint.string());
  if (!checkpoint.empty()) {
    Resumed r = load_resume_checkpoint(checkpoint, meta, family);
    opened.state = r.state;
    const ConfigChangeReport changes = report_config_changes(r.config_toml, config);
    job.console() << changes.text << std::flush;
    if (!changes.text.empty()) summary.summary().set_info(S::kConfigChanges, changes.recorded);
  }
  RunDir& run = opened.run;
  if (job.writer) run = prepare_run_dir(config, checkpoint, checkpoint.empty() ? -1 : opened.state.step);
  if (!run.previous_config.empty()) {
    job.console() << "the run's earlier config.toml is kept as "
                  << terminal_safe(run.previous_config.string()) << std::endl;
    summary.summary().set_info(S::kPreviousConfig, run.previous_config.filename().string());
  }
  if (job.distributed) run.path = dist::broadcast_text(*job.comm, run.path.string());
  run.checkpoint = checkpoint;
  if (job.writer) summary.set_file(run.path / "training_summary.json");
  job.console() << "run directory: " << terminal_safe(run.path.string()) << std::endl;
  if (!checkpoint.empty()) {
    job.console() << "resumed from " << terminal_safe(checkpoint.string()) << " at step " << opened.state.step
                  << std::endl;
  }
  for (auto& [name, module] : family.modules()) dist::broadcast_parameters(*job.comm, *module);
  return opened;
}

ConfigChangeReport report_config_changes(const std::string& checkpoint_toml, const Config& now) {
  ConfigChangeReport report;
  const std::vector<ConfigChange> changes = config_changes(checkpoint_toml, now.to_toml());
  if (changes.empty()) return report;
  std::ostringstream text;
  text << "resuming with " << count_text(static_cast<int64_t>(changes.size()), "changed setting")
       << " (the checkpoint's → now):\n";
  for (const auto& c : changes) {
    text << config_change_text(c);
    if (!c.after.empty()) text << "  (" << now.origin(c.key) << ")";
    text << "\n";
    report.recorded.push_back({{"key", c.key}, {"before", c.before}, {"after", c.after}});
  }
  report.text = text.str();
  return report;
}

}  // namespace rt
