// The files of a per-step profile (timing_profile.json, memory_profile.json): a JSON list with
// one entry per line, rotated into <stem>.part<K><ext> parts (K = 1, 2, …, oldest first) when
// it reaches its bound (profiling/profile_writers.h). Readers here take the parts and the
// current file as one list, and read a file cut short by a killed writer line by line.
// No LibTorch: profile-report uses these too.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "util/json.h"

namespace rt {

// "<stem>.part<K><ext>" beside the profile "<stem><ext>".
std::filesystem::path profile_part_path(const std::filesystem::path& path, int64_t k);

// The parts of the profile at `path` as (K, file), K ascending (oldest first).
std::vector<std::pair<int64_t, std::filesystem::path>> indexed_profile_parts(
    const std::filesystem::path& path);

// The same, files only; `path` may be the plain-name link rank 0 keeps to its rank file
// (timing_profile.json → timing_profile.rank0.json): the parts are the rank file's.
std::vector<std::filesystem::path> profile_parts(const std::filesystem::path& path);

// `path`, or the file it links to (a relative link is taken from `path`'s folder).
std::filesystem::path resolve_profile_link(const std::filesystem::path& path);

// The entries of one list file: the whole JSON list, or, when the file does not parse whole (a
// writer killed in the middle of a write), each line that is a JSON object, with a note naming
// the file into `notes` (when given). Throws rt::Error naming the file when it cannot be read or
// holds no entry line at all while not being a list.
Json read_profile_list_file(const std::filesystem::path& file, std::vector<std::string>* notes = nullptr);

// Every entry of the profile at `path`: its parts, then the file itself (absent files are
// empty), as one JSON list in the order written.
Json read_profile_entries(const std::filesystem::path& path, std::vector<std::string>* notes = nullptr);

}  // namespace rt
