// evaluate: score a training checkpoint on a database, as the run's validation does, without
// training. The model is built from the config stored in the checkpoint (the database's units,
// channels and behaviour dimensions as training saw them), its weights loaded, and the family's
// validation run over a split of `db_path` (the checkpoint's own database by default): the SSM
// decoders report behaviour R² pooled, per output dimension and per session; RAVE its
// validation distance.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "util/enum_names.h"
#include "util/json.h"

namespace rt {

// Which examples are scored: the held-out validation split training used (data.val_fraction,
// data.val_max, data.split_seed), the training split, or every example of the database.
enum class EvalSplit { kVal, kTrain, kAll, kMaxValue = kAll };
constexpr EnumNames<EvalSplit> enum_names(EvalSplit) { return {{"val", "train", "all"}}; }

struct EvaluateOptions {
  std::string checkpoint;  // a checkpoint file, a run directory (best.ckpt, else last.ckpt), a
                           // `latest` pointer, or "last" (<out_path>/latest)
  std::string out_path = "runs";
  std::string db_path;  // "" = the checkpoint's data.db_path
  EvalSplit split = EvalSplit::kVal;
  int64_t batch = 0;     // 0 = the checkpoint's train.batch
  int64_t threads = 0;   // 0 = the checkpoint's train.threads
  int64_t workers = -1;  // -1 = the checkpoint's data.workers
  std::string device;    // "" = the checkpoint's train.device
};

struct EvaluateResult {
  std::filesystem::path checkpoint;
  std::string family, model;  // "ssm", the family's one-line description
  int64_t step = 0;
  std::string db_path;
  EvalSplit split = EvalSplit::kVal;
  int64_t examples = 0;
  double seconds = 0.0;
  std::map<std::string, double> metrics;  // the family's validation metrics ("val/r2", …)
  // SSM: R² per session (database group), from the val/r2_group_<name> metrics, or the pooled
  // R² for a database of one session.
  std::map<std::string, double> per_session_r2;

  std::string text() const;  // what `evaluate` prints
  Json to_json() const;      // what `evaluate --output FILE.json` writes
};

// Throws rt::Error naming the file, the key or the value: no checkpoint there, a database
// whose sessions or shapes differ from the checkpoint's, a split with no example.
EvaluateResult evaluate_checkpoint(const EvaluateOptions& options);

}  // namespace rt
