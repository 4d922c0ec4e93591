#include "data/audio_example.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

namespace rt {
namespace {

std::vector<int16_t> ramp(int channels, int64_t length) {
  std::vector<int16_t> v(static_cast<size_t>(channels * length));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<int16_t>((static_cast<int>(i) * 397) % 65536 - 32768);
  return v;
}

TEST(AudioExample, WaveformIsStoredAsRaveWritesIt) {
  const int channels = 3;
  const int64_t length = 5;
  auto samples = ramp(channels, length);
  AudioExample ex = parse_example(encode_waveform(samples.data(), channels, length, 22050), "k");
  const auto& buf = ex.buffers().at("waveform");
  EXPECT_EQ(buf.precision(), AudioExample::INT16);
  EXPECT_EQ(buf.sampling_rate(), 22050);
  ASSERT_EQ(buf.shape_size(), 2);
  EXPECT_EQ(buf.shape(0), channels);
  EXPECT_EQ(buf.shape(1), length * 2);  // RAVE: bytes / channels.
  ASSERT_EQ(buf.data().size(), samples.size() * 2);
  // Little-endian int16, channel-major.
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto lo = static_cast<uint8_t>(buf.data()[2 * i]);
    const auto hi = static_cast<uint8_t>(buf.data()[2 * i + 1]);
    EXPECT_EQ(static_cast<int16_t>(lo | (hi << 8)), samples[i]) << i;
  }
}

TEST(AudioExample, MultiChannelWaveformRoundTrips) {
  auto samples = ramp(2, 1000);
  Waveform w = decode_waveform(encode_waveform(samples.data(), 2, 1000, 44100), "00000007", 2);
  EXPECT_EQ(w.channels, 2);
  EXPECT_EQ(w.length, 1000);
  EXPECT_EQ(w.sampling_rate, 44100);
  EXPECT_EQ(w.samples, samples);
  auto t = waveform_to_tensor(w);
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{2, 1000}));
  EXPECT_FLOAT_EQ(t[1][3].item<float>(), samples[1003] / 32767.0f);
}

TEST(AudioExample, ShapeFieldIsIgnoredOnRead) {
  auto samples = ramp(2, 64);
  AudioExample ex;
  put_waveform(ex, samples.data(), 2, 64, 16000);
  auto& buf = (*ex.mutable_buffers())["waveform"];
  buf.clear_shape();
  buf.add_shape(7);
  buf.add_shape(3);
  Waveform w = get_waveform(ex, "k", 2);
  EXPECT_EQ(w.channels, 2);
  EXPECT_EQ(w.length, 64);
  // Without a channel count, shape[0] is the only hint left.
  buf.clear_shape();
  buf.add_shape(2);
  buf.add_shape(128);
  EXPECT_EQ(get_waveform(ex, "k", 0).length, 64);
}

TEST(AudioExample, TensorToWaveformScaleIsRaves) {
  int16_t s[3] = {32767, -32767, 0};
  auto t = waveform_to_tensor(decode_waveform(encode_waveform(s, 1, 3, 8000), "k", 1));
  EXPECT_FLOAT_EQ(t[0][0].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(t[0][1].item<float>(), -1.0f);
}

void expect_error_naming(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL() << "no error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(AudioExample, DecodeErrorsNameTheKey) {
  AudioExample no_wave;
  put_float_buffer(no_wave, "spikes", torch::zeros({2, 2}));
  expect_error_naming([&] { get_waveform(no_wave, "00000042", 1); }, {"00000042", "waveform", "spikes"});

  int16_t s[4] = {1, 2, 3, 4};
  AudioExample bad_precision;
  put_waveform(bad_precision, s, 1, 4, 8000);
  (*bad_precision.mutable_buffers())["waveform"].set_precision(AudioExample::FLOAT32);
  expect_error_naming([&] { get_waveform(bad_precision, "00000043", 1); }, {"00000043", "FLOAT32", "INT16"});

  AudioExample odd;
  put_waveform(odd, s, 1, 4, 8000);
  (*odd.mutable_buffers())["waveform"].mutable_data()->push_back('x');
  expect_error_naming([&] { get_waveform(odd, "00000044", 1); }, {"00000044", "odd"});

  AudioExample three;
  int16_t s3[3] = {1, 2, 3};
  put_waveform(three, s3, 1, 3, 8000);
  expect_error_naming([&] { get_waveform(three, "00000045", 2); }, {"00000045", "2 channels"});

  expect_error_naming([&] { parse_example(std::string("\xff\xff\xff\xff garbage", 12), "00000046"); },
                      {"00000046", "not a valid AudioExample"});
}

TEST(AudioExample, FloatBuffersKeepTheirShapeAndMetadata) {
  auto spikes = torch::arange(0, 24, torch::kFloat32).reshape({6, 4}) * 0.5;
  auto behavior = torch::randn({6, 2});
  AudioExample ex;
  put_float_buffer(ex, "spikes", spikes);
  put_float_buffer(ex, "behavior", behavior.t().t());  // Non-contiguous views are fine.
  set_metadata(ex, "group", "mc_maze/jenkins/center_out");
  set_metadata(ex, "bin_ms", "5");
  AudioExample back = parse_example(serialize_example(ex), "00000001");
  EXPECT_TRUE(torch::equal(get_float_buffer(back, "spikes", "00000001"), spikes));
  EXPECT_TRUE(torch::equal(get_float_buffer(back, "behavior", "00000001"), behavior));
  EXPECT_EQ(back.buffers().at("spikes").precision(), AudioExample::FLOAT32);
  EXPECT_EQ(get_metadata(back, "group").value(), "mc_maze/jenkins/center_out");
  EXPECT_EQ(get_metadata(back, "bin_ms").value(), "5");
  EXPECT_FALSE(get_metadata(back, "missing").has_value());

  (*back.mutable_buffers())["spikes"].add_shape(2);
  expect_error_naming([&] { get_float_buffer(back, "spikes", "00000001"); }, {"00000001", "spikes", "shape"});
  expect_error_naming([&] { put_float_buffer(ex, "x", torch::zeros({2}, torch::kInt64)); }, {"x", "float32"});
}

}  // namespace
}  // namespace rt
