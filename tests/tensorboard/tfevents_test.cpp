#include "tensorboard/tfevents.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "tensorboard/tensorboard_writer.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace {

namespace fs = std::filesystem;

uint32_t le32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

uint32_t crc_of(const std::string& s) { return crc32c(s.data(), s.size()); }

fs::path only_events_file(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir)) found.push_back(e.path());
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? fs::path() : found[0];
}

TEST(Crc32c, MatchesKnownVectors) {
  EXPECT_EQ(crc_of("123456789"), 0xE3069283u);
  EXPECT_EQ(crc_of(""), 0u);
  // RFC 3720 (iSCSI) appendix B.4 vectors.
  EXPECT_EQ(crc_of(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc_of(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc_of(ascending), 0x46DD794Eu);
}

TEST(Crc32c, ExtendEqualsOneShotAtEverySplit) {
  std::string data;
  for (int i = 0; i < 41; ++i) data.push_back(static_cast<char>(i * 37 + 11));
  const uint32_t whole = crc_of(data);
  for (size_t split = 0; split <= data.size(); ++split) {
    const uint32_t first = crc32c(data.data(), split);
    EXPECT_EQ(crc32c_extend(first, data.data() + split, data.size() - split), whole) << split;
  }
}

TEST(Crc32c, MaskMatchesTensorFlowFormulaAndUnmasks) {
  EXPECT_EQ(crc32c_mask(0xE3069283u), 0xC78AB0E5u);
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x80000000u})
    EXPECT_EQ(crc32c_unmask(crc32c_mask(c)), c);
}

TEST(TfRecord, FrameHasLengthAndBothMaskedCrcs) {
  const std::string payload = "hello tensorboard";
  const std::string rec = tfrecord_frame(payload);
  ASSERT_EQ(rec.size(), 12 + payload.size() + 4);
  EXPECT_EQ(le32(rec, 0), payload.size());
  EXPECT_EQ(le32(rec, 4), 0u);
  EXPECT_EQ(le32(rec, 8), crc32c_mask(crc32c(rec.data(), 8)));
  EXPECT_EQ(rec.substr(12, payload.size()), payload);
  EXPECT_EQ(le32(rec, 12 + payload.size()), crc32c_mask(crc_of(payload)));
}

TEST(TensorBoardWriter, ScalarsAndAudioReadBackWithValidCrcs) {
  testing::ScratchDir dir;
  std::vector<float> audio;
  const int frames = 100, channels = 2, rate = 8000;
  for (int i = 0; i < frames * channels; ++i) audio.push_back(std::sin(0.1f * static_cast<float>(i)) * 1.5f);
  {
    TensorBoardWriter w(dir.path() / "run");
    w.add_scalar("loss/total", 1.25f, 0);
    w.add_scalar("loss/total", 0.5f, 10);
    w.add_scalar("throughput/samples_per_second", 4096.f, 10);
    w.add_audio("audio/reconstruction", audio.data(), frames, channels, rate, 10);
    w.add_image_png("image/spectrogram", std::string("\x89PNG fake", 9), 4, 3, 11);
    w.flush();
  }
  const fs::path file = only_events_file(dir.path() / "run");
  const std::string name = file.filename().string();
  EXPECT_TRUE(std::regex_match(name, std::regex(R"(events\.out\.tfevents\.\d{10}\.[^.]+.*\.\d+\.\d+)")))
      << name;
  EXPECT_NE(name.find("." + std::to_string(::getpid()) + "."), std::string::npos) << name;

  // Walk the framing independently of the reader: every record's CRCs must hold.
  const std::string bytes = read_file(file);
  size_t at = 0, count = 0;
  while (at < bytes.size()) {
    ASSERT_LE(at + 12, bytes.size());
    const uint64_t len = le32(bytes, at) | (uint64_t(le32(bytes, at + 4)) << 32);
    ASSERT_EQ(le32(bytes, at + 8), crc32c_mask(crc32c(bytes.data() + at, 8)));
    ASSERT_LE(at + 16 + len, bytes.size());
    ASSERT_EQ(le32(bytes, at + 12 + len), crc32c_mask(crc32c(bytes.data() + at + 12, len)));
    at += 16 + len;
    ++count;
  }
  EXPECT_EQ(count, 6u);

  const auto records = read_tfevents(file);
  ASSERT_EQ(records.size(), 6u);
  EXPECT_EQ(records[0].kind, TbRecord::Kind::FileVersion);
  EXPECT_EQ(records[0].file_version, "brain.Event:2");
  EXPECT_GT(records[0].wall_time, 1.6e9);
  EXPECT_EQ(records[0].offset, 0u);
  EXPECT_EQ(records[1].kind, TbRecord::Kind::Scalar);
  EXPECT_EQ(records[1].tag, "loss/total");
  EXPECT_EQ(records[1].step, 0);
  EXPECT_FLOAT_EQ(records[1].value, 1.25f);
  EXPECT_GT(records[1].offset, 0u);
  EXPECT_EQ(records[2].step, 10);
  EXPECT_FLOAT_EQ(records[2].value, 0.5f);
  EXPECT_EQ(records[3].tag, "throughput/samples_per_second");
  EXPECT_FLOAT_EQ(records[3].value, 4096.f);

  const TbRecord& a = records[4];
  EXPECT_EQ(a.kind, TbRecord::Kind::Audio);
  EXPECT_EQ(a.content_type, "audio/wav");
  EXPECT_EQ(a.channels, channels);
  EXPECT_EQ(a.frames, frames);
  EXPECT_FLOAT_EQ(a.sample_rate, static_cast<float>(rate));
  const std::string& wav = a.encoded;
  ASSERT_EQ(wav.size(), 44u + frames * channels * 2);
  EXPECT_EQ(wav.substr(0, 4), "RIFF");
  EXPECT_EQ(wav.substr(8, 8), "WAVEfmt ");
  EXPECT_EQ(le32(wav, 4), wav.size() - 8);
  EXPECT_EQ(le32(wav, 20) & 0xffff, 1u);               // PCM
  EXPECT_EQ(le32(wav, 20) >> 16, uint32_t(channels));  // channels
  EXPECT_EQ(le32(wav, 24), uint32_t(rate));
  EXPECT_EQ(le32(wav, 34) & 0xffff, 16u);  // bits per sample
  EXPECT_EQ(wav.substr(36, 4), "data");
  EXPECT_EQ(le32(wav, 40), uint32_t(frames * channels * 2));
  for (int i = 0; i < frames * channels; ++i) {
    const auto s = static_cast<int16_t>(le32(wav, 44 + 2 * i) & 0xffff);
    const float expected = std::fmax(-1.f, std::fmin(1.f, audio[i]));
    EXPECT_NEAR(s / 32767.f, expected, 1.0f / 32767.f) << i;
  }
  EXPECT_EQ(records[5].kind, TbRecord::Kind::Image);
  EXPECT_EQ(records[5].width, 4);
  EXPECT_EQ(records[5].height, 3);
  EXPECT_EQ(records[5].encoded, std::string("\x89PNG fake", 9));
}

