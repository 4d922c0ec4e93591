// What a resume changed: the config a checkpoint was trained with (its meta/config, the
// resolved config.toml of that run) against the one resuming it. `train` prints the changes as a
// diff at start, records them in training_summary.json (`config_changes`), and keeps the run's
// earlier config.toml as config.<step>.toml before writing the new one, so that no earlier value
// survives only inside the checkpoints (before: a resume with another --batch, --n_signal,
// --threads, --workers or --seed was accepted silently and config.toml overwritten).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace rt {

struct ConfigChange {
  std::string key;     // "train.batch"
  std::string before;  // the value as TOML text in the checkpoint's config ("" when absent)
  std::string after;   // the value now ("" when absent)
};

// The keys whose values differ between two resolved configs (Config::to_toml text), in the
// order of `after`, then keys only `before` has. train.ckpt (which always differs) is left out.
std::vector<ConfigChange> config_changes(const std::string& before_toml, const std::string& after_toml);

// "  train.batch: 8 → 16" ("(absent)" for a missing side), without a line end.
std::string config_change_text(const ConfigChange& change);

// Before a resume at `step` rewrites <run_dir>/config.toml with `new_toml`: when the file
// there differs, it is kept as <run_dir>/config.<step>.toml (the config that trained the steps
// before `step`; config.<step>.<n>.toml when a copy of another text has that name). Returns
// the copy's path, or an empty path when nothing needed keeping. Throws rt::Error naming the
// file when it cannot be written.
std::filesystem::path keep_previous_config(const std::filesystem::path& run_dir, int64_t step,
                                           const std::string& new_toml);

}  // namespace rt
