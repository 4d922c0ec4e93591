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

// The built-in demo audio, half a second a file, in `audio`.
void write_demo_audio(const fs::path& audio) {
  auto r = run_command(bin_path("preprocess") + " --generate_demo " + quote(audio.string()) +
                       " --demo_seconds 0.5 --seed 1 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
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

// A failed import leaves nothing behind, so the corrected command runs on the same folder; a
// folder that was there before stays, with what it held.
TEST(DataBadInput, AFailedImportLeavesNothingAndTheCorrectedCommandRuns) {
  ScratchDir dir("e2e_data_bad");
  const fs::path audio = dir.path() / "audio", db = dir.path() / "db";
  ASSERT_NO_FATAL_FAILURE(write_demo_audio(audio));
  auto r =
      run_command(bin_path("preprocess") + " --input_path " + quote((dir.path() / "nonexistent").string()) +
                  " --output_path " + quote(db.string()) + " 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "no database was made")) << r.output;
  EXPECT_FALSE(fs::exists(db)) << r.output;
  // Inputs that give no chunk (too short for --num_signal): the same.
  r = run_command(bin_path("preprocess") + " --input_path " + quote(audio.string()) + " --output_path " +
                  quote(db.string()) + " --num_signal 1000000 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_FALSE(fs::exists(db)) << r.output;
  r = run_command(bin_path("preprocess") + " --input_path " + quote(audio.string()) + " --output_path " +
                  quote(db.string()) + " --num_signal 4096 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::is_regular_file(db / "metadata.yaml"));
  // The neural import: a failed one into a folder that was there keeps the folder and its file.
  const fs::path mine = dir.path() / "mine";
  fs::create_directories(mine);
  write_file_atomic(mine / "notes.txt", "mine\n");
  r = run_command(bin_path("preprocess") + " --kind neural --input_path " + quote(audio.string()) +
                  " --output_path " + quote(mine.string()) + " 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(fs::is_regular_file(mine / "notes.txt"));
  for (const char* f : {"data.mdb", "lock.mdb", "metadata.yaml"}) EXPECT_FALSE(fs::exists(mine / f)) << f;
}

// The database is never written among its own inputs, and a database met inside an input
// folder (an earlier import's) is not imported as audio.
TEST(DataBadInput, AnOutputInsideAnInputIsRefusedAndADatabaseInsideAnInputIsNotImported) {
  ScratchDir dir("e2e_data_bad");
  const fs::path audio = dir.path() / "audio";
  ASSERT_NO_FATAL_FAILURE(write_demo_audio(audio));
  auto r = run_command(bin_path("preprocess") + " --input_path " + quote(audio.string()) + " --output_path " +
                       quote((audio / "db").string()) + " --num_signal 4096 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--output_path '" + (audio / "db").string() + "' is inside --input_path '" +
                                     audio.string() + "'"))
      << r.output;
  EXPECT_FALSE(fs::exists(audio / "db"));
  // A database put inside the folder by other means: its files are not counted as inputs.
  r = run_command(bin_path("preprocess") + " --input_path " + quote(audio.string()) + " --output_path " +
                  quote((dir.path() / "first").string()) + " --num_signal 4096 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  fs::copy(dir.path() / "first", audio / "first_db");
  r = run_command(bin_path("preprocess") + " --input_path " + quote(audio.string()) + " --output_path " +
                  quote((dir.path() / "second").string()) + " --num_signal 4096 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, (audio / "first_db").string() + ": an LMDB database (data.mdb), not audio"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "from 8 of 9 files")) << r.output;  // the 8 demo files, and the database
}

// An output path that is a file, or a folder holding a crashed import's empty data.mdb, is
// refused naming the flag and what is there.
TEST(DataBadInput, AnOutputPathThatIsAFileOrHoldsAnEmptyDataMdbIsRefusedNamingIt) {
  ScratchDir dir("e2e_data_bad");
  const fs::path audio = dir.path() / "audio";
  ASSERT_NO_FATAL_FAILURE(write_demo_audio(audio));
  write_file_atomic(dir.path() / "a_file", "x");
  fs::create_directories(dir.path() / "crashed");
  write_file_atomic(dir.path() / "crashed" / "data.mdb", "");
  const struct {
    fs::path out;
    std::string says;
  } cases[] = {
      {dir.path() / "a_file",
       "--output_path '" + (dir.path() / "a_file").string() + "' is a regular file, not a folder"},
      {dir.path() / "crashed", "holds an empty data.mdb (0 bytes"},
  };
  for (const auto& c : cases) {
    for (const std::string& kind : std::vector<std::string>{"", " --kind neural"}) {
      auto r = run_command(bin_path("preprocess") + kind + " --input_path " + quote(audio.string()) +
                           " --output_path " + quote(c.out.string()) + " 2>&1");
      EXPECT_EQ(r.exit_code, 1) << r.output;
      EXPECT_TRUE(contains(r.output, c.says)) << r.output;
      EXPECT_FALSE(contains(r.output, "Bad file descriptor")) << r.output;
      EXPECT_FALSE(contains(r.output, "filesystem error")) << r.output;
    }
  }
  EXPECT_EQ(read_file(dir.path() / "a_file"), "x");
  EXPECT_EQ(fs::file_size(dir.path() / "crashed" / "data.mdb"), 0u);
}

}  // namespace
}  // namespace rt::e2e
