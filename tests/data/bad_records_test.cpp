// Crafted and damaged databases (#15 items 2, 4, 12, 13, 14): every field of a record and of
// metadata.yaml is held to a sane range before it sizes anything; the loader and
// `preprocess --inspect` refuse the same things through one validation; long preparations stop
// on SIGINT/SIGTERM.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "audio_example.pb.h"
#include "data/audio_dataset.h"
#include "data/audio_io.h"
#include "data/db_metadata.h"
#include "data/demo_audio.h"
#include "data/lmdb_store.h"
#include "data/neural/h5_file.h"
#include "data/neural/hdf5_import.h"
#include "data/neural/neural_dataset.h"
#include "data/neural/neural_inspect.h"
#include "data/neural/neural_record.h"
#include "data/neural/synthetic_reaching.h"
#include "data/preprocess.h"
#include "data_fixtures.h"
#include "support/expect.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/signals.h"

namespace rt {
namespace {

using testing::error_of;
namespace fs = std::filesystem;

// --- Neural records --------------------------------------------------------------------------

neural::NeuralRecord good_record(int64_t T = 6, int64_t units = 3) {
  neural::NeuralRecord r;
  r.spikes = torch::ones({T, units});
  r.behavior = torch::zeros({T, 2});
  r.group = "g";
  r.bin_ms = 5;
  r.trial = 0;
  return r;
}

// `record` encoded, then one metadata field set to `value` (as a crafted file would hold it).
std::string with_metadata(const neural::NeuralRecord& record, const std::string& key,
                          const std::string& value) {
  audio_example::AudioExample ex;
  EXPECT_TRUE(ex.ParseFromString(neural::encode_neural_record(record)));
  (*ex.mutable_metadata())[key] = value;
  return ex.SerializeAsString();
}

TEST(NeuralRecordRanges, CraftedFieldsAreRefusedNamingTheKeyAndField) {
  const auto good = good_record();
  // 1e-7 once made the smoothing window 6·σ/bin_ms taps long: 18 GB, minutes deaf to SIGTERM.
  for (const std::string bad : {"1e-07", "-5", "nan", "inf", "5abc", ""}) {
    const auto msg = error_of(
        [&] { neural::decode_neural_record(with_metadata(good, "bin_ms", bad), "db key 00000007"); });
    EXPECT_HAS(msg, "db key 00000007");
    EXPECT_HAS(msg, "bin_ms = \"" + bad + "\"");
    EXPECT_HAS(msg, "must be a number in [0.1, 10000] ms");
  }
  EXPECT_HAS(
      error_of([&] { neural::decode_neural_record(with_metadata(good, "smoothing_sigma_ms", "1e9"), "k"); }),
      "smoothing_sigma_ms = \"1e9\"");
  // std::stoll once answered "error: stoll".
  const auto trial = error_of(
      [&] { neural::decode_neural_record(with_metadata(good, "trial", "seven"), "db key 00000002"); });
  EXPECT_HAS(trial, "db key 00000002: metadata trial = \"seven\": must be an integer >= 0");
  EXPECT_HAS(error_of([&] { neural::decode_neural_record(with_metadata(good, "trial", "-3"), "k"); }),
             "trial = \"-3\"");

  // Zero-length trials, no units, non-finite values.
  EXPECT_HAS(
      error_of([&] { neural::decode_neural_record(neural::encode_neural_record(good_record(0)), "k"); }),
      "zero-length trial");
  EXPECT_HAS(
      error_of([&] { neural::decode_neural_record(neural::encode_neural_record(good_record(4, 0)), "k"); }),
      "buffers[\"spikes\"] has shape [4, 0]: its units must be in [1, 100000]");
  auto nan = good_record();
  nan.behavior[2][1] = std::nanf("");
  EXPECT_HAS(error_of([&] { neural::decode_neural_record(neural::encode_neural_record(nan), "k"); }),
             "buffers[\"behavior\"] holds nan at [2, 1]; values must be finite");
  // Finite but no recording's value: 3e38 spikes once passed inspection and stopped training as
  // "non-finite loss" (its square overflows float32) without naming the record.
  auto huge = good_record();
  huge.spikes[1][2] = 3e38f;
  const auto huge_msg =
      error_of([&] { neural::decode_neural_record(neural::encode_neural_record(huge), "db key 00000004"); });
  EXPECT_HAS(huge_msg, "db key 00000004");
  EXPECT_HAS(huge_msg, "buffers[\"spikes\"] holds 3e+38 at [1, 2]; values must be finite and within ±1e9");
  auto edge = good_record();
  edge.behavior[0][0] = -1e9f;  // the bound itself is a value
  EXPECT_NO_THROW(neural::decode_neural_record(neural::encode_neural_record(edge), "k"));

  // A shape promising more than the bytes hold is "truncated", and allocates nothing.
  audio_example::AudioExample ex;
  ASSERT_TRUE(ex.ParseFromString(neural::encode_neural_record(good)));
  (*ex.mutable_buffers())["spikes"].set_shape(0, 1000000);
  EXPECT_HAS(error_of([&] { neural::decode_neural_record(ex.SerializeAsString(), "k"); }),
             "buffers[\"spikes\"] holds 72 bytes, but its shape [1000000, 3] needs 12000000 (truncated)");
  (*ex.mutable_buffers())["spikes"].set_shape(0, 2000000000);
  EXPECT_HAS(error_of([&] { neural::decode_neural_record(ex.SerializeAsString(), "k"); }),
             "its time bins must be in [1, 1000000]");
  // The good record still decodes.
  EXPECT_EQ(neural::decode_neural_record(neural::encode_neural_record(good), "k").spikes.size(0), 6);
}

// The fuzz target's contract (tests/fuzz/fuzz_neural_record.cpp): a record decode accepts is
// smoothable at σ = 20 ms with its own bin width, so nothing but rt::Error escapes, and no
// window outgrows the bounds. Before, bin_ms "0" or "-5" passed decoding and gaussian_smooth
// threw a raw c10::Error ("bin_ms must be > 0"); "1e-07" passed both and asked for 18 GB.
TEST(NeuralRecordRanges, EveryAcceptedRecordSmoothsAtTheFuzzersSigma) {
  const auto good = good_record();
  for (const std::string bad :
       {"0", "-0", "-5", "1e-07", "1e-300", "0.0999", "10000.5", "nan", "-inf", "0x"}) {
    SCOPED_TRACE("bin_ms = " + bad);
    try {
      const auto r = neural::decode_neural_record(with_metadata(good, "bin_ms", bad), "db key 00000000");
      ADD_FAILURE() << "accepted bin_ms " << r.bin_ms;
    } catch (const Error& e) {
      EXPECT_HAS(std::string(e.what()), "db key 00000000: metadata bin_ms = \"" + bad + "\"");
    }
  }
  // The accepted extremes smooth without throwing; the narrowest bin gives the widest window
  // (6·round(20 / 0.1) = 1200 taps), longer than the trial.
  for (const std::string ok : {"0.1", "5", "10000", " 5 ", "2.5e1"}) {
    SCOPED_TRACE("bin_ms = '" + ok + "'");
    const auto r = neural::decode_neural_record(with_metadata(good, "bin_ms", ok), "db key 00000000");
    torch::Tensor y;
    EXPECT_NO_THROW(y = neural::gaussian_smooth(r.spikes, 20.0, r.bin_ms));
    ASSERT_TRUE(y.defined());
    EXPECT_EQ(y.sizes(), r.spikes.sizes());
    EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
  }
  // Anything but [T, units] is an rt::Error too, not a torch check.
  EXPECT_HAS(error_of([&] { neural::gaussian_smooth(torch::ones({4}), 20.0, 5.0); }),
             "spikes must be [T, units], not [4]");
}

TEST(NeuralRecordRanges, SmoothingRefusesWindowsBeyondTheBounds) {
  const auto x = torch::ones({8, 2});
  EXPECT_HAS(error_of([&] { neural::gaussian_smooth(x, 40, 1e-7); }), "bin width 1e-07 ms: must be in [0.1");
  EXPECT_HAS(error_of([&] { neural::gaussian_smooth(x, 1e12, 5); }),
             "smoothing sigma 1e+12 ms: must be in [0, 10000]");
  // The widest accepted window (6·10^5 taps) over a short trial costs T·T, not T·window.
  const auto y = neural::gaussian_smooth(x, neural::kMaxSigmaMs, neural::kMinBinMs);
  EXPECT_EQ(y.sizes(), x.sizes());
  EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
}

// A small imported neural database: 2 groups × 3 trials of 10 bins.
fs::path make_neural_db(const testing::ScratchDir& dir) {
  neural::SyntheticOptions o;
  o.units = {4, 3};
  o.trials = 3;
  o.bins = 10;
  neural::NeuralImportOptions io;
  io.inputs = neural::write_synthetic_reaching(dir / "h5", o);
  io.output = dir / "db";
  io.max_db_size_bytes = 16 << 20;
  neural::import_neural_hdf5(io);
  return dir / "db";
}

void put(const fs::path& db, const std::string& key, const std::string& value) {
  LmdbStore store(db, LmdbStore::Mode::kReadWrite);
  LmdbStore::Writer w(store);
  w.put(key, value);
  w.commit();
}

// What inspect lists and what the loader throws, for one database.
struct Verdicts {
  std::vector<std::string> inspect;
  std::string inspect_output;
  std::string loader;
};

Verdicts neural_verdicts(const fs::path& db) {
  Verdicts v;
  std::ostringstream out;
  v.inspect = neural::inspect_neural_database(db, out);
  v.inspect_output = out.str();
  v.loader = error_of([&] { neural::NeuralDataset ds(db); });
  return v;
}

TEST(NeuralDatabaseCheck, InspectRefusesWhatTrainingRefuses) {
  testing::ScratchDir dir;
  const auto db = make_neural_db(dir);
  {
    std::ostringstream out;
    ASSERT_TRUE(neural::inspect_neural_database(db, out).empty()) << out.str();
    neural::NeuralDataset ok(db);
    EXPECT_EQ(ok.size(), 6u);
  }
  auto record = good_record(10, 4);
  record.group = "synthetic_reach_0";
  for (const std::string bad : {"-5", "nan", "1e-07"}) {
    put(db, "00000001", with_metadata(record, "bin_ms", bad));
    const auto v = neural_verdicts(db);
    ASSERT_EQ(v.inspect.size(), 1u) << v.inspect_output;
    EXPECT_HAS(v.inspect.front(), "00000001: record '00000001': metadata bin_ms = \"" + bad + "\"");
    EXPECT_HAS(v.loader, "key 00000001: metadata bin_ms = \"" + bad + "\"");
  }
  // A record without spikes (e.g. an audio record) is one inspect names too.
  put(db, "00000001", encode_waveform(std::vector<int16_t>(8, 1).data(), 1, 8, 16000));
  auto v = neural_verdicts(db);
  ASSERT_EQ(v.inspect.size(), 1u) << v.inspect_output;
  EXPECT_HAS(v.inspect.front(), "no buffers[\"spikes\"]");
  EXPECT_HAS(v.loader, "key 00000001: no buffers[\"spikes\"]");
}

TEST(NeuralDatabaseCheck, UnfinishedOrEmptyDatabasesAreRefusedByBoth) {
  testing::ScratchDir dir;
  const auto db = make_neural_db(dir);
  // An import stopped before metadata.yaml was written.
  const std::string yaml = read_file(db / "metadata.yaml");
  fs::remove(db / "metadata.yaml");
  auto v = neural_verdicts(db);
  ASSERT_EQ(v.inspect.size(), 1u) << v.inspect_output;
  EXPECT_HAS(v.inspect.front(), "has no metadata.yaml: its import did not finish");
  EXPECT_HAS(v.loader, "has no metadata.yaml: its import did not finish");
  // metadata.yaml promising another count.
  std::string other = yaml;
  other.replace(other.find("count: 6"), 8, "count: 9");
  write_file_atomic(db / "metadata.yaml", other);
  v = neural_verdicts(db);
  ASSERT_EQ(v.inspect.size(), 1u) << v.inspect_output;
  EXPECT_HAS(v.inspect.front(), "says count 9 but the database holds 6 records");
  EXPECT_HAS(v.loader, "says count 9 but the database holds 6 records");
  // An empty database.
  LmdbStore(dir / "empty", LmdbStore::Mode::kReadWrite);
  std::ostringstream out;
  const auto empty = neural::inspect_neural_database(dir / "empty", out);
  ASSERT_EQ(empty.size(), 1u) << out.str();
  EXPECT_HAS(empty.front(), "holds no records");
  EXPECT_HAS(error_of([&] { neural::NeuralDataset ds(dir / "empty"); }), "holds no records");
}

TEST(NeuralImportRanges, BinWidthAndShapesOutsideTheRangesAreRefusedByName) {
  testing::ScratchDir dir;
  neural::SyntheticOptions o;
  o.units = {4};
  o.trials = 2;
  o.bins = 10;
  o.bin_ms = 1e-7;
  EXPECT_HAS(error_of([&] { neural::write_synthetic_reaching(dir / "h5", o); }),
             "bin_ms = 0.000000: must be in");
  // A file whose bin_size_ms attribute is 1e-7.
  const auto file = dir / "tiny_bins.h5";
  {
    auto f = neural::H5File::create(file);
    std::vector<int32_t> spikes(2 * 10 * 4, 1);
    std::vector<float> behavior(2 * 10 * 2, 0.5f);
    f.write_int32("train_spikes_heldin", {2, 10, 4}, spikes.data());
    f.write_float("train_behavior", {2, 10, 2}, behavior.data());
    f.write_root_attribute("bin_size_ms", 1e-7);
  }
  neural::NeuralImportOptions io;
  io.inputs = {file};
  io.output = dir / "db";
  EXPECT_HAS(
      error_of([&] { neural::import_neural_hdf5(io); }),
      "attribute 'bin_size_ms' in " + file.string() + " = 0.000000: must be in [0.100000, 10000.000000] ms");
  io.bin_ms = 1e-7;
  EXPECT_HAS(error_of([&] { neural::import_neural_hdf5(io); }),
             "--bin_ms 0.000000: must be in [0.100000, 10000");
  io.bin_ms = 0;
  io.smoothing_sigma_ms = 1e9;
  EXPECT_HAS(error_of([&] { neural::import_neural_hdf5(io); }), "--smoothing_sigma_ms");
}

// --- Audio databases -------------------------------------------------------------------------

void write_yaml(const fs::path& db, const std::string& text) {
  write_file_atomic(db / "metadata.yaml", text);
}

Verdicts audio_verdicts(const fs::path& db) {
  Verdicts v;
  std::ostringstream out;
  v.inspect = inspect_database(db, out);
  v.inspect_output = out.str();
  // What training meets: the dataset opened, then every record read once; "" when all pass.
  try {
    AudioDatasetOptions o;
    o.n_signal = 16;
    AudioDataset ds(db, o);
    std::mt19937_64 rng(0);
    for (size_t i = 0; i < ds.size(); ++i) ds.get(i, rng);
  } catch (const Error& e) {
    v.loader = e.what();
  }
  return v;
}

TEST(AudioMetadataRanges, OutOfRangeOrStrayValuesNameTheFileLineAndKey) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 2, 1, 400, 16000);
  const std::pair<std::string, std::string> cases[] = {
      {"sr: 0", "sr: 0 is not accepted; a sampling rate in [1000, 768000] Hz"},
      {"sr: 44100.5", "sr: 44100.5 is not accepted"},
      {"channels: 0", "channels: 0 is not accepted; an integer in [1, 256]"},
      {"channels: 2.5", "channels: 2.5 is not accepted"},
      {"n_seconds: nan", "n_seconds: nan is not accepted"},
      {"lazy: maybe", "lazy: maybe is not accepted; true or false"},
  };
  for (const auto& [line, expected] : cases) {
    write_yaml(dir / "db", "channels: 1\nlazy: false\nn_seconds: 0.05\nsr: 16000\n" + line + "\n");
    const auto msg = error_of([&] { read_db_metadata(dir / "db"); });
    EXPECT_HAS(msg, "metadata.yaml' line 5: " + expected);
    // Training refuses it, and inspect lists it.
    const auto v = audio_verdicts(dir / "db");
    EXPECT_HAS(v.loader, expected);
    EXPECT_HAS(v.inspect_output, expected);
    EXPECT_FALSE(v.inspect.empty());
  }
}

