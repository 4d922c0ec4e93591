// The built-in demo data (`preprocess --generate_demo DIR`): a folder of real audio files
// (harmonic tones, chords, chirps, noise bursts, plucked strings) in several formats, rates
// and channel counts, with nested subfolders — what a user's sample folder looks like.
// Deterministic: the same seed gives the same samples (lossy OGG files are decoded bit-exactly
// only by the same libvorbis).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace rt {

struct DemoFile {
  std::filesystem::path path;  // Relative to the demo folder.
  std::string format;          // audio_format_from_name() name.
  int sample_rate = 0;
  int channels = 0;
  double seconds = 0.0;
};

inline constexpr double kMaxDemoSeconds = 3600.0;

// Writes the demo files under `dir` (created if missing), each `seconds_per_file` long (in
// (0, kMaxDemoSeconds]). Returns what it wrote. Throws rt::Error when a file cannot be written
// or, unless `replace`, when one of the demo's files exists already there (before anything is
// written: a folder of the user's keeps its files); rt::StopRequested after SIGINT/SIGTERM
// (checked between files).
std::vector<DemoFile> generate_demo_audio(const std::filesystem::path& dir, double seconds_per_file,
                                          uint64_t seed, bool replace = false);

}  // namespace rt
