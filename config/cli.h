// The `train` command line: dedicated flags, --config lookup and the three override
// styles, resolved into one Config. Parsing never exits the process: the caller prints help,
// the config or the model summary as the returned flags say.
//
// Precedence: built-in defaults < the --config files (stacked in order, config/config_stack.h)
// < dedicated flags and overrides in
// command-line order (the later setting of a key wins). Override styles, all the same keys:
//   --override section.key=value   --section.key value   --section.key=value   section.key=value
// Bool flags and bool keys accept the bare form (= true) and a value (`--enable_profiling True`,
// `--enable_profiling=false`); values are true/false/True/False/1/0/yes/no/on/off.
//
// Errors (rt::Error): unknown flags (with the closest flag or --section.key suggested), a flag
// missing its value, unknown keys, bad values (see Config::set), config not found.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/config_lookup.h"

namespace rt {

struct TrainArgs {
  Config config;                      // resolved and finalized
  std::filesystem::path config_path;  // the last file --config resolved to; empty without --config
  std::vector<std::filesystem::path> config_files;  // every --config, resolved, in order
  std::string config_name;    // the stems joined ("v3", "v2+causal"); empty without --config
  bool summary = false;       // --summary: print the model summary and exit
  bool print_config = false;  // --print_config: print config.to_toml(true) and exit
  bool help = false;          // --help / -h: print help_text and exit (nothing resolved)
  std::string help_text;
  // --config_reference: print config_reference_markdown() (config_reference.h) and exit
  // (nothing resolved).
  bool config_reference = false;
};

// `argv[0]` is the program name. train.name, when left "", becomes the config's stem (or "run"
// without --config). Bare config names are looked up in `config_dirs`.
TrainArgs parse_train_args(int argc, const char* const* argv,
                           const std::vector<std::filesystem::path>& config_dirs = config_search_dirs());
// Same, `args` without the program name.
TrainArgs parse_train_args(const std::vector<std::string>& args,
                           const std::vector<std::filesystem::path>& config_dirs = config_search_dirs());

// The --help text: every flag, the override styles, the aliases, each model family's keys and
// where keys are described.
std::string train_help_text();

}  // namespace rt
