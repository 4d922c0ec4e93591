// Checkpoints: one torch archive per file, written atomically (temp file + fsync + rename),
// so that a crash or a NaN never leaves a torn last.ckpt behind.
//
// Layout inside the archive:
//   meta/format      "rave-ssm-trainer checkpoint v1"
//   meta/family      model.family          meta/signature  the model's shape signature
//   meta/step        int (next step to run) meta/config     the resolved config (TOML text)
//   meta/best        best monitored value so far
//   model/...        what ModelFamily::save wrote (modules, optimizers, schedulers, state)
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace rt {

struct CheckpointMeta {
  std::string family;
  std::string signature;  // Shape-defining config keys; a mismatch means "another config".
  std::string config_toml;
  int64_t step = 0;
  double best = 0.0;
  bool has_best = false;
};

// Writes `path` atomically. `write_model` fills the "model" sub-archive.
void save_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta,
                     const std::function<void(torch::serialize::OutputArchive&)>& write_model);

// Both readers first check every zip entry's CRC-32 (zip_integrity.h) and throw rt::Error
// naming the file and the damaged entry.

// Reads the meta block only (cheap relative to applying the model state).
CheckpointMeta read_checkpoint_meta(const std::filesystem::path& path);

// The training step when `module` (a file torch::jit::load read: a checkpoint is torch's archive
// of a module whose attributes hold the meta block) is a checkpoint of this trainer, else
// nullopt. For the tools that read exported files: they tell a checkpoint from an export by the
// module they load anyway, without reading the file a second time.
std::optional<int64_t> checkpoint_step(const torch::jit::Module& module);

// Loads `path`; checks family and signature against `expected` first and throws rt::Error
// naming the file and both signatures on a mismatch ("a checkpoint of another config").
CheckpointMeta load_checkpoint(const std::filesystem::path& path, const CheckpointMeta& expected,
                               const std::function<void(torch::serialize::InputArchive&)>& read_model);

// A run directory, its `latest` pointer or a checkpoint file → the checkpoint: a file as it is;
// a run directory's checkpoints/best.ckpt, else its checkpoints/last.ckpt (train.init_from,
// evaluate's --ckpt, generate's --model). Throws rt::Error naming `name`, the key or flag, and
// the value.
std::filesystem::path resolve_run_or_checkpoint(const std::string& value, const std::string& name);

// The run directory holding `checkpoint` (<run>/checkpoints/<file>, <run> holds config.toml),
// or an empty path when the checkpoint lives elsewhere.
std::filesystem::path run_dir_of_checkpoint(const std::filesystem::path& checkpoint);

}  // namespace rt
