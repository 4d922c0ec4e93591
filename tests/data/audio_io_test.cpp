#include "data/audio_io.h"

#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <fstream>
#include <iostream>

#include "support/test_support.h"

namespace rt {
namespace {

AudioData sine(double freq, int sr, double seconds, int channels = 1, double amp = 0.5) {
  AudioData a;
  a.sample_rate = sr;
  const size_t n = static_cast<size_t>(std::llround(seconds * sr));
  for (int c = 0; c < channels; ++c) {
    std::vector<float> ch(n);
    for (size_t t = 0; t < n; ++t) ch[t] = static_cast<float>(amp * std::sin(2 * M_PI * freq * t / sr + c));
    a.channels.push_back(std::move(ch));
  }
  return a;
}

// Frequency from a least-squares line through the (interpolated) upward zero crossings.
double estimate_frequency(const std::vector<float>& x, int sr, size_t skip) {
  std::vector<double> times;
  for (size_t t = skip + 1; t + skip < x.size(); ++t) {
    if (x[t - 1] < 0 && x[t] >= 0) times.push_back(static_cast<double>(t - 1) + x[t - 1] / (x[t - 1] - x[t]));
  }
  const double n = static_cast<double>(times.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t k = 0; k < times.size(); ++k) {
    sx += k;
    sy += times[k];
    sxx += static_cast<double>(k) * k;
    sxy += k * times[k];
  }
  const double period = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  return sr / period;
}

double rms(const std::vector<float>& x) {
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  return std::sqrt(s / static_cast<double>(x.size()));
}

TEST(AudioIo, ResamplingKeepsA1kHzSineAt1kHz) {
  AudioData in = sine(1000.0, 48000, 2.0);
  AudioData out = resample(in, 44100);
  ASSERT_EQ(out.sample_rate, 44100);
  EXPECT_NEAR(static_cast<double>(out.frames()), 88200.0, 1.0);
  const double f = estimate_frequency(out.channels[0], 44100, 2000);
  EXPECT_NEAR(f, 1000.0, 1.0);
  EXPECT_NEAR(f, 1000.0, 0.01) << "soxr VHQ should be far better than the 1 Hz requirement";
  // Amplitude preserved away from the edges.
  std::vector<float> mid(out.channels[0].begin() + 4410, out.channels[0].end() - 4410);
  EXPECT_NEAR(rms(mid), 0.5 / std::sqrt(2.0), 0.005);
  // And the estimator itself would see a 1 Hz error.
  EXPECT_NEAR(estimate_frequency(sine(1001.0, 44100, 2.0).channels[0], 44100, 0), 1001.0, 0.01);
}

TEST(AudioIo, ChannelMappingDownmixesByAveragingAndDuplicatesMono) {
  AudioData st;
  st.sample_rate = 100;
  st.channels = {{1.0f, 0.5f}, {0.0f, -0.5f}};
  AudioData mono = map_channels(st, 1);
  ASSERT_EQ(mono.num_channels(), 1);
  EXPECT_FLOAT_EQ(mono.channels[0][0], 0.5f);
  EXPECT_FLOAT_EQ(mono.channels[0][1], 0.0f);
  AudioData up = map_channels(mono, 2);
  ASSERT_EQ(up.num_channels(), 2);
  EXPECT_EQ(up.channels[0], up.channels[1]);
}

TEST(AudioIo, Int16ConversionRoundsAndClips) {
  EXPECT_EQ(float_to_int16(0.5f), 16384);
  EXPECT_EQ(float_to_int16(1.5f), 32767);
  EXPECT_EQ(float_to_int16(-1.0f), -32768);
  EXPECT_EQ(float_to_int16(-2.0f), -32768);
}

// Format quirks of libsndfile 1.2.0 found by this test (checked by hand):
//  - SDS 16-bit writes corrupt samples (max error ~0.3); its 24-bit subtype round-trips.
//  - WVE (Psion) is A-law at a fixed 8 kHz whatever rate is asked for.
//  - HTK and SDS store the sample period (100 ns / 1 ns units), so the rate read back is rounded.
bool rate_is_rounded(int major) { return major == SF_FORMAT_HTK || major == SF_FORMAT_SDS; }

// Picks a subtype libsndfile accepts for a major format, preferring lossless PCM.
bool pick_format(int major, int& format, int& sr, bool& lossy) {
  if (major == SF_FORMAT_SDS) {
    format = major | SF_FORMAT_PCM_24;
    sr = 44100;
    lossy = false;
    return true;
  }
  if (major == SF_FORMAT_WVE) {
    format = major | SF_FORMAT_ALAW;
    sr = 8000;
    lossy = true;
    return true;
  }
  const int subtypes[] = {SF_FORMAT_PCM_16, SF_FORMAT_PCM_24,    SF_FORMAT_FLOAT, SF_FORMAT_PCM_S8,
                          SF_FORMAT_PCM_U8, SF_FORMAT_VORBIS,    SF_FORMAT_OPUS,  SF_FORMAT_MPEG_LAYER_III,
                          SF_FORMAT_GSM610, SF_FORMAT_IMA_ADPCM, SF_FORMAT_ULAW,  SF_FORMAT_ALAW};
  for (int rate : {44100, 48000, 8000}) {
    for (int sub : subtypes) {
      SF_INFO info{};
      info.samplerate = rate;
      info.channels = 1;
      info.format = major | sub;
      if (sf_format_check(&info)) {
        format = major | sub;
        sr = rate;
        lossy = !(sub == SF_FORMAT_PCM_16 || sub == SF_FORMAT_PCM_24 || sub == SF_FORMAT_FLOAT);
        return true;
      }
    }
  }
  return false;
}

TEST(AudioIo, EveryMajorFormatOfThisLibsndfileRoundTrips) {
  testing::ScratchDir dir;
  int count = 0;
  sf_command(nullptr, SFC_GET_FORMAT_MAJOR_COUNT, &count, sizeof(int));
  ASSERT_GT(count, 0);
  std::vector<std::string> tested, skipped;
  for (int i = 0; i < count; ++i) {
    SF_FORMAT_INFO fi{};
    fi.format = i;
    sf_command(nullptr, SFC_GET_FORMAT_MAJOR, &fi, sizeof(fi));
    const std::string name = std::string(fi.name) + " (." + fi.extension + ")";
    if (fi.format == SF_FORMAT_RAW) {
      skipped.push_back(name + ": headerless, needs the format given on read");
      continue;
    }
    int format = 0, sr = 0;
    bool lossy = false;
    if (!pick_format(fi.format, format, sr, lossy)) {
      skipped.push_back(name +
                        ": needs a special subtype/rate (none of PCM/float/Vorbis/Opus/MP3/GSM/ADPCM/law at "
                        "8-48 kHz mono)");
      continue;
    }
    const auto path = dir / ("probe_" + std::to_string(i) + "." + fi.extension);
    AudioData in = sine(440.0, sr, 1.0, 1, 0.5);
    write_audio_file(path, in, format);
    AudioData out = decode_audio_file(path);
    SCOPED_TRACE(name);
    if (rate_is_rounded(fi.format)) {
      EXPECT_NEAR(out.sample_rate, sr, 0.005 * sr);
    } else {
      EXPECT_EQ(out.sample_rate, sr);
    }
    ASSERT_EQ(out.num_channels(), 1);
    if (!lossy) {
      ASSERT_EQ(out.frames(), in.frames());
      float max_err = 0;
      for (int64_t t = 0; t < in.frames(); ++t)
        max_err = std::max(max_err, std::fabs(in.channels[0][t] - out.channels[0][t]));
      EXPECT_LT(max_err, 1.0f / 16000) << name;
    } else {
      EXPECT_NEAR(static_cast<double>(out.frames()), static_cast<double>(in.frames()), 0.1 * in.frames());
      EXPECT_NEAR(rms(out.channels[0]), rms(in.channels[0]), 0.2 * rms(in.channels[0]));
      EXPECT_NEAR(estimate_frequency(out.channels[0], sr, static_cast<size_t>(sr / 10)), 440.0, 2.0);
    }
    tested.push_back(name);
  }
  std::cout << "[ formats ] round-tripped " << tested.size() << ":";
  for (const auto& t : tested) std::cout << " " << t << ";";
  std::cout << "\n[ formats ] skipped " << skipped.size() << ":\n";
  for (const auto& s : skipped) std::cout << "   " << s << "\n";
  auto has = [&](const std::string& s) {
    return std::any_of(tested.begin(), tested.end(),
                       [&](const std::string& t) { return t.find(s) != std::string::npos; });
  };
  EXPECT_TRUE(has("WAV"));
  EXPECT_TRUE(has("AIFF"));
  EXPECT_TRUE(has("FLAC"));
  EXPECT_TRUE(has("OGG"));
}

TEST(AudioIo, StereoWav24AndFlacKeepChannelsApart) {
  testing::ScratchDir dir;
  AudioData in = sine(300.0, 32000, 0.25, 2);
  for (const char* fmt : {"wav24", "flac24", "aiff16"}) {
    write_audio_file(dir / (std::string("s.") + fmt), in, audio_format_from_name(fmt));
    AudioData out = decode_audio_file(dir / (std::string("s.") + fmt));
    ASSERT_EQ(out.num_channels(), 2) << fmt;
    EXPECT_NEAR(out.channels[1][100], in.channels[1][100], 1e-4) << fmt;
    EXPECT_NEAR(out.channels[0][100], in.channels[0][100], 1e-4) << fmt;
  }
}

TEST(AudioIo, OpusAndMp3DecodeWhenThisLibsndfileHasThem) {
  testing::ScratchDir dir;
  int checked = 0;
  for (const char* fmt : {"opus", "mp3"}) {
    AudioData in = sine(440.0, 48000, 1.0, 2);
    SF_INFO info{};
    info.samplerate = 48000;
    info.channels = 2;
    info.format = audio_format_from_name(fmt);
    if (!sf_format_check(&info)) {
      std::cout << "[ formats ] " << fmt << " not supported by this libsndfile; skipped\n";
      continue;
    }
    const auto path = dir / (std::string("x.") + fmt);
    write_audio_file(path, in, info.format);
    AudioData out = decode_audio_file(path);
    EXPECT_EQ(out.sample_rate, 48000) << fmt;
    ASSERT_EQ(out.num_channels(), 2) << fmt;
    EXPECT_NEAR(estimate_frequency(out.channels[1], 48000, 4800), 440.0, 2.0) << fmt;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(AudioIo, UndecodableFilesAreReportedWithPathAndReason) {
  testing::ScratchDir dir;
  { std::ofstream(dir / "empty.wav"); }
  { std::ofstream(dir / "notes.wav") << "these are not the samples you are looking for\n"; }
  for (const char* name : {"empty.wav", "notes.wav"}) {
    try {
      decode_audio_file(dir / name);
      FAIL() << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(audio_format_from_name("wma"), Error);
}

}  // namespace
}  // namespace rt
