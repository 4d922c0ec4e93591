#include "config/config_lookup.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "util/error.h"
#include "util/path_kind.h"

namespace rt {

namespace fs = std::filesystem;

fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

std::vector<fs::path> config_search_dirs(const fs::path& exe_dir) {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("RT_CONFIG_DIR"); env != nullptr && *env != '\0') dirs.emplace_back(env);
  if (!exe_dir.empty()) {
    dirs.push_back((exe_dir / ".." / "share" / "rave-ssm-trainer" / "configs").lexically_normal());
    dirs.push_back((exe_dir / ".." / ".." / "configs").lexically_normal());
  }
#ifdef RT_SOURCE_CONFIG_DIR
  dirs.emplace_back(RT_SOURCE_CONFIG_DIR);
#endif
  // The same folder reached twice is tried once.
  std::vector<fs::path> unique;
  for (const auto& d : dirs) {
    bool seen = false;
    for (const auto& u : unique) {
      std::error_code ec;
      seen = seen || u == d || fs::equivalent(u, d, ec);
    }
    if (!seen) unique.push_back(d);
  }
  return unique;
}

std::vector<std::string> configs_in(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".toml") names.push_back(it->path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

fs::path find_config_file(const std::string& name_or_path, const std::vector<fs::path>& dirs) {
  std::error_code ec;
  if (name_or_path.empty()) throw Error("--config: empty config name");
  if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
  if (name_or_path.find('/') != std::string::npos) {
    throw Error("--config: config file '" + name_or_path + "' " + not_a_regular_file(name_or_path));
  }
  std::string file = name_or_path;
  if (fs::path(file).extension() != ".toml") file += ".toml";
  for (const auto& dir : dirs) {
    const fs::path candidate = dir / file;
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  std::string msg = "--config: no config named '" + name_or_path + "' (looked for " + file + " in:";
  std::vector<std::string> all;
  for (const auto& dir : dirs) {
    const auto names = configs_in(dir);
    msg += "\n  " + dir.string();
    if (!fs::is_directory(dir, ec)) {
      msg += " (missing)";
    } else {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      msg += " (available: " + (list.empty() ? std::string("none") : list) + ")";
    }
    all.insert(all.end(), names.begin(), names.end());
  }
  msg += ")";
  if (dirs.empty()) msg += " no folders to search";
  const std::string best = closest_match(fs::path(file).stem().string(), all);
  if (!best.empty()) msg += "; did you mean '" + best + "'?";
  throw Error(msg);
}

}  // namespace rt
