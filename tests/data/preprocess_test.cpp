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
#include "data/loader.h"
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
  for (const char* broken : {"empty.wav: empty file", "truncated.flac", "short.wav: too short"}) {
    EXPECT_NE(r.output.find(broken), std::string::npos) << broken << "\n" << r.output;
  }
  // notes.txt is of none of RAVE's --ext extensions: counted, not read.
  EXPECT_EQ(r.output.find("notes.txt"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 file(s) in the folders are of none of --ext's extensions"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("skipped 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("files 11/11"), std::string::npos) << r.output;

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

// RAVE's --ext: a folder is searched for aif aiff wav opus mp3 aac flac ogg in any case; mp3 and
// Ogg Opus are decoded (libsndfile: mpg123, libopus) into the same chunks as their source within
// the codecs' loss; AAC is refused by name; a file named directly is read whatever its extension;
// --ext narrows the search and refuses what is no extension.
TEST(Preprocess, ExtensionsAreRavesAndMp3AndOpusAreRead) {
  testing::ScratchDir dir("rt_pre_ext");
  AudioData tone;
  tone.sample_rate = 48000;
  tone.channels = {std::vector<float>(48000)};
  for (size_t t = 0; t < tone.channels[0].size(); ++t)
    tone.channels[0][t] =
        0.4f * static_cast<float>(std::sin(2.0 * M_PI * 440.0 * static_cast<double>(t) / 48000.0));
  std::filesystem::create_directories(dir / "in" / "sub");
  write_audio_file(dir / "in" / "tone.mp3", tone, audio_format_from_name("mp3"));
  write_audio_file(dir / "in" / "sub" / "TONE.OPUS", tone, audio_format_from_name("opus"));
  write_audio_file(dir / "in" / "tone.wav", tone, audio_format_from_name("wav16"));
  write_audio_file(dir / "in" / "tone.caf.wav.bak", tone, audio_format_from_name("wav16"));  // not searched
  std::filesystem::copy_file(dir / "in" / "tone.wav", dir / "in" / "renamed.aac");
  std::filesystem::copy_file(dir / "in" / "tone.wav", dir / "named.dat");

  const std::string common = " --num_signal 4096 --sampling_rate 48000 --output_path ";
  auto r = run_command(bin_path("preprocess") + " --input_path " + q(dir / "in") + " --input_path " +
                       q(dir / "named.dat") + common + q(dir / "db"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("renamed.aac: AAC is not read: libsndfile"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 file(s) in the folders are of none of --ext's extensions"), std::string::npos)
      << r.output;
  // tone.mp3, TONE.OPUS, tone.wav and named.dat: 5 chunks of 8192 samples each.
  EXPECT_NE(r.output.find("wrote 20 chunks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("from 4 of 5 files"), std::string::npos) << r.output;

  // The lossy files hold the tone: each chunk within the codec's loss of the wav's.
  AudioDataset db(dir / "db", AudioDatasetOptions{});
  ASSERT_EQ(db.size(), 20u);
  // Sorted: in/renamed.aac (refused), in/sub/TONE.OPUS, in/tone.mp3, in/tone.wav, named.dat.
  const auto wav = db.record(10);
  EXPECT_TRUE(torch::equal(db.record(15), wav)) << "tone.wav and named.dat are one file";
  for (size_t mp3 = 5; mp3 < 10; ++mp3) {
    const double energy = db.record(mp3).pow(2).mean().item<double>();
    EXPECT_NEAR(energy, 0.08, 0.02) << "mp3 chunk " << mp3;  // the encoder's delay: silence first
  }
  for (size_t opus = 0; opus < 5; ++opus) {
    const double energy = db.record(opus).pow(2).mean().item<double>();
    EXPECT_NEAR(energy, 0.08, 0.02) << "opus chunk " << opus;
  }

  auto narrow = run_command(bin_path("preprocess") + " --input_path " + q(dir / "in") + " --ext .WAV" +
                            common + q(dir / "db_wav"));
  ASSERT_EQ(narrow.exit_code, 0) << narrow.output;
  EXPECT_NE(narrow.output.find("wrote 5 chunks"), std::string::npos) << narrow.output;
  EXPECT_NE(narrow.output.find("4 file(s) in the folders are of none of --ext's extensions (wav)"),
            std::string::npos)
      << narrow.output;
  for (const char* bad : {"'w/v'", "''", "'wa v'"}) {
    auto refused = run_command(bin_path("preprocess") + " --input_path " + q(dir / "in") + " --ext " + bad +
                               common + q(dir / "db_bad"));
    EXPECT_EQ(refused.exit_code, 1) << bad << "\n" << refused.output;
    EXPECT_NE(refused.output.find("--ext"), std::string::npos) << refused.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "db_bad")) << bad;
  }
}

// preprocess --lazy (RAVE's): one reference per file, decoded when a chunk is drawn. On a folder
// of every kind (rates resampled, stereo downmixed, nested, broken files skipped alike) the
// lazy database holds the eager one's chunks bit for bit, so the loader gives the same batches
// for the same seed; inspect says which kind a database is; a file changed since is refused
// naming it, by the loader and by inspect.
TEST(Preprocess, ALazyDatabaseTrainsExactlyAsTheEagerOne) {
  MixedFolder f;
  const std::string common =
      " --input_path " + q(f.dir / "in") + " --num_signal " + std::to_string(kNumSignal);
  auto eager = run_command(bin_path("preprocess") + common + " --output_path " + q(f.dir / "eager"));
  ASSERT_EQ(eager.exit_code, 0) << eager.output;
  auto lazy = run_command(bin_path("preprocess") + common + " --lazy --output_path " + q(f.dir / "lazy"));
  ASSERT_EQ(lazy.exit_code, 0) << lazy.output;
  EXPECT_NE(lazy.output.find("lazy file references"), std::string::npos) << lazy.output;

  AudioDatasetOptions options;
  options.n_signal = kNumSignal;
  auto e = std::make_shared<AudioDataset>(f.dir / "eager", options);
  auto l = std::make_shared<AudioDataset>(f.dir / "lazy", options);
  EXPECT_FALSE(e->lazy());
  EXPECT_TRUE(l->lazy());
  ASSERT_EQ(l->size(), e->size());
  ASSERT_GT(e->size(), 20u);
  for (size_t i = 0; i < e->size(); ++i) ASSERT_TRUE(torch::equal(l->record(i), e->record(i))) << l->key(i);
  EXPECT_EQ(read_db_metadata(f.dir / "lazy")->n_seconds, read_db_metadata(f.dir / "eager")->n_seconds);
  LmdbStore lazy_store(f.dir / "lazy", LmdbStore::Mode::kReadOnly);
  EXPECT_EQ(lazy_store.count(), f.good.size()) << "one record per file";

  LoaderOptions o;
  o.batch = 4;
  o.workers = 2;
  o.seed = 11;
  Loader from_eager(e, o), from_lazy(l, o);
  for (int b = 0; b < 6; ++b) {
    const auto x = from_eager.next(), y = from_lazy.next();
    ASSERT_TRUE(x && y);
    EXPECT_TRUE(torch::equal(x->input, y->input)) << "batch " << b;
  }

  auto ins = run_command(bin_path("preprocess") + " --inspect " + q(f.dir / "lazy"));
  ASSERT_EQ(ins.exit_code, 0) << ins.output;
  EXPECT_NE(ins.output.find("kind: lazy"), std::string::npos) << ins.output;
  EXPECT_NEAR(
      inspected_seconds(ins.output),
      inspected_seconds(run_command(bin_path("preprocess") + " --inspect " + q(f.dir / "eager")).output),
      1e-3);
  EXPECT_NE(
      run_command(bin_path("preprocess") + " --inspect " + q(f.dir / "eager")).output.find("kind: eager"),
      std::string::npos);

  // A source file changed since: refused by name, by the loader and by inspect.
  const auto changed = f.dir / "in" / f.good.front().path;
  std::ofstream(changed, std::ios::app | std::ios::binary) << "x";
  try {
    AudioDataset again(f.dir / "lazy", AudioDatasetOptions{});
    for (size_t i = 0; i < again.size(); ++i) again.record(i);
    FAIL() << "a changed file was read";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("changed since `preprocess --lazy` read it"), std::string::npos)
        << err.what();
  }
  auto bad = run_command(bin_path("preprocess") + " --inspect " + q(f.dir / "lazy"));
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("changed since preprocess --lazy read it"), std::string::npos) << bad.output;
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
  EXPECT_NE(r.output.find("1 file(s) in the folders are of none of --ext's extensions"), std::string::npos)
      << r.output;
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