// metadata.yaml saying lazy over records that are no references, and RAVE's own lazy records
// (path, length, channels: chunked by ffmpeg's seeking), are refused naming the record, by
// training and inspect alike.
TEST(LazyRecords, RecordsThatAreNoReferencesAndRavesOwnAreRefusedByName) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 2, 1, 400, 16000);
  write_yaml(dir / "db", "channels: 1\nlazy: true\nn_seconds: 0.05\nsr: 16000\n");
  auto v = audio_verdicts(dir / "db");
  EXPECT_HAS(v.loader, "holds no metadata 'path': it is no reference to a file");
  EXPECT_HAS(v.inspect_output, "holds no metadata 'path': it is no reference to a file");
  EXPECT_FALSE(v.inspect.empty());

  AudioExample rave_lazy;
  set_metadata(rave_lazy, "path", (dir / "a.wav").string());
  set_metadata(rave_lazy, "length", "12.5");
  set_metadata(rave_lazy, "channels", "1");
  {
    LmdbStore store(dir / "rave_lazy", LmdbStore::Mode::kReadWrite, 1 << 20);
    LmdbStore::Writer w(store);
    w.put(LmdbStore::key_for_index(0), serialize_example(rave_lazy));
    w.commit();
  }
  write_yaml(dir / "rave_lazy", "channels: 1\nlazy: true\nn_seconds: 12.5\nsr: 16000\n");
  v = audio_verdicts(dir / "rave_lazy");
  EXPECT_HAS(v.loader, "a lazy record of RAVE's own preprocess (path, length, channels)");
  EXPECT_HAS(v.inspect_output, "a lazy record of RAVE's own preprocess");
  EXPECT_FALSE(v.inspect.empty());
}

