#include "profiling/report/export_lists.h"

#include <algorithm>
#include <regex>

#include "config/run_keys.h"
#include "util/error.h"
#include "util/path_kind.h"
#include "util/profile_files.h"
#include "util/run_pointer.h"

namespace rt::report {
namespace fs = std::filesystem;

fs::path profile_dir_of(const fs::path& run_dir) {
  std::error_code ec;
  const fs::path config = run_dir / "config.toml";
  if (!fs::exists(config, ec)) return run_dir;
  // A config.toml that does not parse gives no output_dir (profile-report's analysis names
  // it): the run directory is where its profiles are by default.
  const std::string dir = read_stored_settings(config).output_dir();
  if (!dir.empty() && fs::is_directory(dir, ec)) return dir;
  return run_dir;
}

// timing_profile.json, memory_profile.json and the ranks' .rank<R>.json.
static const std::regex& profile_list_name() {
  static const std::regex name(R"((timing|memory)_profile(\.rank[0-9]+)?\.json)");
  return name;
}

std::vector<ProfileListExport> export_profile_lists(const fs::path& run_dir_given, const fs::path& out_dir,
                                                    std::vector<std::string>* notes, bool force) {
  std::error_code ec;
  const fs::path run_dir = resolve_run_pointer(run_dir_given);
  if (!fs::is_directory(run_dir, ec)) {
    throw Error("profile-report: " + run_dir.string() +
                " is not a directory (expected a run directory such as "
                "runs/<name>_<date>_<hex> or runs/latest)");
  }
  const fs::path prof_dir = profile_dir_of(run_dir);
  if (fs::equivalent(prof_dir, out_dir, ec)) {
    throw Error("profile-report --export_list: '" + out_dir.string() +
                "' is the folder the run's profiles are in; "
                "the lists would replace the files the trainer streams into (choose another folder)");
  }
  // The profiles, not their parts (<stem>.part<K>.json), temporaries or set-aside files.
  const std::regex& profile_name = profile_list_name();
  std::vector<std::string> names;
  for (fs::directory_iterator it(prof_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (std::regex_match(name, profile_name)) names.push_back(name);
  }
  // A profile whose file is gone but whose parts remain (a run killed during a rotation).
  for (const char* stem : {"timing_profile", "memory_profile"}) {
    const std::string name = std::string(stem) + ".json";
    if (std::find(names.begin(), names.end(), name) == names.end() &&
        !indexed_profile_parts(prof_dir / name).empty()) {
      names.push_back(name);
    }
  }
  if (names.empty()) {
    throw Error("profile-report --export_list: " + prof_dir.string() +
                " holds no timing_profile.json or memory_profile.json (was the run started with "
                "--enable_timing_profiling or --enable_memory_profiling?)");
  }
  std::sort(names.begin(), names.end());
  if (!force) {
    for (const auto& name : names) {
      if (something_is_at(out_dir / name)) {
        throw Error("profile-report --export_list: '" + (out_dir / name).string() +
                    "' already exists; pass --force to replace it, or choose another folder");
      }
    }
  }
  std::vector<ProfileListExport> written;
  for (const auto& name : names)
    written.push_back(export_profile_list(prof_dir / name, out_dir / name, notes));
  return written;
}

}  // namespace rt::report
