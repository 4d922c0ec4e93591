// `preprocess` (docs/cli.md "preprocess"): audio files → a RAVE-compatible LMDB, and `--inspect`.
//
// Files are decoded in parallel but written in a fixed order — the sorted file list, then the
// chunk order inside each file — so the same inputs always give the same keys.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace rt {

// --max_db_size's largest value, in GB: 16 TiB of address space for LMDB's map (a limit, not an
// allocation: the file grows as records are written), audio or neural.
inline constexpr double kMaxDbSizeGb = 16384.0;
// Throws rt::Error naming --max_db_size, the value and the range (0, kMaxDbSizeGb] outside it.
void check_max_db_size(double gb);

// RAVE's `preprocess --ext` default (acids-ircam/RAVE scripts/preprocess.py): the extensions a
// folder is searched for. AAC is among them and is refused by name (libsndfile has no AAC
// decoder); the others are read through libsndfile (mp3 through mpg123, opus through libopus).
const std::vector<std::string>& rave_audio_extensions();

// --ext's values made canonical: lower case, a leading '.' dropped, duplicates removed. Throws
// rt::Error naming --ext and the value when one is empty or holds anything but letters and
// digits, or when none is given.
std::vector<std::string> normalize_extensions(const std::vector<std::string>& values);

struct PreprocessOptions {
  std::vector<std::filesystem::path> input_paths;  // Files or folders (walked recursively).
  // The extensions searched for in folders (any case), as RAVE's --ext; files named directly in
  // input_paths are read whatever their extension.
  std::vector<std::string> extensions = rave_audio_extensions();
  std::filesystem::path output_path;
  int sampling_rate = 44100;
  int channels = 1;
  int64_t num_signal = 131072;    // A stored chunk holds 2 * num_signal samples per channel.
  double max_db_size_gb = 100.0;  // LMDB map size (a limit; the file grows as needed).
  int workers = 0;                // Decoding threads; 0 = all cores.
  // --lazy: one record per file, a reference the loader decodes when it draws a chunk
  // (data/lazy_audio.h); the same chunks as the eager database, not copied.
  bool lazy = false;
};

struct SkippedFile {
  std::filesystem::path path;
  std::string reason;
};

struct PreprocessResult {
  size_t files_total = 0;
  size_t files_used = 0;
  size_t files_other_ext = 0;  // Files in the folders of another extension than --ext: not read.
  uint64_t chunks = 0;
  double seconds = 0.0;  // Audio stored, chunks * 2 * num_signal / sampling_rate.
  std::vector<SkippedFile> skipped;
  bool map_full = false;  // Stopped early at --max_db_size.
  uint64_t db_bytes = 0;  // Size of data.mdb at the end.
};

// Every regular file under `inputs`, sorted, without duplicates. Inputs that do not exist are
// appended to `missing`. With `extensions` (canonical, normalize_extensions), a folder's files of
// other extensions are left out and counted in `other`; files named directly are kept.
std::vector<std::filesystem::path> collect_input_files(const std::vector<std::filesystem::path>& inputs,
                                                       std::vector<SkippedFile>& missing,
                                                       const std::vector<std::string>& extensions = {},
                                                       size_t* other = nullptr);

// Builds the database; progress and the skip list go to `log`. Throws rt::Error on bad
// options or when the output already holds entries. A full map is not an error: it ends the
// run with result.map_full set and metadata.yaml describing what was committed.
PreprocessResult preprocess_audio(const PreprocessOptions& options, std::ostream& log);

// `preprocess --inspect DB`: prints entry count, sampling rate, channels, total duration and
// the buffers found, and applies the loader's checks (require_db_metadata, then
// decode_database_waveform on every record). Returns the keys that failed, plus "metadata.yaml"
// when it is missing or out of range and "database" when it holds no records (empty: training
// accepts it). Throws rt::StopRequested after SIGINT/SIGTERM.
std::vector<std::string> inspect_database(const std::filesystem::path& db, std::ostream& out);

}  // namespace rt