TEST(AudioMetadataRanges, MetadataIsCheckedAgainstTheRecords) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 2, 1, 400, 16000);
  // sr: 44100 on 16 kHz records once trained as 44100 Hz.
  write_yaml(dir / "db", "channels: 1\nlazy: false\nn_seconds: 0.05\nsr: 44100\n");
  auto v = audio_verdicts(dir / "db");
  EXPECT_HAS(v.loader, "record '00000000' holds audio at 16000 Hz, but metadata.yaml says sr: 44100");
  EXPECT_EQ(v.inspect.size(), 2u) << v.inspect_output;
  // channels: 2 on mono records once gave "fewer than n_signal".
  write_yaml(dir / "db", "channels: 2\nlazy: false\nn_seconds: 0.05\nsr: 16000\n");
  v = audio_verdicts(dir / "db");
  EXPECT_HAS(v.loader, "record '00000000' holds 1-channel audio (its shape field [1, 800]");
  EXPECT_HAS(v.loader, "metadata.yaml says channels: 2");
  EXPECT_EQ(v.inspect.size(), 2u) << v.inspect_output;
  // The truth trains and inspects clean.
  write_yaml(dir / "db", "channels: 1\nlazy: false\nn_seconds: 0.05\nsr: 16000\n");
  v = audio_verdicts(dir / "db");
  EXPECT_TRUE(v.inspect.empty()) << v.inspect_output;
  EXPECT_EQ(v.loader, "");
  AudioDatasetOptions o;
  o.n_signal = 16;
  EXPECT_EQ(AudioDataset(dir / "db", o).sampling_rate(), 16000);
}

