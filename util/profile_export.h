// A per-step profile (timing_profile.json, memory_profile.json) as one JSON list, the format the
// trainer wrote before profiles were streamed and rotated (util/profile_files.h): "[\n", one
// entry per line joined by ",\n", "\n]\n" ("[]\n" when there is none). The profiling guides and
// their scripts read that file whole; `profile-report RUN_DIR --export_list DIR` writes it from
// every part of a profile, in the order written. No LibTorch: profile-report uses it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace rt {

struct ProfileListExport {
  std::filesystem::path written;  // the list file
  int64_t entries = 0;            // entries written
  int64_t files = 0;              // files read: the parts and the profile itself
};

// Writes every entry of the profile at `profile` (its parts <stem>.part<K><ext> oldest first,
// then the file itself; `profile` may be the plain-name link to rank 0's file) to `out` as one
// JSON list, one entry per line. The writer's files are copied one line at a time, so memory
// stays small however long the profile; a file cut short by a killed writer, or a list in
// another layout, is read whole by read_profile_list_file instead (its complete entries, with a
// note in `notes` naming a file cut short). Atomic as write_file_atomic: the entries go to
// "<out>.tmp.<pid>", which is fsynced and renamed over `out`; on any error the temporary file is
// removed and a previous `out` is unchanged.
// Throws rt::Error naming the file: when the profile has neither parts nor the file, when `out`
// is one of the files read, or when a file cannot be read or `out` cannot be written.
ProfileListExport export_profile_list(const std::filesystem::path& profile, const std::filesystem::path& out,
                                      std::vector<std::string>* notes = nullptr);

}  // namespace rt
