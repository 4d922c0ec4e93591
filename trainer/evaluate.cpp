#include "trainer/evaluate.h"

#include <chrono>
#include <iomanip>
#include <map>
#include <sstream>

#include "config/config.h"
#include "config/config_history.h"
#include "data/loader.h"
#include "distributed/launch_env.h"
#include "trainer/job_start.h"
#include "trainer/resume.h"
#include "trainer/run_dir.h"
#include "training/checkpoint.h"
#include "training/model_family.h"
#include "util/error.h"
#include "util/printable.h"
#include "util/profile_schema.h"

namespace rt {
namespace {

namespace fs = std::filesystem;

const std::string kGroupR2Prefix = profile_schema::summary::kSessionR2Prefix;

fs::path evaluated_checkpoint(const EvaluateOptions& o) {
  if (o.checkpoint.empty())
    throw Error("--ckpt: give the checkpoint to evaluate (a file, a run directory or last)");
  if (o.checkpoint == "last") return resolve_checkpoint("last", o.out_path);
  return resolve_run_or_checkpoint(o.checkpoint, "--ckpt");
}

// The checkpoint's own config, with what evaluate's flags change. Only the keys the run set
// away from the family's defaults (config_changes) are set, so that keys a family derives from
// the data when unset (an SSM's input_dim and output_dim) are derived again from the database
// evaluated on. train.ckpt names the checkpoint itself: the family builds the model as a
// resumed run does (no transfer from train.init_from, whose source may be gone).
Config evaluation_config(const CheckpointMeta& meta, const fs::path& checkpoint, const EvaluateOptions& o) {
  Config stored;
  stored.merge_toml_string(meta.config_toml, checkpoint.string());
  Config defaults;
  defaults.set("model.family", run_keys(stored).family, "evaluate");
  defaults.finalize();
  // section → its `key = value` lines (Config::to_toml's layout); the family first decides
  // which keys exist.
  std::map<std::string, std::string> sections{{"model", "family = " + stored.text("model.family") + "\n"}};
  for (const ConfigChange& change : config_changes(defaults.to_toml(), meta.config_toml)) {
    if (change.after.empty()) continue;  // a key the checkpoint's config predates
    const size_t dot = change.key.find('.');
    sections[change.key.substr(0, dot)] += change.key.substr(dot + 1) + " = " + change.after + "\n";
  }
  std::string toml;
  for (const auto& [section, lines] : sections) toml += "[" + section + "]\n" + lines;
  Config c;
  c.merge_toml_string(toml, checkpoint.string());
  c.set("train.ckpt", checkpoint.string(), "--ckpt");
  if (!o.db_path.empty()) c.set("data.db_path", o.db_path, "--db_path");
  if (o.batch > 0) c.set("train.batch", std::to_string(o.batch), "--batch");
  if (o.threads > 0) c.set("train.threads", std::to_string(o.threads), "--threads");
  if (o.workers >= 0) c.set("data.workers", std::to_string(o.workers), "--workers");
  if (!o.device.empty()) c.set("train.device", o.device, "--device");
  c.finalize();
  return c;
}

std::vector<size_t> split_examples(const TrainData& data, EvalSplit split) {
  switch (split) {
    case EvalSplit::kVal:
      return data.val_indices;
    case EvalSplit::kTrain:
      return data.train_indices;
    case EvalSplit::kAll: {
      std::vector<size_t> all(data.val->size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = i;
      return all;
    }
  }
  return {};
}

}  // namespace

EvaluateResult evaluate_checkpoint(const EvaluateOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  EvaluateResult r;
  r.checkpoint = evaluated_checkpoint(o);
  const CheckpointMeta meta = read_checkpoint_meta(r.checkpoint);
  const Config config = evaluation_config(meta, r.checkpoint, o);
  r.family = meta.family;
  r.step = meta.step;
  r.split = o.split;

  const JobStart job = start_job(config, dist::LaunchEnv{});
  r.db_path = job.keys.db_path;
  TrainData data;
  std::unique_ptr<ModelFamily> family = build_family(config, job, &data);
  r.model = family->describe();
  const CheckpointMeta expected{meta.family, config.architecture_signature(), config.to_toml()};
  load_resume_checkpoint(r.checkpoint, expected, *family,
                         "evaluate on a database with the units, channels and behaviour the checkpoint was "
                         "trained on (a new session takes a transfer: train --init_from)");

  data.val_indices = split_examples(data, o.split);
  if (data.val_indices.empty()) {
    throw Error("--split " + std::string(enum_name(o.split)) + ": database '" + r.db_path +
                "' has no example in it (data.val_fraction = " + config.text("data.val_fraction") + ")");
  }
  if (data.sampler_over) data.val_sampler = data.sampler_over(data.val_indices);
  r.examples = static_cast<int64_t>(data.val_indices.size());
  auto loader = make_job_loader(data, job, /*train=*/false, TrainingState{}, nullptr);
  r.metrics = family->validate(*loader, meta.step).metrics;
  for (const auto& [name, value] : r.metrics) {
    if (name.rfind(kGroupR2Prefix, 0) == 0) r.per_session_r2[name.substr(kGroupR2Prefix.size())] = value;
  }
  if (r.per_session_r2.empty() && r.metrics.count("val/r2") > 0 && data.group_names.size() == 1) {
    r.per_session_r2[data.group_names.front()] = r.metrics.at("val/r2");
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string EvaluateResult::text() const {
  std::ostringstream s;
  s << "evaluate: " << printable(checkpoint.string()) << " (" << family << ", step " << step << ")\n"
    << "  model     " << model << "\n"
    << "  database  " << printable(db_path) << ", split " << enum_name(split) << ": " << examples
    << " example(s), " << std::fixed << std::setprecision(1) << seconds << " s\n";
  s << std::defaultfloat << std::setprecision(5);
  for (const auto& [name, value] : metrics) {
    if (name.rfind(kGroupR2Prefix, 0) == 0) continue;
    s << "  " << printable(name) << " = " << value << "\n";
  }
  if (!per_session_r2.empty()) {
    size_t width = 7;
    for (const auto& [name, value] : per_session_r2) width = std::max(width, printable(name).size());
    s << "  R² per session:\n";
    for (const auto& [name, value] : per_session_r2) {
      const std::string shown = printable(name);
      s << "    " << shown << std::string(width - shown.size() + 2, ' ') << value << "\n";
    }
  }
  return s.str();
}

Json EvaluateResult::to_json() const {
  Json m = Json::object(), sessions = Json::object();
  for (const auto& [name, value] : metrics) m[name] = value;
  for (const auto& [name, value] : per_session_r2) sessions[name] = value;
  return Json{{"checkpoint", checkpoint.string()},
              {"model_family", family},
              {"model", model},
              {"step", step},
              {"db_path", db_path},
              {"split", enum_name(split)},
              {"examples", examples},
              {"seconds", seconds},
              {"metrics", m},
              {"per_session_r2", sessions}};
}

}  // namespace rt