TEST(AudioMetadataRanges, UnfinishedEmptyOrWaveformlessDatabasesAreRefusedByBoth) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 2, 1, 400, 16000, /*write_metadata=*/false);
  auto v = audio_verdicts(dir / "db");
  EXPECT_HAS(v.loader, "has no metadata.yaml: it was not finished");
  ASSERT_EQ(v.inspect, std::vector<std::string>{"metadata.yaml"}) << v.inspect_output;
  // A record holding no waveform.
  write_db_metadata(dir / "db", DbMetadata{false, 1, 0.05, 16000});
  audio_example::AudioExample ex;
  put_float_buffer(ex, "spikes", torch::zeros({2, 2}));
  put(dir / "db", "00000001", ex.SerializeAsString());
  v = audio_verdicts(dir / "db");
  ASSERT_EQ(v.inspect, std::vector<std::string>{"00000001"}) << v.inspect_output;
  EXPECT_HAS(v.inspect_output, "record '00000001' has no buffer 'waveform'");
  EXPECT_HAS(v.loader, "record '00000001' has no buffer 'waveform'");
  // An empty database.
  LmdbStore(dir / "empty", LmdbStore::Mode::kReadWrite);
  write_db_metadata(dir / "empty", DbMetadata{});
  v = audio_verdicts(dir / "empty");
  EXPECT_HAS(v.loader, "holds no records");
  ASSERT_EQ(v.inspect, std::vector<std::string>{"database"}) << v.inspect_output;
}

