// Stacked --config files, composed the way RAVE composes its gin files
// (`rave train --config discrete --config causal`: acids-ircam/RAVE 2.3.1 scripts/train.py hands
// every --config to gin.parse_config_files_and_bindings in order, and a later file's bindings win).
//
// A config file may begin with a [stack] table, which is not a config section:
//   [stack]
//   mirrors = "rave/configs/causal.gin"        # the file it reproduces (documentation)
//   include = ["v2"]                            # merged first, as gin's `include` (names or paths)
//   requires = { "model.version" = ["v2", "v3"] }   # accepted final values, else refused
//   exclusive = ["model.discriminator"]         # a later file of the stack may not change it
//   summary = "Causal convolutions: …"          # one line for --help and docs/config.md
//   rave_gpu_memory = "16 GB"                   # the minimum GPU memory RAVE's README states
//
// A file that sets model.family itself or through its includes, or has no [stack] table, is a
// base; the others (causal.toml …) are overlays and need a base under them, as RAVE's gin
// overlays configure nothing alone. Files merge
// key by key in order, includes first (depth first; a file reached twice merges once, at its
// first place, as gin does). A file named on the command line that an earlier one already
// merged (`--config v3 --config v2`: v3 includes v2) is refused: merged once, it could not
// overlay what came before it, as a later --config promises. Refusals (rt::Error, exit 2) name
// both files involved.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"

namespace rt {

class ConfigStack {
 public:
  // Resolves each name (config_lookup.h's find_config_file, relative to an including file's
  // folder first), expands includes and merges every file into `config` in order, and names
  // the config after the stack (Config::set_stack_name). Throws rt::Error
  // for a missing file, an include cycle, a bad [stack] table or an overlay without a base.
  static ConfigStack merge(const std::vector<std::string>& names,
                           const std::vector<std::filesystem::path>& dirs, Config& config);

  // The checks on the resolved values (call after the command line's settings, before
  // Config::finalize): every file's `requires`, and every `exclusive` key that a later file of
  // the stack changed. Values set on the command line count for `requires` but never conflict.
  void check(const Config& config) const;

  // "v2+causal+noise": the stems of the files named on the command line, joined.
  std::string name() const;
  // The top-level files, as resolved (in command-line order).
  const std::vector<std::filesystem::path>& top_level() const { return top_; }

  struct File {
    std::filesystem::path path;
    std::string included_by;  // the stem of the file whose include reached it; "" at top level
    std::string mirrors, summary, rave_gpu_memory;
    // [stack] requires: key -> accepted final values ('requires' is a C++20 keyword)
    std::vector<std::pair<std::string, std::vector<std::string>>> required;
    std::vector<std::string> exclusive;
    std::vector<std::string> include;  // as written
    bool base = false;                 // sets model.family, or has no [stack] table
  };
  const std::vector<File>& files() const { return files_; }  // every file merged, in order

  // A config file's [stack] table and whether it sets model.family or has no [stack] (for --help
  // and the docs' table; `base` is false for a file that is a base only through its includes;
  // throws rt::Error on a malformed table).
  static File read_header(const std::filesystem::path& path);
  // Whether the file is a base itself or through its includes (resolved as merge resolves them).
  static bool is_base(const std::filesystem::path& path, const std::vector<std::filesystem::path>& dirs);

 private:
  std::vector<std::filesystem::path> top_;
  std::vector<File> files_;
};

}  // namespace rt