TEST(TensorBoardWriter, TwoWritersInOneFolderUseDifferentFiles) {
  testing::ScratchDir dir;
  TensorBoardWriter a(dir.path());
  TensorBoardWriter b(dir.path());
  EXPECT_NE(a.file_path(), b.file_path());
  EXPECT_EQ(a.file_path().parent_path(), dir.path());
}

TEST(ReadTfevents, TruncatedLastRecordIsReportedByOffsetAndEarlierOnesRead) {
  testing::ScratchDir dir;
  fs::path file;
  {
    TensorBoardWriter w(dir.path());
    for (int i = 0; i < 3; ++i) w.add_scalar("x", static_cast<float>(i), i);
    file = w.file_path();
  }
  const auto whole = read_tfevents(file);
  ASSERT_EQ(whole.size(), 4u);
  const uint64_t last_offset = whole.back().offset;
  fs::resize_file(file, fs::file_size(file) - 5);  // a crash in the middle of the last append

  try {
    read_tfevents(file);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("byte offset " + std::to_string(last_offset)), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  }
  std::string damage;
  const auto partial = read_tfevents(file, &damage);
  ASSERT_EQ(partial.size(), 3u);
  EXPECT_FLOAT_EQ(partial[2].value, 1.f);
  EXPECT_NE(damage.find("byte offset " + std::to_string(last_offset)), std::string::npos) << damage;
}

TEST(ReadTfevents, CorruptedDataIsReportedAsBadCrcAtItsOffset) {
  testing::ScratchDir dir;
  fs::path file;
  {
    TensorBoardWriter w(dir.path());
    for (int i = 0; i < 3; ++i) w.add_scalar("x", static_cast<float>(i), i);
    file = w.file_path();
  }
  const auto whole = read_tfevents(file);
  std::string bytes = read_file(file);
  const uint64_t victim = whole[2].offset;
  bytes[victim + 14] ^= 0x40;  // inside the data of the second scalar
  write_file_atomic(file, bytes);
  std::string damage;
  const auto partial = read_tfevents(file, &damage);
  EXPECT_EQ(partial.size(), 2u);
  EXPECT_NE(damage.find("bad data CRC"), std::string::npos) << damage;
  EXPECT_NE(damage.find("byte offset " + std::to_string(victim)), std::string::npos) << damage;
  EXPECT_TRUE(read_tfevents(file, &damage).size() == 2u && !damage.empty());
}

TEST(EncodeWav, RejectsImpossibleShapes) {
  float x = 0;
  EXPECT_THROW(encode_wav_pcm16(&x, 1, 0, 44100), Error);
  EXPECT_THROW(encode_wav_pcm16(&x, -1, 1, 44100), Error);
  EXPECT_EQ(encode_wav_pcm16(&x, 0, 1, 44100).size(), 44u);
}

}  // namespace
}  // namespace rt
