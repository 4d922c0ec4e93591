// Crafted and damaged databases through the real binaries (#15 items 2, 4, 12, 13, 14):
// `preprocess --inspect` exits 1 on what `train` refuses, both name the key and field in a
// line or two (no C++ backtrace), and long preparations stop on SIGTERM with 143.
#include "audio_example.pb.h"
#include "data/lmdb_store.h"
#include "data/neural/neural_record.h"
#include "e2e/e2e_fixtures.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

using testing::contains;

// torch's what() carries its backtrace after this line.
void expect_no_backtrace(const CommandResult& r) {
  EXPECT_FALSE(contains(r.output, "Exception raised from")) << r.output;
  EXPECT_FALSE(contains(r.output, "frame #")) << r.output;
}

// A tiny imported neural database: 1 group × 4 trials.
fs::path small_neural_db(const fs::path& dir) {
  return e2e::make_neural_db(dir, "--groups 1 --units 8 --trials 4 --bins 20");
}

std::string get_record(const fs::path& db, const std::string& key) {
  LmdbStore store(db, LmdbStore::Mode::kReadOnly);
  return store.get(key).value_or("");
}

// Writes `original` under `key` of `db` with one metadata field replaced.
void put_with_metadata(const fs::path& db, const std::string& key, const std::string& original,
                       const std::string& field, const std::string& value) {
  audio_example::AudioExample ex;
  ASSERT_TRUE(ex.ParseFromString(original));
  (*ex.mutable_metadata())[field] = value;
  LmdbStore store(db, LmdbStore::Mode::kReadWrite);
  LmdbStore::Writer w(store);
  w.put(key, ex.SerializeAsString());
  w.commit();
}

std::string ssm_train(const fs::path& db, const fs::path& out) {
  return bin_path("train") + " --config tiny_ssm --db_path " + quote(db.string()) + " --out_path " +
         quote(out.string()) + " --threads 1 --max_steps 2";
}

TEST(DataBadInput, CraftedNeuralRecordsAreRefusedByInspectAndTrainNamingKeyAndField) {
  ScratchDir dir("e2e_data_bad");
  const auto db = small_neural_db(dir.path());
  const std::string original = get_record(db, "00000002");
  // bin_ms 1e-7 once took 18 GB and minutes; "seven" as a trial once printed "error: stoll".
  for (const auto& [field, value] : std::vector<std::pair<std::string, std::string>>{
           {"bin_ms", "1e-07"}, {"bin_ms", "-5"}, {"bin_ms", "nan"}, {"trial", "seven"}}) {
    SCOPED_TRACE(field + " = " + value);
    put_with_metadata(db, "00000002", original, field, value);
    auto ins = run_command(bin_path("preprocess") + " --inspect " + quote(db.string()));
    EXPECT_EQ(ins.exit_code, 1) << ins.output;
    EXPECT_TRUE(
        contains(ins.output, "00000002: record '00000002': metadata " + field + " = \"" + value + "\""))
        << ins.output;
    auto tr = run_command(ssm_train(db, dir.path() / "runs"));
    EXPECT_EQ(tr.exit_code, 2) << tr.output;
    EXPECT_TRUE(contains(tr.output, "key 00000002: metadata " + field + " = \"" + value + "\"")) << tr.output;
    EXPECT_FALSE(contains(tr.output, "step 1/")) << tr.output;
    expect_no_backtrace(tr);
  }
}

TEST(DataBadInput, UnfinishedAndEmptyDatabasesFailInspect) {
  ScratchDir dir("e2e_data_bad");
  const auto audio = make_demo_db(dir.path(), 1.0, 4096);
  // An audio database whose preprocess was interrupted before metadata.yaml.
  fs::remove(audio / "metadata.yaml");
  auto ins = run_command(bin_path("preprocess") + " --inspect " + quote(audio.string()));
  EXPECT_EQ(ins.exit_code, 1) << ins.output;
  EXPECT_TRUE(contains(ins.output, "has no metadata.yaml: it was not finished")) << ins.output;
  auto tr = run_command(tiny_train_command(audio, dir.path() / "runs", "--max_steps 1"));
  EXPECT_EQ(tr.exit_code, 2) << tr.output;
  EXPECT_TRUE(contains(tr.output, "has no metadata.yaml: it was not finished")) << tr.output;
  // sr: 0 once trained as 44100 Hz.
  write_file_atomic(audio / "metadata.yaml", "channels: 1\nlazy: false\nn_seconds: 1.0\nsr: 0\n");
  ins = run_command(bin_path("preprocess") + " --inspect " + quote(audio.string()));
  EXPECT_EQ(ins.exit_code, 1) << ins.output;
  EXPECT_TRUE(contains(ins.output, "sr: 0 is not accepted; a sampling rate in [1000, 768000] Hz"))
      << ins.output;
  tr = run_command(tiny_train_command(audio, dir.path() / "runs", "--max_steps 1"));
  EXPECT_EQ(tr.exit_code, 2) << tr.output;
  EXPECT_TRUE(contains(tr.output, "metadata.yaml' line 4: sr: 0 is not accepted")) << tr.output;
  // An empty database.
  { LmdbStore empty(dir.path() / "empty", LmdbStore::Mode::kReadWrite); }
  ins = run_command(bin_path("preprocess") + " --inspect " + quote((dir.path() / "empty").string()));
  EXPECT_EQ(ins.exit_code, 1) << ins.output;
  EXPECT_TRUE(contains(ins.output, "holds no records")) << ins.output;
}

TEST(DataBadInput, SigtermStopsNeuralDemoGenerationWithAMessage) {
  ScratchDir dir("e2e_data_bad");
  // Tens of seconds of work: 20,000 trials of 200 bins of 64 units.
  BackgroundProcess p(bin_path("preprocess") + " --generate_neural_demo " +
                          quote((dir.path() / "h5").string()) +
                          " --groups 1 --units 64 --trials 20000 --bins 200",
                      dir.path() / "log");
  // The output folder appears once the options are checked (the handlers are installed first).
  ASSERT_TRUE(p.wait_until([&] { return fs::exists(dir.path() / "h5"); }, 120)) << p.log();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(120), 143) << p.log();
  EXPECT_TRUE(contains(p.log(), "preprocess: stopped by SIGTERM while writing synthetic reaching data"))
      << p.log();
}

}  // namespace
}  // namespace rt::e2e
