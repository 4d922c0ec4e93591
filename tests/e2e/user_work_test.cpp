// Nothing a user types may destroy their work, or reach their terminal raw: a smoke run leaves
// `latest` with the real run; a database rewritten under the reader fails the run naming it; a
// folder, FIFO or device given for a file is named for what it is; values from files, records
// and the command line are shown escaped; a run killed after a checkpoint resumes with its
// profiles whole. Each test fails without its fix (docs/bad_input.md).
#include <sys/stat.h>

#include "data/lmdb_store.h"
#include "e2e/e2e_fixtures.h"
#include "training/checkpoint.h"
#include "util/atomic_file.h"
#include "util/run_pointer.h"

namespace rt::e2e {
namespace {

using testing::contains;

class UserWork : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_user_work");
    db_ = make_demo_db(dir_->path());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static ScratchDir* dir_;
  static fs::path db_;
};
ScratchDir* UserWork::dir_ = nullptr;
fs::path UserWork::db_;

// A smoke run is a run of its own, and `--ckpt last` must keep meaning the real run. Before:
// --smoke_test re-pointed <out_path>/latest at itself, so `--ckpt last` resumed the smoke run.
TEST_F(UserWork, ASmokeTestLeavesLatestWithTheRealRun) {
  const fs::path out = dir_->path() / "smoke";
  auto real = run_command(tiny_train_command(db_, out, "--name real --max_steps 3"));
  ASSERT_EQ(real.exit_code, 0) << real.output;
  const fs::path run = run_dir_from_output(real.output);
  ASSERT_TRUE(fs::equivalent(resolve_run_pointer(out / "latest"), run));
  auto smoke = run_command(tiny_train_command(db_, out, "--name real --smoke_test"));
  ASSERT_EQ(smoke.exit_code, 0) << smoke.output;
  const fs::path smoke_run = run_dir_from_output(smoke.output);
  EXPECT_TRUE(contains(smoke_run.filename().string(), "real_smoke_")) << smoke_run;
  EXPECT_TRUE(fs::equivalent(resolve_run_pointer(out / "latest"), run)) << "latest moved to the smoke run";
  auto resumed = run_command(tiny_train_command(db_, out, "--max_steps 5 --ckpt last"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(fs::equivalent(run_dir_from_output(resumed.output), run)) << resumed.output;
}

// --smoke_test forecasts phase 2's peak memory before phase 2 starts, prints it at once and in its
// report, and against a target that is too small says what to change and exits 1.
TEST_F(UserWork, ASmokeTestForecastsPhaseTwosMemoryAndSaysWhatToChange) {
  const fs::path out = dir_->path() / "forecast";
  auto fits = run_command(tiny_train_command(db_, out, "--smoke_test"));
  ASSERT_EQ(fits.exit_code, 0) << fits.output;
  const std::string heading =
      "memory forecast for phase 2 (adversarial) (from step 200), made before it starts, on cpu";
  const size_t first = fits.output.find("smoke test: " + heading);
  ASSERT_NE(first, std::string::npos) << fits.output;
  EXPECT_NE(fits.output.find("  " + heading, first + 1), std::string::npos)
      << "not in the report: " << fits.output;
  EXPECT_TRUE(contains(fits.output, "at batch 4 (")) << fits.output;
  EXPECT_TRUE(contains(fits.output, " at batch 2); its optimizer state ")) << fits.output;
  EXPECT_TRUE(contains(fits.output, "(resident now and available on this host): fits")) << fits.output;

  auto small = run_command(tiny_train_command(db_, out, "--smoke_test --smoke_test_memory_gib 0.0001"));
  EXPECT_EQ(small.exit_code, 1) << small.output;
  EXPECT_TRUE(contains(small.output, "(train.smoke_test_memory_gib): does NOT fit. Change one of:"))
      << small.output;
  EXPECT_TRUE(contains(small.output, "  - --precision bf16")) << small.output;
  EXPECT_TRUE(contains(small.output, "error: --smoke_test: a later phase is forecast not to fit in memory"))
      << small.output;
}

// The database rewritten in place under a training run (a bigger one copied over data.mdb) and
// cut back to the size it had when the run opened it: the size check passes, the new meta page
// names pages past the file's end. An error naming the database, exit 1, the summary failed,
// with and without loader workers. Before: SIGBUS (rc 135), no message, the summary "running".
TEST_F(UserWork, ADatabaseRewrittenUnderTheRunAndCutBackFailsItNamingIt) {
  const fs::path bigger = dir_->path() / "bigger_db";
  {
    LmdbStore rw(bigger, LmdbStore::Mode::kReadWrite, 64 << 20);
    LmdbStore::Writer w(rw);
    for (int i = 0; i < 200; ++i) w.put(LmdbStore::key_for_index(i), std::string(64 * 1024, 'x'));
    w.commit();
  }
  for (const char* workers : {"0", "2"}) {
    const fs::path db = dir_->path() / (std::string("rewritten_") + workers);
    fs::copy(db_, db, fs::copy_options::recursive);
    const auto size = fs::file_size(db / "data.mdb");
    ASSERT_GT(fs::file_size(bigger / "data.mdb"), 2 * size);
    BackgroundProcess p(
        tiny_train_command(db, dir_->path() / "rewritten",
                           std::string("--max_steps 100000 --log_every 1 --workers ") + workers),
        dir_->path() / (std::string("rewritten_") + workers + ".log"));
    ASSERT_TRUE(p.wait_until([&] { return last_logged_step(p.log()) >= 3; }, 120)) << p.log();
    // In place: the same inode, as the reader's map sees it.
    fs::copy_file(bigger / "data.mdb", db / "data.mdb", fs::copy_options::overwrite_existing);
    fs::resize_file(db / "data.mdb", size);
    const int code = p.wait_exit(120);
    const std::string log = p.log();
    EXPECT_EQ(code, 1) << "workers " << workers << "\n" << log;
    EXPECT_TRUE(contains(log, "LMDB database '" + db.string() + "' changed under the reader")) << log;
    const Json summary = read_json(run_dir_from_output(log) / "training_summary.json");
    EXPECT_TRUE(contains(summary.at("status").get<std::string>(), "failed: ")) << summary.dump(2);
  }
}

// "does not exist" only for what does not exist: a folder, a FIFO or a device where a file is
// expected (or a file where a folder is) is named for what it is, and a FIFO is never opened
// (reading one would wait for a writer). Before: "does not exist" or "no such file" for each.
TEST_F(UserWork, AFolderFifoOrDeviceIsNamedForWhatItIs) {
  const fs::path fifo = dir_->path() / "a_fifo", folder = dir_->path() / "a_folder";
  if (!fs::exists(fifo)) {
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  }
  fs::create_directories(folder);
  const std::string train = bin_path("train") + " --config tiny_rave --db_path " + quote(db_.string()) +
                            " --out_path " + quote((dir_->path() / "kinds").string());
  const struct {
    std::string command, says;
  } cases[] = {
      {train + " --ckpt " + quote(folder.string()),
       "train.ckpt = '" + folder.string() + "' is a folder, not a file"},
      {train + " --ckpt " + quote(fifo.string()),
       "train.ckpt = '" + fifo.string() + "' is a FIFO, not a file"},
      {bin_path("train") + " --config " + quote(fifo.string()),
       "config file '" + fifo.string() + "' is a FIFO, not a file"},
      {bin_path("export") + " --ckpt /dev/null", "--ckpt '/dev/null' is a character device, not a file"},
      {bin_path("export") + " --ckpt " + quote(folder.string()), "is a folder, not a file"},
      {bin_path("export") + " --run " + quote(fifo.string()),
       "--run '" + fifo.string() + "' is a FIFO, not a folder"},
      {bin_path("export") + " --benchmark " + quote(folder.string()), "is a folder, not a file"},
      {bin_path("preprocess") + " --inspect " + quote(fifo.string()), fifo.string()},
      {bin_path("preprocess") + " --input_path " + quote(fifo.string()) + " --output_path " +
           quote((dir_->path() / "from_fifo").string()),
       fifo.string() + ": is a FIFO, neither a file nor a folder"},
  };
  for (const auto& c : cases) {
    auto r = run_command("timeout 60 " + c.command + " 2>&1");
    EXPECT_NE(r.exit_code, 0) << c.command << "\n" << r.output;
    EXPECT_NE(r.exit_code, 124) << "waited on the FIFO: " << c.command;
    EXPECT_TRUE(contains(r.output, c.says)) << c.command << "\n" << r.output;
    EXPECT_FALSE(contains(r.output, "does not exist")) << c.command << "\n" << r.output;
  }
  // A path that does not exist is still said to.
  auto missing = run_command(train + " --ckpt " + quote((dir_->path() / "none.ckpt").string()) + " 2>&1");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_TRUE(contains(missing.output, "none.ckpt' does not exist")) << missing.output;
}

// Bytes a terminal acts on (ESC starts an escape sequence: clear the screen, recolour, retitle)
// from metadata.yaml, from neural group names and from the command line are shown as \x1b.
// Before: written raw, in errors, `preprocess --inspect` and the validation line.
TEST_F(UserWork, TerminalBytesFromFilesRecordsAndFlagsAreShownEscaped) {
  const std::string esc = "\x1b[2J\x1b]0;owned\x07";
  auto no_raw_escape = [](const std::string& out) { return out.find('\x1b') == std::string::npos; };
  // metadata.yaml
  const fs::path db = dir_->path() / "meta_db";
  fs::copy(db_, db, fs::copy_options::recursive);
  write_file_atomic(db / "metadata.yaml", "channels: 1\nsr: 44100" + esc + "\nlazy: false\n");
  for (const std::string& command : {tiny_train_command(db, dir_->path() / "meta_runs", "--max_steps 2"),
                                     bin_path("preprocess") + " --inspect " + quote(db.string())}) {
    auto r = run_command(command + " 2>&1");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "44100\\x1b[2J\\x1b]0;owned\\x07")) << r.output;
    EXPECT_TRUE(no_raw_escape(r.output)) << command;
  }
  // Command-line values echoed in errors, in every program.
  for (const std::string& command :
       {bin_path("train") + " --config " + quote("v2" + esc),
        bin_path("train") + " --config tiny_rave --batch " + quote("4" + esc),
        bin_path("export") + " --run x --quantize " + quote("int8" + esc),
        bin_path("export") + " --benchmark x.ts --threads " + quote("1" + esc),
        bin_path("preprocess") + " --inspect " + quote(dir_->path().string() + "/none" + esc),
        bin_path("profile-report") + " " + quote(dir_->path().string() + "/none" + esc)}) {
    auto r = run_command(command + " 2>&1");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "\\x1b[2J")) << command << "\n" << r.output;
    EXPECT_TRUE(no_raw_escape(r.output)) << command << "\n" << r.output;
  }
  // A neural group named by its file's stem: the import, --inspect and the validation line.
  const fs::path h5 = dir_->path() / "groups_h5";
  auto g = run_command(bin_path("preprocess") + " --generate_neural_demo " + quote(h5.string()) +
                       " --groups 2 --units 16 --trials 80 --seed 3 2>&1");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(h5)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 2u);
  fs::rename(files[0], h5 / ("monkey" + esc + files[0].extension().string()));
  const fs::path ndb = dir_->path() / "groups_db";
  auto i = run_command(bin_path("preprocess") + " --kind neural --input_path " + quote(h5.string()) +
                       " --output_path " + quote(ndb.string()) + " 2>&1");
  ASSERT_EQ(i.exit_code, 0) << i.output;
  auto inspect = run_command(bin_path("preprocess") + " --inspect " + quote(ndb.string()) + " 2>&1");
  auto train = run_command(bin_path("train") + " --config tiny_ssm --db_path " + quote(ndb.string()) +
                           " --out_path " + quote((dir_->path() / "groups_runs").string()) +
                           " --max_steps 4 --val_every 2 --threads 1 2>&1");
  for (const auto* r : {&i, &inspect, &train}) {
    EXPECT_EQ(r->exit_code, 0) << r->output;
    EXPECT_TRUE(contains(r->output, "monkey\\x1b[2J")) << r->output;
    EXPECT_TRUE(no_raw_escape(r->output)) << r->output;
  }
}