TEST(AudioRecordRanges, AnOverflowingShapeIsAnErrorNamingTheBuffer) {
  audio_example::AudioExample ex;
  put_float_buffer(ex, "feature", torch::zeros({4}));
  auto& buf = (*ex.mutable_buffers())["feature"];
  buf.clear_shape();
  for (int i = 0; i < 4; ++i) buf.add_shape(2000000000);  // 1.6e37 values
  const auto msg = error_of([&] { get_float_buffer(ex, "feature", "00000003"); });
  EXPECT_HAS(msg,
             "record '00000003': buffer 'feature' of shape [2000000000, 2000000000, 2000000000, 2000000000]");
  EXPECT_HAS(msg, "holds 16 bytes, fewer than its shape needs (truncated)");
}

// Records with an extra FLOAT32 buffer whose shape does not fit its bytes (overflowing,
// wrapping to 0 in 64 bits, three times INT32_MAX): inspect refused them, training trained on
// them (it read only the waveform). One check now serves both (check_record_buffers).
TEST(AudioRecordRanges, ExtraBuffersThatInspectRefusesTrainingRefusesToo) {
  const std::pair<std::string, std::vector<int32_t>> cases[] = {
      {"a_float_shape_overflow", {2000000000, 2000000000, 2000000000, 2000000000}},
      {"wrap0", {65536, 65536, 65536, 65536}},  // 2^64 values: 0 after a wrapping product
      {"3x_maxint", {2147483647, 2147483647, 2147483647}},
  };
  for (const auto& [name, shape] : cases) {
    testing::ScratchDir dir;
    testing::write_rave_style_db(dir / "db", 2, 1, 400, 16000);
    audio_example::AudioExample ex;
    {
      LmdbStore store(dir / "db", LmdbStore::Mode::kReadOnly);
      ASSERT_TRUE(ex.ParseFromString(store.get("00000001").value()));
    }
    put_float_buffer(ex, name, torch::zeros({name == "wrap0" ? 0 : 4}));
    auto& buf = (*ex.mutable_buffers())[name];
    buf.clear_shape();
    for (int32_t d : shape) buf.add_shape(d);
    put(dir / "db", "00000001", ex.SerializeAsString());
    const auto v = audio_verdicts(dir / "db");
    ASSERT_EQ(v.inspect, std::vector<std::string>{"00000001"}) << name << "\n" << v.inspect_output;
    EXPECT_HAS(v.inspect_output, "record '00000001': buffer '" + name + "' of shape [");
    EXPECT_HAS(v.loader, "record '00000001': buffer '" + name + "' of shape [");
    EXPECT_HAS(v.loader, "fewer than its shape needs (truncated)");
  }
}

