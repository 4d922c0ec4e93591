#include "trainer/output_target.h"

#include "training/checkpoint.h"
#include "util/error.h"
#include "util/path_kind.h"
#include "util/run_pointer.h"

namespace rt {

namespace fs = std::filesystem;

void check_output_target(const fs::path& output, const std::vector<fs::path>& inputs, bool force,
                         const std::string& command, const std::string& flag) {
  const std::string at = flag + " '" + output.string() + "'";
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(output, ec);
  if (ec || !fs::exists(st)) return;
  const fs::file_status target = fs::status(output, ec);
  if (ec || !fs::is_regular_file(target)) {
    throw Error(at + " is " + file_kind_text(fs::exists(target) ? target : st) + ", not a regular file; " +
                command + " writes a new file in its place, so it refuses: choose a file path");
  }
  for (const auto& in : inputs) {
    if (!in.empty() && fs::equivalent(output, in, ec)) {
      throw Error(at + " is the file this " + command + " reads (" + in.string() + "): choose another path");
    }
  }
  const fs::path abs = fs::weakly_canonical(output, ec);
  const fs::path folder = abs.parent_path();
  auto is_run = [&](const fs::path& dir) {
    std::error_code e;
    return fs::is_regular_file(dir / "config.toml", e) && fs::is_directory(dir / "checkpoints", e);
  };
  const fs::path run = is_run(folder) ? folder
                       : folder.filename() == "checkpoints" && is_run(folder.parent_path())
                           ? folder.parent_path()
                           : fs::path();
  if (!run.empty()) {
    throw Error(at + " is one of the files of the training run '" + run.string() + "'; " + command +
                " never replaces them: choose another path");
  }
  if (const fs::path named = ec ? abs : resolve_run_pointer(abs); named != abs) {
    throw Error(at + " is a `latest` pointer naming the run '" + named.string() + "'; " + command +
                " never replaces it: choose another path");
  }
  bool checkpoint = false;
  try {
    read_checkpoint_meta(output);
    checkpoint = true;
  } catch (const std::exception&) {
  }
  if (checkpoint) {
    throw Error(at + " is a training checkpoint; " + command +
                " never replaces one (train resumes from it): "
                "choose another path");
  }
  if (!force) {
    throw Error(at + " already exists; pass --force to replace it, or choose another path");
  }
}

}  // namespace rt