// The demo generators write fixed names into a folder the user names: a file already there is
// refused (nothing written) unless --force. Before: replaced silently (H5F_ACC_TRUNC, sf_open).
TEST_F(UserWork, DemoGeneratorsReplaceNothingWithoutForce) {
  const fs::path audio = dir_->path() / "my_audio", h5 = dir_->path() / "my_h5";
  fs::create_directories(audio / "tones");
  fs::create_directories(h5);
  write_file_atomic(audio / "tones" / "harmonic_44k_mono.wav", "my own recording");
  write_file_atomic(h5 / "synthetic_reach_0.h5", "my own session");
  const struct {
    std::string command;
    fs::path folder, mine;
    std::string says;
  } cases[] = {
      {bin_path("preprocess") + " --generate_demo " + quote(audio.string()) + " --demo_seconds 0.5", audio,
       audio / "tones" / "harmonic_44k_mono.wav", "--generate_demo: '"},
      {bin_path("preprocess") + " --generate_neural_demo " + quote(h5.string()) + " --groups 2 --trials 8",
       h5, h5 / "synthetic_reach_0.h5", "--generate_neural_demo: '"},
  };
  auto files_in = [](const fs::path& folder) {
    size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(folder)) n += e.is_regular_file() ? 1 : 0;
    return n;
  };
  for (const auto& c : cases) {
    const std::string before = read_file(c.mine);
    auto r = run_command(c.command + " 2>&1");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, c.says + c.mine.string() + "' already exists; pass --force")) << r.output;
    EXPECT_EQ(read_file(c.mine), before);
    EXPECT_EQ(files_in(c.folder), 1u) << "the refused run wrote some of the demo's files";
    auto forced = run_command(c.command + " --force 2>&1");
    EXPECT_EQ(forced.exit_code, 0) << forced.output;
    EXPECT_NE(read_file(c.mine), before);
  }
  auto stray = run_command(bin_path("preprocess") + " --input_path a --output_path b --force 2>&1");
  EXPECT_NE(stray.exit_code, 0);
  EXPECT_TRUE(contains(stray.output, "--force goes with --generate_demo or --generate_neural_demo"))
      << stray.output;
}