// Keys, buffer names and metadata values come from the file: shown escaped, never as raw bytes
// that a terminal would act on. Before: "wave\x7f…orm" reached the terminal as it was.
TEST(AudioRecordRanges, RecordBytesInMessagesAreEscaped) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 2, 1, 400, 16000);
  audio_example::AudioExample ex;
  {
    LmdbStore store(dir / "db", LmdbStore::Mode::kReadOnly);
    ASSERT_TRUE(ex.ParseFromString(store.get("00000001").value()));
  }
  auto wave = (*ex.mutable_buffers())["waveform"];
  ex.mutable_buffers()->erase("waveform");
  (*ex.mutable_buffers())[std::string("wave\x7f\x1b[2Jorm\xc2\x9b")] = wave;
  put(dir / "db", "00000001", ex.SerializeAsString());
  put(dir / "db", std::string("0000\x1b]0;x\x07"), ex.SerializeAsString());
  const auto v = audio_verdicts(dir / "db");
  const std::string shown = "wave\\x7f\\x1b[2Jorm\\xc2\\x9b";
  EXPECT_HAS(v.loader, "has no buffer 'waveform' (buffers: " + shown + ")");
  EXPECT_HAS(v.inspect_output, "(buffers: " + shown + ")");
  EXPECT_HAS(v.inspect_output, "0000\\x1b]0;x\\x07");
  for (const std::string& text : {v.loader, v.inspect_output}) {
    for (const char* raw : {"\x1b", "\x7f", "\x07", "\xc2\x9b"}) {
      EXPECT_EQ(text.find(raw), std::string::npos) << "a raw byte of the record reached the message:\n"
                                                   << text;
    }
  }
}

