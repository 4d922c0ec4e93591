// Audio files in and out: decode anything libsndfile reads to planar float
// channels, resample with soxr, map channels, write files through libsndfile.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "util/error.h"

namespace rt {

// The most samples (all channels) one decoded or resampled file may hold: 4 GiB of floats,
// about 3.4 hours of 44.1 kHz stereo. Compressed formats can declare or expand to far more than
// their size, and a file is held in memory whole.
inline constexpr int64_t kMaxDecodedSamples = int64_t{1} << 30;

// Planar float audio in [-1, 1): channels[c][t].
struct AudioData {
  int sample_rate = 0;
  std::vector<std::vector<float>> channels;
  // Non-empty when the file's header promises more bytes than the file holds (a copy or a
  // recording cut short): what it promises and what is there. The frames present are decoded.
  std::string truncated;
  int num_channels() const { return static_cast<int>(channels.size()); }
  int64_t frames() const { return channels.empty() ? 0 : static_cast<int64_t>(channels[0].size()); }
  double seconds() const { return sample_rate > 0 ? static_cast<double>(frames()) / sample_rate : 0.0; }
};

// Decodes a whole file. Throws rt::Error naming the path and libsndfile's reason when the file
// cannot be opened or is not audio ("Format not recognised", ...), when it holds no frames or
// more than kMaxDecodedSamples, and rt::StopRequested after SIGINT/SIGTERM. A truncated file
// decodes to the frames that are actually present, with `truncated` set.
AudioData decode_audio_file(const std::filesystem::path& path);

// Resamples one channel from `in_rate` to `out_rate` Hz with soxr (very high quality).
// Returns `in` unchanged when the rates are equal. Throws rt::Error on soxr failure, and
// (resample) when the result would hold more than kMaxDecodedSamples.
std::vector<float> resample_channel(const std::vector<float>& in, double in_rate, double out_rate);
AudioData resample(const AudioData& audio, int out_rate);

// Maps to `channels` channels: more inputs than outputs → output c averages the inputs
// i with i % channels == c (channels == 1: the mean of all); fewer → inputs repeated
// cyclically (mono duplicated), as RAVE's channel map does. REQUIRES channels >= 1.
AudioData map_channels(const AudioData& audio, int channels);

// decode_audio_file → map_channels → resample (downmixing first is cheaper).
// `source`, when given, gets the file's own channels, rate and duration.
struct SourceFacts {
  int channels = 0, sample_rate = 0;
  double seconds = 0.0;
};
AudioData load_audio(const std::filesystem::path& path, int sample_rate, int channels,
                     SourceFacts* source = nullptr);

// float [-1, 1) → int16 with rounding and clipping (scale 32768, libsndfile's convention, so
// 16-bit files round-trip exactly).
int16_t float_to_int16(float x);
// Frames [start, start + frames) of every channel of `audio` through float_to_int16, channel-major
// into `out` (channels · frames values): a database chunk as preprocess stores it, or a lazy
// database's whole file as its loader keeps it.
void to_int16(const AudioData& audio, int64_t start, int64_t frames, int16_t* out);

// libsndfile format codes (SF_FORMAT_* major | subtype) for common names:
// "wav16", "wav24", "wavf32", "flac16", "flac24", "ogg", "aiff16", "aiff24", "opus", "mp3".
// Throws rt::Error listing the names on an unknown one.
int audio_format_from_name(const std::string& name);
// The file name extension of a libsndfile format: ".wav", ".flac", ".ogg", ".opus", ".aiff",
// ".mp3" (the major format's; Ogg Opus is ".opus").
std::string audio_format_extension(int sf_format);

// Writes `audio` with libsndfile in `sf_format`. Throws rt::Error naming the path and reason
// (including "format not supported by this libsndfile").
void write_audio_file(const std::filesystem::path& path, const AudioData& audio, int sf_format);

}  // namespace rt