// preprocess (audio and neural) into a folder that already holds a database, or only its
// metadata.yaml, is refused before anything is written there. Before: a folder holding a
// metadata.yaml and no data.mdb was imported into, its metadata.yaml replaced.
TEST_F(UserWork, AnImportReplacesNoDatabaseOrMetadataInItsFolder) {
  const fs::path audio = dir_->path() / "import_audio", h5 = dir_->path() / "import_h5";
  for (const auto& demo :
       {bin_path("preprocess") + " --generate_demo " + quote(audio.string()) + " --demo_seconds 0.5",
        bin_path("preprocess") + " --generate_neural_demo " + quote(h5.string()) +
            " --groups 1 --trials 4"}) {
    auto r = run_command(demo + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const fs::path notes = dir_->path() / "notes";
  fs::create_directories(notes);
  write_file_atomic(notes / "metadata.yaml", "my notes: keep\n");
  const uint64_t entries = LmdbStore(db_, LmdbStore::Mode::kReadOnly).count();
  const std::string db_bytes = read_file(db_ / "data.mdb");
  const struct {
    std::string inputs;
    fs::path folder;
    std::string says;
  } cases[] = {
      {"--input_path " + quote(audio.string()), notes,
       "already holds a metadata.yaml, which this import would replace"},
      {"--kind neural --input_path " + quote(h5.string()), notes,
       "already holds a metadata.yaml, which this import would replace"},
      {"--input_path " + quote(audio.string()), db_,
       "already holds a database of " + std::to_string(entries) + " entries"},
      {"--kind neural --input_path " + quote(h5.string()), db_,
       "already holds a database of " + std::to_string(entries) + " entries"},
  };
  for (const auto& c : cases) {
    auto r = run_command(bin_path("preprocess") + " " + c.inputs + " --output_path " +
                         quote(c.folder.string()) + " 2>&1");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "--output_path '" + c.folder.string() + "' " + c.says)) << r.output;
  }
  EXPECT_EQ(read_file(notes / "metadata.yaml"), "my notes: keep\n");
  EXPECT_FALSE(fs::exists(notes / "data.mdb")) << "the refused import created a database next to the notes";
  EXPECT_EQ(read_file(db_ / "data.mdb"), db_bytes);
}