TEST(AudioRecordRanges, ATruncatedRecordIsReportedAsTruncatedNotTooShort) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 2, 1, 400, 16000);
  // Record 1 cut to a quarter of its bytes; its shape field still promises all 800.
  audio_example::AudioExample ex;
  {
    LmdbStore store(dir / "db", LmdbStore::Mode::kReadOnly);
    ASSERT_TRUE(ex.ParseFromString(store.get("00000001").value()));
  }
  auto& wave = (*ex.mutable_buffers())["waveform"];
  wave.set_data(wave.data().substr(0, 200));
  put(dir / "db", "00000001", ex.SerializeAsString());
  std::ostringstream out;
  const auto bad = inspect_database(dir / "db", out);
  ASSERT_EQ(bad, std::vector<std::string>{"00000001"}) << out.str();
  const std::string expected =
      "record '00000001': buffer 'waveform' is truncated: its shape field [1, 800] (RAVE's (channels, bytes "
      "per "
      "channel)) promises 800 bytes, but it holds 200";
  EXPECT_HAS(out.str(), expected);
  AudioDatasetOptions o;
  o.n_signal = 300;  // longer than the 100 samples left: "too short" before
  const auto msg = error_of([&] {
    AudioDataset ds(dir / "db", o);
    std::mt19937_64 rng(0);
    ds.get(1, rng);
  });
  EXPECT_HAS(msg, expected);
}

TEST(AudioFiles, ATruncatedFileIsReportedAsTruncatedNotTooShort) {
  testing::ScratchDir dir;
  AudioData a;
  a.sample_rate = 16000;
  a.channels = {std::vector<float>(16000, 0.1f)};
  fs::create_directories(dir / "in");
  write_audio_file(dir / "whole.wav", a, audio_format_from_name("wav16"));
  const std::string bytes = read_file(dir / "whole.wav");
  std::ofstream(dir / "in" / "cut.wav", std::ios::binary) << bytes.substr(0, bytes.size() * 4 / 10);
  PreprocessOptions o;
  o.input_paths = {dir / "in"};
  o.output_path = dir / "db";
  o.sampling_rate = 16000;
  o.num_signal = 2048;  // one chunk: 0.26 s; the cut file still holds 0.4 s
  std::ostringstream log;
  const auto result = preprocess_audio(o, log);
  EXPECT_EQ(result.chunks, 0u);
  EXPECT_HAS(log.str(), "cut.wav: truncated: its header promises " + std::to_string(bytes.size()) +
                            " bytes but the file holds");
  EXPECT_EQ(log.str().find("too short"), std::string::npos) << log.str();
  // One byte short is a pad byte some writers count but never write: the file is whole.
  fs::create_directories(dir / "in2");
  std::ofstream(dir / "in2" / "unpadded.wav", std::ios::binary) << bytes.substr(0, bytes.size() - 1);
  o.input_paths = {dir / "in2"};
  o.output_path = dir / "db2";
  std::ostringstream log2;
  EXPECT_GT(preprocess_audio(o, log2).chunks, 0u) << log2.str();
  EXPECT_EQ(log2.str().find("truncated"), std::string::npos) << log2.str();
}

