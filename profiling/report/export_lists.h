// profile-report --export_list: a run's per-step profiles as the single JSON lists the trainer
// wrote before profiles were streamed and rotated (util/profile_export.h), for the profiling
// guides' scripts that read timing_profile.json whole.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "util/profile_export.h"

namespace rt::report {

// The folder a run's profiles are in: profiling.output_dir of its config.toml when that names an
// existing directory (as load_run_files reads them), else the run directory.
std::filesystem::path profile_dir_of(const std::filesystem::path& run_dir);

// Writes each profile of the run directory `run_dir_given` (or an <out_path>/latest pointer):
// timing_profile.json, memory_profile.json and the ranks' timing_profile.rank<R>.json and
// memory_profile.rank<R>.json, each with every part, as one list under the same name in
// `out_dir` (created when missing), atomically. Notes on files cut short go to `notes`.
// Throws rt::Error when `run_dir_given` is no directory, holds no profile, or `out_dir` is the
// folder the profiles are in (the list would replace the streamed file the trainer appends to),
// or, unless `force`, when `out_dir` already holds a file of a profile's name (nothing written).
std::vector<ProfileListExport> export_profile_lists(const std::filesystem::path& run_dir_given,
                                                    const std::filesystem::path& out_dir,
                                                    std::vector<std::string>* notes, bool force = false);

}  // namespace rt::report