// kill -9 after a checkpoint, then --ckpt last: timing_profile.json holds every step once. The
// profiles are flushed with every checkpoint. Before: the steps between the profile's last
// flush (every 2 s) and the checkpoint were lost, the resume recording only those after it.
TEST_F(UserWork, AResumeAfterKill9LeavesNoGapInTheTimingProfile) {
  const fs::path out = dir_->path() / "killed";
  BackgroundProcess p(
      tiny_train_command(db_, out, "--max_steps 100000 --save_every 5 --enable_timing_profiling"),
      dir_->path() / "killed.log");
  fs::path run;
  ASSERT_TRUE(p.wait_until(
      [&] {
        run = run_dir_from_output(p.log());
        // step_N.ckpt is written before last.ckpt: once step 20's exists, last.ckpt is >= 15.
        return !run.empty() && fs::exists(run / "checkpoints" / "step_20.ckpt");
      },
      120))
      << p.log();
  p.signal(SIGKILL);
  ASSERT_EQ(p.wait_exit(60), 128 + SIGKILL);
  const int64_t resumed_at = read_checkpoint_meta(run / "checkpoints" / "last.ckpt").step;
  ASSERT_GE(resumed_at, 15);
  const int64_t end = resumed_at + 10;
  auto r = run_command(tiny_train_command(
      db_, out, "--max_steps " + std::to_string(end) + " --enable_timing_profiling --ckpt last"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, ".unreadable")) << r.output;
  const Json profile = read_json(run / "timing_profile.json");
  std::vector<int64_t> steps;
  for (const auto& e : profile) steps.push_back(e.at("step").get<int64_t>());
  std::vector<int64_t> every(static_cast<size_t>(end));
  for (int64_t s = 0; s < end; ++s) every[static_cast<size_t>(s)] = s;
  EXPECT_EQ(steps, every) << "resumed at " << resumed_at;
}

}  // namespace
}  // namespace rt::e2e