TEST(PreparationLimits, SizesTheFilesOrFlagsWouldAllocateAreRefusedByName) {
  testing::ScratchDir dir;
  PreprocessOptions o;
  o.input_paths = {dir / "nothing"};
  o.output_path = dir / "db";
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.workers = 100000;
  EXPECT_HAS(error_of([&] { preprocess_audio(o, std::cerr); }),
             "--workers 100000: must be in [0, " + std::to_string(4 * cores) + "]");
  o.workers = 0;
  o.sampling_rate = 0;
  EXPECT_HAS(error_of([&] { preprocess_audio(o, std::cerr); }),
             "--sampling_rate 0: must be in [1000, 768000] Hz");
  o.sampling_rate = 16000;
  o.channels = 100000;
  EXPECT_HAS(error_of([&] { preprocess_audio(o, std::cerr); }), "--channels 100000: must be in [1, 256]");
  o.channels = 1;
  o.num_signal = int64_t{1} << 40;
  EXPECT_HAS(error_of([&] { preprocess_audio(o, std::cerr); }),
             "--num_signal 1099511627776: must be in [1, ");
  EXPECT_FALSE(fs::exists(o.output_path));
  // Resampling whose result would outgrow the in-memory limit is refused before it allocates.
  AudioData a;
  a.sample_rate = 1000;
  a.channels = {std::vector<float>(2000000, 0.0f)};
  EXPECT_HAS(error_of([&] { resample(a, 768000); }), "gives more than 1073741824 samples");
  EXPECT_HAS(error_of([&] { generate_demo_audio(dir / "demo", 4000, 1); }), "--demo_seconds 4000");
  neural::SyntheticOptions big;
  big.units = {1000};
  big.trials = 100000;
  big.bins = 1000;
  EXPECT_HAS(error_of([&] { neural::write_synthetic_reaching(dir / "h5", big); }),
             "100000 trials × 1000 bins × 1000 units is more than 1073741824 values");
}

// --- Signals ---------------------------------------------------------------------------------

// SIGTERM delivered to this process with the stop handlers installed, cleared on destruction.
struct PendingSigterm {
  PendingSigterm() {
    install_stop_signal_handlers();
    set_stop_messages(false);
    EXPECT_TRUE(rt::testing::signal_this_process(SIGTERM));
  }
  ~PendingSigterm() { clear_stop_request(); }
};

template <typename F>
std::string stop_of(F f) {
  try {
    f();
  } catch (const StopRequested& e) {
    EXPECT_EQ(e.signal(), SIGTERM);
    return e.what();
  }
  ADD_FAILURE() << "expected StopRequested";
  return "";
}

TEST(DataSignals, LongPreparationsStopOnSigterm) {
  testing::ScratchDir dir;
  const auto neural_db = make_neural_db(dir);
  testing::write_rave_style_db(dir / "audio_db", 2, 1, 400, 16000);
  generate_demo_audio(dir / "demo", 0.3, 1);
  PendingSigterm sigterm;
  EXPECT_HAS(stop_of([&] { generate_demo_audio(dir / "demo2", 0.3, 1); }),
             "stopped by SIGTERM while writing demo audio");
  EXPECT_HAS(stop_of([&] { neural::write_synthetic_reaching(dir / "h5b"); }), "stopped by SIGTERM");
  EXPECT_HAS(stop_of([&] { neural::NeuralDataset ds(neural_db); }), "while reading neural database");
  EXPECT_HAS(stop_of([&] { AudioDataset ds(dir / "audio_db", {}); }), "while listing database");
  std::ostringstream out;
  EXPECT_HAS(stop_of([&] { neural::inspect_neural_database(neural_db, out); }), "while inspecting");
  PreprocessOptions o;
  o.input_paths = {dir / "demo"};
  o.output_path = dir / "stopped_db";
  o.num_signal = 1024;
  std::ostringstream log;
  EXPECT_HAS(stop_of([&] { preprocess_audio(o, log); }), "the unfinished database was removed");
  EXPECT_FALSE(fs::exists(dir / "stopped_db"));  // the folder it made, gone with the database
  neural::NeuralImportOptions io;
  io.inputs = {dir / "h5"};
  io.output = dir / "stopped_neural";
  fs::create_directories(dir / "stopped_neural");
  write_file_atomic(dir / "stopped_neural" / "notes.txt", "mine\n");
  EXPECT_HAS(stop_of([&] { neural::import_neural_hdf5(io); }), "the unfinished database was removed");
  // A folder that was there stays, with what it held before, and nothing of the import.
  EXPECT_TRUE(fs::is_regular_file(dir / "stopped_neural" / "notes.txt"));
  for (const char* f : {"data.mdb", "lock.mdb", "metadata.yaml"})
    EXPECT_FALSE(fs::exists(dir / "stopped_neural" / f)) << f;
}

}  // namespace
}  // namespace rt
