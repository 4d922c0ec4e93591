#include "data/audio_io.h"

#include <sndfile.h>
#include <soxr.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>

#include "util/signals.h"

namespace rt {
namespace {

struct SndfileCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndfileHandle = std::unique_ptr<SNDFILE, SndfileCloser>;

// RIFF (WAV) and FORM (AIFF) files state their own length in their first 8 bytes; a file that
// ends before it was cut short. libsndfile clamps its chunks to the file and says nothing, so
// the frames it decodes look like a complete, shorter file.
std::string container_truncation(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char h[8];
  if (!in.read(reinterpret_cast<char*>(h), 8)) return "";
  uint64_t declared = 0;
  if (std::memcmp(h, "RIFF", 4) == 0) {
    declared = uint64_t{h[4]} | uint64_t{h[5]} << 8 | uint64_t{h[6]} << 16 | uint64_t{h[7]} << 24;
  } else if (std::memcmp(h, "FORM", 4) == 0) {
    declared = uint64_t{h[7]} | uint64_t{h[6]} << 8 | uint64_t{h[5]} << 16 | uint64_t{h[4]} << 24;
  } else {
    return "";
  }
  // 0 and 0xFFFFFFFF: a streaming writer that never went back to fill the length in.
  if (declared == 0 || declared == 0xFFFFFFFFu) return "";
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  // One byte short is a chunk's pad byte that some writers count but never write.
  if (ec || declared + 8 <= size + 1) return "";
  return "its header promises " + std::to_string(declared + 8) + " bytes but the file holds " +
         std::to_string(size);
}

}  // namespace

AudioData decode_audio_file(const std::filesystem::path& path) {
  SF_INFO info{};
  SndfileHandle file(sf_open(path.c_str(), SFM_READ, &info));
  if (!file) {
    throw Error("cannot decode '" + path.string() + "': " + sf_strerror(nullptr));
  }
  if (info.channels < 1 || info.samplerate < 1) {
    throw Error("cannot decode '" + path.string() + "': " + std::to_string(info.channels) + " channels at " +
                std::to_string(info.samplerate) + " Hz");
  }
  const int nc = info.channels;
  AudioData audio;
  audio.sample_rate = info.samplerate;
  audio.channels.assign(static_cast<size_t>(nc), {});
  // The header's frame count sizes nothing beyond what the file's bytes can hold (a crafted
  // header once asked for 2^34 frames per channel up front).
  std::error_code ec;
  const auto bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (!ec && info.frames > 0) {
    const int64_t plausible = std::min<int64_t>(info.frames, bytes / nc);
    for (auto& c : audio.channels) c.reserve(static_cast<size_t>(std::max<int64_t>(plausible, 0)));
  }
  constexpr sf_count_t kBlock = 16384;
  std::vector<float> block(static_cast<size_t>(kBlock * nc));
  for (;;) {
    sf_count_t got = sf_readf_float(file.get(), block.data(), kBlock);
    if (got <= 0) break;
    throw_if_stop_requested("while decoding " + path.string());
    if ((audio.frames() + got) * nc > kMaxDecodedSamples) {
      throw Error("cannot decode '" + path.string() + "': it holds more than " +
                  std::to_string(kMaxDecodedSamples) +
                  " samples, the most one file may decode to in memory; split it into shorter files");
    }
    for (sf_count_t t = 0; t < got; ++t) {
      for (int c = 0; c < nc; ++c)
        audio.channels[static_cast<size_t>(c)].push_back(block[static_cast<size_t>(t * nc + c)]);
    }
  }
  audio.truncated = container_truncation(path);
  if (audio.frames() == 0 && audio.truncated.empty()) {
    throw Error("cannot decode '" + path.string() + "': it holds no audio frames");
  }
  return audio;
}

std::vector<float> resample_channel(const std::vector<float>& in, double in_rate, double out_rate) {
  if (in_rate == out_rate || in.empty()) return in;
  const size_t out_len =
      static_cast<size_t>(std::llround(static_cast<double>(in.size()) * out_rate / in_rate));
  std::vector<float> out(out_len);
  size_t done = 0;
  soxr_quality_spec_t quality = soxr_quality_spec(SOXR_VHQ, 0);
  soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  soxr_error_t err = soxr_oneshot(in_rate, out_rate, 1, in.data(), in.size(), nullptr, out.data(), out.size(),
                                  &done, &io, &quality, nullptr);
  if (err != nullptr) {
    throw Error("soxr resampling " + std::to_string(in_rate) + " Hz -> " + std::to_string(out_rate) +
                " Hz failed: " + err);
  }
  out.resize(done);
  return out;
}

AudioData resample(const AudioData& audio, int out_rate) {
  if (audio.sample_rate == out_rate) return audio;
  const double out_samples =
      static_cast<double>(audio.frames()) * audio.num_channels() * out_rate / audio.sample_rate;
  if (out_samples > static_cast<double>(kMaxDecodedSamples)) {
    throw Error("resampling " + std::to_string(audio.frames()) + " frames from " +
                std::to_string(audio.sample_rate) + " Hz to " + std::to_string(out_rate) +
                " Hz gives more than " + std::to_string(kMaxDecodedSamples) +
                " samples, the most one file may hold in memory; split it into shorter files");
  }
  AudioData out;
  out.sample_rate = out_rate;
  for (const auto& c : audio.channels)
    out.channels.push_back(resample_channel(c, audio.sample_rate, out_rate));
  return out;
}

AudioData map_channels(const AudioData& audio, int channels) {
  if (channels < 1) throw Error("channel count must be >= 1, got " + std::to_string(channels));
  const int in = audio.num_channels();
  if (in == channels) return audio;
  AudioData out;
  out.sample_rate = audio.sample_rate;
  out.channels.resize(static_cast<size_t>(channels));
  const size_t n = static_cast<size_t>(audio.frames());
  if (in > channels) {
    for (int c = 0; c < channels; ++c) {
      auto& dst = out.channels[static_cast<size_t>(c)];
      dst.assign(n, 0.0f);
      int used = 0;
      for (int i = c; i < in; i += channels, ++used) {
        const auto& src = audio.channels[static_cast<size_t>(i)];
        for (size_t t = 0; t < n; ++t) dst[t] += src[t];
      }
      const float inv = 1.0f / static_cast<float>(used);
      for (auto& v : dst) v *= inv;
    }
  } else {
    for (int c = 0; c < channels; ++c)
      out.channels[static_cast<size_t>(c)] = audio.channels[static_cast<size_t>(c % in)];
  }
  return out;
}

AudioData load_audio(const std::filesystem::path& path, int sample_rate, int channels, SourceFacts* source) {
  AudioData audio = decode_audio_file(path);
  if (source != nullptr) *source = SourceFacts{audio.num_channels(), audio.sample_rate, audio.seconds()};
  const std::string truncated = audio.truncated;
  if (audio.num_channels() > channels) audio = map_channels(audio, channels);
  audio = resample(audio, sample_rate);
  if (audio.num_channels() != channels) audio = map_channels(audio, channels);
  audio.truncated = truncated;
  return audio;
}

int16_t float_to_int16(float x) {
  const float scaled = std::nearbyint(x * 32768.0f);
  return static_cast<int16_t>(std::clamp(scaled, -32768.0f, 32767.0f));
}

void to_int16(const AudioData& audio, int64_t start, int64_t frames, int16_t* out) {
  for (size_t c = 0; c < audio.channels.size(); ++c) {
    const float* src = audio.channels[c].data() + start;
    int16_t* dst = out + c * static_cast<size_t>(frames);
    for (int64_t t = 0; t < frames; ++t) dst[t] = float_to_int16(src[t]);
  }
}

int audio_format_from_name(const std::string& name) {
  static const std::vector<std::pair<std::string, int>> kFormats = {
      {"wav16", SF_FORMAT_WAV | SF_FORMAT_PCM_16},   {"wav24", SF_FORMAT_WAV | SF_FORMAT_PCM_24},
      {"wavf32", SF_FORMAT_WAV | SF_FORMAT_FLOAT},   {"flac16", SF_FORMAT_FLAC | SF_FORMAT_PCM_16},
      {"flac24", SF_FORMAT_FLAC | SF_FORMAT_PCM_24}, {"ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS},
      {"aiff16", SF_FORMAT_AIFF | SF_FORMAT_PCM_16}, {"aiff24", SF_FORMAT_AIFF | SF_FORMAT_PCM_24},
      {"opus", SF_FORMAT_OGG | SF_FORMAT_OPUS},      {"mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III},
  };
  std::string names;
  for (const auto& [n, f] : kFormats) {
    if (n == name) return f;
    names += (names.empty() ? "" : ", ") + n;
  }
  throw Error("unknown audio format '" + name + "' (accepted: " + names + ")");
}

std::string audio_format_extension(int sf_format) {
  if ((sf_format & SF_FORMAT_SUBMASK) == SF_FORMAT_OPUS) return ".opus";
  switch (sf_format & SF_FORMAT_TYPEMASK) {
    case SF_FORMAT_WAV:
      return ".wav";
    case SF_FORMAT_FLAC:
      return ".flac";
    case SF_FORMAT_OGG:
      return ".ogg";
    case SF_FORMAT_AIFF:
      return ".aiff";
    case SF_FORMAT_MPEG:
      return ".mp3";
    default:
      throw Error("no file name extension known for libsndfile format " + std::to_string(sf_format));
  }
}

void write_audio_file(const std::filesystem::path& path, const AudioData& audio, int sf_format) {
  SF_INFO info{};
  info.samplerate = audio.sample_rate;
  info.channels = audio.num_channels();
  info.format = sf_format;
  if (info.channels < 1) throw Error("cannot write '" + path.string() + "': no channels");
  if (!sf_format_check(&info)) {
    throw Error("cannot write '" + path.string() + "': format 0x" +
                [&] {
                  char buf[16];
                  std::snprintf(buf, sizeof(buf), "%x", sf_format);
                  return std::string(buf);
                }() +
                " with " + std::to_string(info.channels) + " channels at " + std::to_string(info.samplerate) +
                " Hz is not supported by this libsndfile");
  }
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  SndfileHandle file(sf_open(path.c_str(), SFM_WRITE, &info));
  if (!file) throw Error("cannot write '" + path.string() + "': " + sf_strerror(nullptr));
  const int nc = info.channels;
  const int64_t frames = audio.frames();
  constexpr int64_t kBlock = 16384;
  std::vector<float> block(static_cast<size_t>(kBlock * nc));
  for (int64_t start = 0; start < frames; start += kBlock) {
    const int64_t n = std::min(kBlock, frames - start);
    for (int64_t t = 0; t < n; ++t) {
      for (int c = 0; c < nc; ++c)
        block[static_cast<size_t>(t * nc + c)] =
            audio.channels[static_cast<size_t>(c)][static_cast<size_t>(start + t)];
    }
    if (sf_writef_float(file.get(), block.data(), n) != n) {
      throw Error("cannot write '" + path.string() + "': " + sf_strerror(file.get()));
    }
  }
}

}  // namespace rt
