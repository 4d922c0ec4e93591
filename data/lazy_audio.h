// Lazy audio databases (`preprocess --lazy`, as RAVE's): the LMDB stores one record per source
// file, a reference, and the loader decodes the audio when an example is drawn, so a large
// collection is not copied.
//
// A record is an AudioExample with no buffer and RAVE's metadata {path, length (seconds),
// channels (the file's own)}, plus what makes the lazy database train exactly as the eager one
// on the same files: rt_frames (samples per channel after resampling to the database's rate),
// rt_chunk (samples per chunk, 2 · num_signal), rt_chunks (whole chunks in the file), and
// rt_size / rt_mtime_ns (the file as it was read, so that a file changed since is refused, not
// trained on silently). A chunk is decoded as preprocess decodes it for the eager database
// (libsndfile, channels mapped, soxr over the whole file, rounded to int16), so the lazy
// database's chunk i equals the eager database's record i, bit for bit.
//
// RAVE's own lazy records (path, length and channels only) are refused by name: their chunking
// follows ffmpeg's seek, which this trainer does not reproduce.
#pragma once

#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "data/audio_example.h"

namespace rt {

struct LazyFile {
  std::filesystem::path path;   // absolute
  double length_seconds = 0.0;  // at the file's own rate (RAVE's `length`)
  int source_channels = 0;      // the file's own (RAVE's `channels`)
  int64_t frames = 0;           // after resampling to the database's rate
  int64_t chunk = 0;            // samples per chunk (2 · num_signal)
  int64_t chunks = 0;           // whole chunks, frames / chunk
  uint64_t size = 0;            // bytes, as read by preprocess
  int64_t mtime_ns = 0;         // modification time, as read by preprocess
};

// The record of `file` (serialized AudioExample).
std::string encode_lazy_record(const LazyFile& file);
// The reference a lazy record holds. Throws rt::Error naming the key when a field is missing or
// out of range, and for RAVE's own lazy records (no rt_* fields).
LazyFile decode_lazy_record(std::string_view bytes, const std::string& key);

// `path`'s size and modification time as preprocess records them.
void stat_source(const std::filesystem::path& path, uint64_t* size, int64_t* mtime_ns);

// How `file` differs from what preprocess read: "" when it is there unchanged, kSourceGone when
// it is no regular file any more, else what changed ("size A → B bytes", "modification time").
inline constexpr const char* kSourceGone = "gone";
std::string source_change(const LazyFile& file);

// Decodes lazy chunks, keeping the last few decoded files (whole, int16) under a byte budget:
// drawing chunks of the same file again costs no decoding. Safe to call from several threads.
class LazyDecoder {
 public:
  LazyDecoder(int sampling_rate, int channels, size_t cache_bytes);
  // Chunk `index` of `file` as int16 samples, channel-major. Throws rt::Error naming the key and
  // the path when the file is gone, changed since preprocess (size or modification time), no
  // longer decodes, or decodes to another length.
  Waveform chunk(const LazyFile& file, int64_t index, const std::string& key) const;

 private:
  using Samples = std::shared_ptr<const std::vector<int16_t>>;  // channel-major, whole file
  Samples decoded(const LazyFile& file, const std::string& key) const;

  int sampling_rate_, channels_;
  size_t cache_bytes_;
  mutable std::mutex mu_;
  mutable std::list<std::pair<std::string, Samples>> recent_;  // most recent first
  mutable size_t cached_ = 0;
};

}  // namespace rt
