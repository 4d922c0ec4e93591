#include "data/preprocess.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "data/audio_dataset.h"
#include "data/audio_io.h"
#include "data/db_metadata.h"
#include "data/demo_audio.h"
#include "data/lmdb_store.h"
#include "data_fixtures.h"
#include "support/test_support.h"

namespace rt {
namespace {

using testing::bin_path;
using testing::run_command;

std::string q(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

double inspected_seconds(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(R"(total duration: \d+:\d\d:\d\d \(([0-9.]+) s\))")))
    return -1;
  return std::stod(m[1]);
}

// A folder like a user's: the demo files (wav 16/24, flac, ogg, aiff; mono/stereo; 16-48 kHz;
// nested) plus broken ones.
struct MixedFolder {
  testing::ScratchDir dir{"rt_pre"};
  std::vector<DemoFile> good;
  MixedFolder() {
    good = generate_demo_audio(dir / "in", 1.5, 7);
    std::filesystem::create_directories(dir / "in" / "nested");
    std::filesystem::create_directories(dir / "in" / "broken");
    { std::ofstream(dir / "in" / "empty.wav"); }
    { std::ofstream(dir / "in" / "nested" / "notes.txt") << "not audio at all, just text\n"; }
    // A FLAC cut off inside its header.
    const std::string flac = read_bytes(dir / "in" / "chirps" / "chirp_32k_mono.flac");
    std::ofstream(dir / "in" / "broken" / "truncated.flac", std::ios::binary) << flac.substr(0, 60);
    AudioData tiny;
    tiny.sample_rate = 44100;
    tiny.channels = {std::vector<float>(2000, 0.1f)};
    write_audio_file(dir / "in" / "short.wav", tiny, audio_format_from_name("wav16"));
  }
  static std::string read_bytes(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
  }
};

constexpr int64_t kNumSignal = 4096;  // Chunks of 8192 samples (0.19 s at 44.1 kHz).

TEST(Preprocess, MixedRealFolderFinishesReportsBrokenFilesAndInspectShowsTheDuration) {
  MixedFolder f;
  auto r = run_command(bin_path("preprocess") + " --input_path " + q(f.dir / "in") + " --output_path " +
                       q(f.dir / "db") + " --num_signal " + std::to_string(kNumSignal) + " --workers 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* broken : {"empty.wav: empty file", "notes.txt: not readable as audio", "truncated.flac",
                             "short.wav: too short"}) {
    EXPECT_NE(r.output.find(broken), std::string::npos) << broken << "\n" << r.output;
  }
  EXPECT_NE(r.output.find("skipped 4"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("files 12/12"), std::string::npos) << r.output;

  double expected = 0;
  for (const auto& g : f.good) expected += g.seconds;
  const double chunk_s = 2.0 * kNumSignal / 44100.0;
  auto ins = run_command(bin_path("preprocess") + " --inspect " + q(f.dir / "db"));
  ASSERT_EQ(ins.exit_code, 0) << ins.output;
  const double seconds = inspected_seconds(ins.output);
  EXPECT_LE(seconds, expected + 1e-6) << ins.output;
  EXPECT_GE(seconds, expected - chunk_s * static_cast<double>(f.good.size())) << ins.output;
  EXPECT_NE(ins.output.find("sampling rate: 44100 Hz"), std::string::npos) << ins.output;
  EXPECT_NE(ins.output.find("channels: 1"), std::string::npos);
  EXPECT_NE(ins.output.find("waveform: INT16, shape [1, 16384]"), std::string::npos) << ins.output;

  auto meta = read_db_metadata(f.dir / "db");
  ASSERT_TRUE(meta.has_value());
  EXPECT_NEAR(meta->n_seconds, seconds, 1e-3);
  EXPECT_EQ(meta->sr, 44100);
  LmdbStore store(f.dir / "db", LmdbStore::Mode::kReadOnly);
  EXPECT_NEAR(static_cast<double>(store.count()) * chunk_s, seconds, 1e-3);
  EXPECT_TRUE(store.get(LmdbStore::key_for_index(store.count() - 1)).has_value());
}

TEST(Preprocess, KeysDoNotDependOnTheNumberOfWorkers) {
  MixedFolder f;
  for (const char* w : {"1", "3"}) {
    auto r = run_command(bin_path("preprocess") + " --input_path " + q(f.dir / "in") + " --output_path " +
                         q(f.dir / (std::string("db") + w)) +
                         " --num_signal 4096 --channels 2 --sampling_rate 22050 --workers " + w);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  LmdbStore a(f.dir / "db1", LmdbStore::Mode::kReadOnly), b(f.dir / "db3", LmdbStore::Mode::kReadOnly);
  ASSERT_EQ(a.count(), b.count());
  ASSERT_GT(a.count(), 5u);
  a.for_each([&](std::string_view k, std::string_view v) {
    EXPECT_EQ(b.get(k).value(), std::string(v)) << k;
    return true;
  });
  AudioDataset ds(f.dir / "db3", {});
  EXPECT_EQ(ds.channels(), 2);
  EXPECT_EQ(ds.sampling_rate(), 22050);
}

TEST(Preprocess, MapFullStopsWithAConsistentDatabaseAndMetadata) {
  MixedFolder f;
  // ~1.2 MB holds a few 32 KB chunks but far from all of them.
  auto r = run_command(bin_path("preprocess") + " --input_path " + q(f.dir / "in") + " --output_path " +
                       q(f.dir / "db") + " --num_signal 8192 --max_db_size 0.0004 --workers 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--max_db_size"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reached"), std::string::npos) << r.output;
  auto meta = read_db_metadata(f.dir / "db");
  ASSERT_TRUE(meta.has_value()) << "metadata.yaml must exist after a full map";
  LmdbStore store(f.dir / "db", LmdbStore::Mode::kReadOnly);
  ASSERT_GT(store.count(), 0u);
  EXPECT_NEAR(meta->n_seconds, static_cast<double>(store.count()) * 16384 / 44100.0, 1e-6);
  // Keys are contiguous from 0.
  for (size_t i = 0; i < store.count(); ++i)
    EXPECT_TRUE(store.get(LmdbStore::key_for_index(i)).has_value()) << i;
  auto ins = run_command(bin_path("preprocess") + " --inspect " + q(f.dir / "db"));
  EXPECT_EQ(ins.exit_code, 0) << ins.output;
  // And the full-size run stores more.
  auto full = run_command(bin_path("preprocess") + " --input_path " + q(f.dir / "in") + " --output_path " +
                          q(f.dir / "db_big") + " --num_signal 8192");
  ASSERT_EQ(full.exit_code, 0);
  EXPECT_GT(LmdbStore(f.dir / "db_big", LmdbStore::Mode::kReadOnly).count(), store.count());
}

TEST(Preprocess, NothingWrittenExitsOneAndKindIsRestricted) {
  testing::ScratchDir dir;
  std::filesystem::create_directories(dir / "in");
  { std::ofstream(dir / "in" / "a.txt") << "text"; }
  auto r = run_command(bin_path("preprocess") + " --input_path " + q(dir / "in") + " " +
                       q(dir / "missing.wav") + " --output_path " + q(dir / "db"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("a.txt"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("missing.wav: does not exist"), std::string::npos) << r.output;
  auto k = run_command(bin_path("preprocess") + " --kind video --input_path " + q(dir / "in") +
                       " --output_path " + q(dir / "db2"));
  EXPECT_NE(k.exit_code, 0);
  EXPECT_NE(k.output.find("--kind"), std::string::npos) << k.output;
}

TEST(Preprocess, InspectListsCorruptRecordsAndExitsOne) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 3, 2, 1000);
  {
    LmdbStore store(dir / "db", LmdbStore::Mode::kReadWrite);
    LmdbStore::Writer w(store);
    w.put("00000001", "\x0a\x05garbage-bytes");
    w.commit();
  }
  auto r = run_command(bin_path("preprocess") + " --inspect " + q(dir / "db"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("00000001"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("00000002:"), std::string::npos) << r.output;
}

TEST(Preprocess, RaveStyleDatabaseInspectsCorrectly) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 4, 2, 44100, 44100);
  std::ostringstream out;
  EXPECT_TRUE(inspect_database(dir / "db", out).empty()) << out.str();
  EXPECT_NEAR(inspected_seconds(out.str()), 4.0, 1e-9) << out.str();
  EXPECT_NE(out.str().find("entries: 4"), std::string::npos);
  EXPECT_NE(out.str().find("channels: 2"), std::string::npos);
}

TEST(Preprocess, GenerateDemoWritesADeterministicMixedFolder) {
  testing::ScratchDir dir;
  auto r = run_command(bin_path("preprocess") + " --generate_demo " + q(dir / "a") +
                       " --demo_seconds 0.5 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  generate_demo_audio(dir / "b", 0.5, 3);
  generate_demo_audio(dir / "c", 0.5, 4);
  std::set<std::string> exts;
  int stereo = 0, nested = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir / "a")) {
    if (!e.is_regular_file()) continue;
    const auto rel = std::filesystem::relative(e.path(), dir / "a");
    exts.insert(e.path().extension().string());
    AudioData x = decode_audio_file(e.path()), y = decode_audio_file(dir / "b" / rel),
              z = decode_audio_file(dir / "c" / rel);
    EXPECT_EQ(x.channels, y.channels) << rel;
    EXPECT_NE(x.channels, z.channels) << rel;
    stereo += x.num_channels() == 2;
    nested += std::distance(rel.begin(), rel.end()) > 2;
  }
  EXPECT_EQ(exts, (std::set<std::string>{".wav", ".flac", ".ogg", ".aiff"}));
  EXPECT_GT(stereo, 0);
  EXPECT_GT(nested, 0);
}

}  // namespace
}  // namespace rt
