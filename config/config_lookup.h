// Finding a config by name ("--config takes a path, or a bare name (v3, v3.toml)
// looked up in the installed/source configs/").
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace rt {

// The folder of the running executable (/proc/self/exe); empty when it cannot be read.
std::filesystem::path executable_dir();

// Where bare config names are looked up, in order: $RT_CONFIG_DIR (when set),
// <exe_dir>/../share/rave-ssm-trainer/configs (installed), <exe_dir>/../../configs (build tree
// bin/ → source tree) and the compile-time source configs/ (RT_SOURCE_CONFIG_DIR).
std::vector<std::filesystem::path> config_search_dirs(
    const std::filesystem::path& exe_dir = executable_dir());

// `name_or_path` names an existing file → that file. Otherwise a bare name ("v3" or "v3.toml",
// no '/') is looked up as <name>.toml in `dirs`, first match wins. Throws rt::Error listing the
// folders tried and the configs available in each when nothing matches.
std::filesystem::path find_config_file(const std::string& name_or_path,
                                       const std::vector<std::filesystem::path>& dirs = config_search_dirs());

// Config names (file stems) of the *.toml files in `dir`, sorted; empty when `dir` is missing.
std::vector<std::string> configs_in(const std::filesystem::path& dir);

}  // namespace rt
