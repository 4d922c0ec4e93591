#include "data/audio_io.h"

#include <sndfile.h>
#include <soxr.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace rt {
namespace {

struct SndfileCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndfileHandle = std::unique_ptr<SNDFILE, SndfileCloser>;

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
  if (info.frames > 0 && info.frames < (int64_t{1} << 34)) {
    for (auto& c : audio.channels) c.reserve(static_cast<size_t>(info.frames));
  }
  constexpr sf_count_t kBlock = 16384;
  std::vector<float> block(static_cast<size_t>(kBlock * nc));
  for (;;) {
    sf_count_t got = sf_readf_float(file.get(), block.data(), kBlock);
    if (got <= 0) break;
    for (sf_count_t t = 0; t < got; ++t) {
      for (int c = 0; c < nc; ++c) audio.channels[static_cast<size_t>(c)].push_back(block[static_cast<size_t>(t * nc + c)]);
    }
  }
  if (audio.frames() == 0) throw Error("cannot decode '" + path.string() + "': it holds no audio frames");
  return audio;
}

std::vector<float> resample_channel(const std::vector<float>& in, double in_rate, double out_rate) {
  if (in_rate == out_rate || in.empty()) return in;
  const size_t out_len = static_cast<size_t>(std::llround(static_cast<double>(in.size()) * out_rate / in_rate));
  std::vector<float> out(out_len);
  size_t done = 0;
  soxr_quality_spec_t quality = soxr_quality_spec(SOXR_VHQ, 0);
  soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  soxr_error_t err = soxr_oneshot(in_rate, out_rate, 1, in.data(), in.size(), nullptr, out.data(),
                                  out.size(), &done, &io, &quality, nullptr);
  if (err != nullptr) {
    throw Error("soxr resampling " + std::to_string(in_rate) + " Hz -> " + std::to_string(out_rate) +
                " Hz failed: " + err);
  }
  out.resize(done);
  return out;
}

AudioData resample(const AudioData& audio, int out_rate) {
  if (audio.sample_rate == out_rate) return audio;
  AudioData out;
  out.sample_rate = out_rate;
  for (const auto& c : audio.channels) out.channels.push_back(resample_channel(c, audio.sample_rate, out_rate));
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
    for (int c = 0; c < channels; ++c) out.channels[static_cast<size_t>(c)] = audio.channels[static_cast<size_t>(c % in)];
  }
  return out;
}

AudioData load_audio(const std::filesystem::path& path, int sample_rate, int channels) {
  AudioData audio = decode_audio_file(path);
  if (audio.num_channels() > channels) audio = map_channels(audio, channels);
  audio = resample(audio, sample_rate);
  if (audio.num_channels() != channels) audio = map_channels(audio, channels);
  return audio;
}

int16_t float_to_int16(float x) {
  const float scaled = std::nearbyint(x * 32768.0f);
  return static_cast<int16_t>(std::clamp(scaled, -32768.0f, 32767.0f));
}

int audio_format_from_name(const std::string& name) {
  static const std::vector<std::pair<std::string, int>> kFormats = {
      {"wav16", SF_FORMAT_WAV | SF_FORMAT_PCM_16},    {"wav24", SF_FORMAT_WAV | SF_FORMAT_PCM_24},
      {"wavf32", SF_FORMAT_WAV | SF_FORMAT_FLOAT},    {"flac16", SF_FORMAT_FLAC | SF_FORMAT_PCM_16},
      {"flac24", SF_FORMAT_FLAC | SF_FORMAT_PCM_24},  {"ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS},
      {"aiff16", SF_FORMAT_AIFF | SF_FORMAT_PCM_16},  {"aiff24", SF_FORMAT_AIFF | SF_FORMAT_PCM_24},
      {"opus", SF_FORMAT_OGG | SF_FORMAT_OPUS},       {"mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III},
  };
  std::string names;
  for (const auto& [n, f] : kFormats) {
    if (n == name) return f;
    names += (names.empty() ? "" : ", ") + n;
  }
  throw Error("unknown audio format '" + name + "' (accepted: " + names + ")");
}

void write_audio_file(const std::filesystem::path& path, const AudioData& audio, int sf_format) {
  SF_INFO info{};
  info.samplerate = audio.sample_rate;
  info.channels = audio.num_channels();
  info.format = sf_format;
  if (info.channels < 1) throw Error("cannot write '" + path.string() + "': no channels");
  if (!sf_format_check(&info)) {
    throw Error("cannot write '" + path.string() + "': format 0x" + [&] {
      char buf[16];
      std::snprintf(buf, sizeof(buf), "%x", sf_format);
      return std::string(buf);
    }() + " with " + std::to_string(info.channels) + " channels at " + std::to_string(info.samplerate) +
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
      for (int c = 0; c < nc; ++c) block[static_cast<size_t>(t * nc + c)] = audio.channels[static_cast<size_t>(c)][static_cast<size_t>(start + t)];
    }
    if (sf_writef_float(file.get(), block.data(), n) != n) {
      throw Error("cannot write '" + path.string() + "': " + sf_strerror(file.get()));
    }
  }
}

}  // namespace rt
