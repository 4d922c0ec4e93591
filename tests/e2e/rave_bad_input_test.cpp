// Bad input ends with one clear message naming the key/file and what would work; a NaN loss
// fails the run without touching the last good checkpoint.
#include <unistd.h>

#include <map>

#include "e2e/e2e_fixtures.h"
#include "training/checkpoint.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

using testing::contains;

class RaveBadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_rave_bad");
    db_ = make_demo_db(dir_->path());  // mono, records of 2 × 8192 samples
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static ScratchDir* dir_;
  static fs::path db_;
};
ScratchDir* RaveBadInput::dir_ = nullptr;
fs::path RaveBadInput::db_;

TEST_F(RaveBadInput, DatabaseShorterThanNSignalNamesBothLengths) {
  auto r = run_command(tiny_train_command(db_, dir_->path() / "runs", "--max_steps 2 --n_signal 32768"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "holds examples of 16384 samples, fewer than data.n_signal = 32768"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "--num_signal")) << r.output;
  EXPECT_FALSE(contains(r.output, "step 1/")) << "trained anyway:\n" << r.output;
}

TEST_F(RaveBadInput, RunawayThreadCountsStopBeforeAnythingIsWritten) {
  // --threads 100000 once started ~24,000 threads; --workers 100000 ran out of memory.
  for (const std::string flag : {"--threads 100000", "--workers 100000"}) {
    const fs::path out = dir_->path() / "threads";
    auto r = run_command(tiny_train_command(db_, out, "--max_steps 2 " + flag));
    EXPECT_EQ(r.exit_code, 2) << r.output;  // a refused setting, as every config error
    EXPECT_TRUE(contains(r.output, "is more than this machine can use: at most")) << r.output;
    EXPECT_FALSE(fs::exists(out)) << "a run directory was created for " << flag;
  }
}

TEST_F(RaveBadInput, ARunEndingBeforeItsFirstTraceWindowSaysSoAtStartAndEnd) {
  // skip_first 10 + wait 0 + warmup 1: the first recorded step is 11, the run trains steps 0–2.
  auto r = run_command(tiny_train_command(db_, dir_->path() / "notrace", "--max_steps 3 --enable_profiling"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "its first window records steps 11–13")) << r.output;
  EXPECT_TRUE(contains(r.output, "this run trains steps 0–2")) << r.output;
  EXPECT_TRUE(contains(r.output, "no trace will be written")) << r.output;
  EXPECT_TRUE(contains(r.output, "no trace was written")) << r.output;
  // A run that reaches its window says nothing of the kind.
  auto ok = run_command(
      tiny_train_command(db_, dir_->path() / "notrace",
                         "--max_steps 3 --enable_profiling --profile_steps 1 --profiling.skip_first 0"));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_FALSE(contains(ok.output, "no trace")) << ok.output;
}

TEST_F(RaveBadInput, ChannelCountMismatchNamesTheKeyAndTheDatabaseChannels) {
  auto r = run_command(tiny_train_command(db_, dir_->path() / "runs", "--max_steps 2 --data.channels 2"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(
      contains(r.output, "data.channels = 2, but database '" + db_.string() + "' holds 1-channel audio"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "set data.channels to 1")) << r.output;
  // The matching value trains.
  auto ok = run_command(tiny_train_command(db_, dir_->path() / "runs", "--max_steps 1 --data.channels 1"));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST_F(RaveBadInput, CheckpointOfAnotherConfigIsRefusedWithBothSignatures) {
  auto first = run_command(tiny_train_command(db_, dir_->path() / "ck", "--max_steps 2"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path ckpt = run_dir_from_output(first.output) / "checkpoints" / "last.ckpt";
  ASSERT_TRUE(fs::exists(ckpt));
  auto r = run_command(tiny_train_command(
      db_, dir_->path() / "ck", "--max_steps 4 --ckpt " + quote(ckpt.string()) + " --model.capacity 16"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "checkpoint '" + ckpt.string() + "' was made with another config"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "capacity = 8")) << r.output;
  EXPECT_TRUE(contains(r.output, "capacity = 16")) << r.output;
  EXPECT_FALSE(contains(r.output, "step 3/")) << r.output;
}

// Every regular file under `dir`, relative, with its size and modification time.
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> listing(const fs::path& dir) {
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = {e.file_size(), e.last_write_time()};
  return out;
}

TEST_F(RaveBadInput, RefusedResumesLeaveTheOriginalRunAndLatestUntouched) {
  const fs::path out = dir_->path() / "untouched";
  auto first = run_command(tiny_train_command(db_, out, "--max_steps 2"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path run = run_dir_from_output(first.output);
  const fs::path ckpt = run / "checkpoints" / "last.ckpt";
  const auto files = listing(out);
  const std::string latest = read_file(out / "latest");
  // Another config: refused before config.toml, `latest` or an events file is written.
  auto other = run_command(
      tiny_train_command(db_, out, "--max_steps 4 --ckpt " + quote(ckpt.string()) + " --model.capacity 16"));
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_TRUE(contains(other.output, "was made with another config")) << other.output;
  EXPECT_FALSE(contains(other.output, "run directory:")) << other.output;
  // A corrupt copy of the checkpoint outside any run: no new run directory either.
  const fs::path corrupt = dir_->path() / "corrupt.ckpt";
  const std::string bytes = read_file(ckpt);
  write_file_atomic(corrupt, bytes.substr(0, bytes.size() / 2));
  auto bad = run_command(tiny_train_command(db_, out, "--max_steps 4 --ckpt " + quote(corrupt.string())));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, corrupt.string())) << bad.output;
  EXPECT_EQ(listing(out), files);
  EXPECT_EQ(read_file(out / "latest"), latest);
  // `--ckpt last` still finds the good run.
  auto last = run_command(tiny_train_command(db_, out, "--max_steps 3 --ckpt last"));
  EXPECT_EQ(last.exit_code, 0) << last.output;
  EXPECT_TRUE(contains(last.output, "at step 2")) << last.output;
}

TEST_F(RaveBadInput, ACheckpointWithOneFlippedBitIsRefusedNamingTheFile) {
  auto first = run_command(tiny_train_command(db_, dir_->path() / "flip", "--max_steps 2"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path ckpt = run_dir_from_output(first.output) / "checkpoints" / "last.ckpt";
  // One bit of the largest tensor's stored bytes: torch's reader alone loads it and trains on.
  std::string largest;
  for (const auto& [name, t] : checkpoint_tensors(ckpt)) {
    if (t.nbytes() > largest.size()) largest.assign(static_cast<const char*>(t.data_ptr()), t.nbytes());
  }
  std::string bytes = read_file(ckpt);
  const size_t at = bytes.find(largest);
  ASSERT_NE(at, std::string::npos);
  bytes[at + largest.size() / 2] ^= 0x04;
  const fs::path flipped = dir_->path() / "flipped.ckpt";
  write_file_atomic(flipped, bytes);
  auto r = run_command(
      tiny_train_command(db_, dir_->path() / "flip", "--max_steps 4 --ckpt " + quote(flipped.string())));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "checkpoint '" + flipped.string() + "' is damaged")) << r.output;
  EXPECT_TRUE(contains(r.output, "fails its CRC-32 check")) << r.output;
  EXPECT_FALSE(contains(r.output, "run directory:")) << r.output;
}

TEST_F(RaveBadInput, ASecondWriterOfARunDirectoryIsRefusedNamingTheFirstOnesPid) {
  const fs::path out = dir_->path() / "locked";
  auto first = run_command(tiny_train_command(db_, out, "--max_steps 2"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path run = run_dir_from_output(first.output);
  // A long resume holds the run; a second `--ckpt last` comes while it trains.
  BackgroundProcess holder(tiny_train_command(db_, out, "--max_steps 100000 --log_every 1 --ckpt last"),
                           dir_->path() / "holder.log");
  ASSERT_TRUE(holder.wait_until([&] { return contains(holder.log(), "step 3/"); }, 300)) << holder.log();
  const auto config_before = read_file(run / "config.toml");
  auto second = run_command(tiny_train_command(db_, out, "--max_steps 5 --ckpt last --train.lr 0.5"));
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_TRUE(contains(second.output, "run directory '" + fs::canonical(run).string() +
                                          "' is in use by another train process (pid " +
                                          std::to_string(holder.pid()) + ","))
      << second.output;
  EXPECT_EQ(read_file(run / "config.toml"), config_before) << "the refused writer rewrote config.toml";
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_exit(120), 128 + SIGTERM) << holder.log();
}

TEST_F(RaveBadInput, CheckpointOfOtherShapesIsRefusedNamingTheTensors) {
  auto first = run_command(tiny_train_command(db_, dir_->path() / "mono", "--max_steps 2"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path ckpt = run_dir_from_output(first.output) / "checkpoints" / "last.ckpt";
  // The same audio stored as stereo: the same config, a model with 2-channel input and output.
  const fs::path stereo = dir_->path() / "stereo_db";
  auto p = run_command(bin_path("preprocess") + " --input_path " + quote((dir_->path() / "audio").string()) +
                       " --output_path " + quote(stereo.string()) + " --num_signal 8192 --channels 2");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const fs::path out = dir_->path() / "stereo_runs";
  auto r = run_command(tiny_train_command(stereo, out, "--max_steps 4 --ckpt " + quote(ckpt.string())));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "does not fit the model built from this config and database")) << r.output;
  EXPECT_TRUE(contains(r.output, "in the checkpoint")) << r.output;
  EXPECT_FALSE(contains(r.output, "resumed from")) << r.output;
  EXPECT_FALSE(contains(r.output, "c10::Error")) << r.output;
  EXPECT_FALSE(fs::exists(out)) << "a run directory was created";
}

TEST_F(RaveBadInput, StaleTemporaryFilesAreRemovedWhenTheRunIsReopened) {
  auto first = run_command(tiny_train_command(db_, dir_->path() / "stale", "--max_steps 2"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path run = run_dir_from_output(first.output);
  // A finished process's pid stands for a writer killed with kill -9; ours is alive.
  auto child = run_command("sh -c 'echo $$'");
  const std::string dead = std::to_string(std::stol(child.output));
  const fs::path left = run / "checkpoints" / ("last.ckpt.tmp." + dead);
  const fs::path profile = run / ("timing_profile.json.tmp." + dead);
  const fs::path live = run / "checkpoints" / ("last.ckpt.tmp." + std::to_string(::getpid()));
  for (const auto& f : {left, profile, live}) write_file_atomic(f, "partial");
  auto r = run_command(
      tiny_train_command(db_, dir_->path() / "stale",
                         "--max_steps 3 --ckpt " + quote((run / "checkpoints" / "last.ckpt").string())));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(left));
  EXPECT_FALSE(fs::exists(profile));
  EXPECT_TRUE(fs::exists(live)) << "a live process's temporary file was removed";
  EXPECT_TRUE(contains(r.output, "a temporary file left by process " + dead)) << r.output;
}

TEST_F(RaveBadInput, FullDiskEndsWithAClearMessageAndKeepsEarlierCheckpoints) {
  // A small tmpfs of our own, in a user and mount namespace; skipped where that is not allowed.
  const fs::path disk = dir_->path() / "small_disk";
  fs::create_directories(disk);
  auto probe =
      run_command("unshare -rm sh -c 'mount -t tmpfs -o size=64k none " + quote(disk.string()) + "'");
  if (probe.exit_code != 0) GTEST_SKIP() << "cannot mount a small tmpfs here (unshare -rm): " << probe.output;
  // Sized from one checkpoint: the first saves fit, a later one does not.
  auto sizing = run_command(tiny_train_command(db_, dir_->path() / "sizing", "--max_steps 1"));
  ASSERT_EQ(sizing.exit_code, 0) << sizing.output;
  const uintmax_t ckpt = fs::file_size(run_dir_from_output(sizing.output) / "checkpoints" / "last.ckpt");
  const uintmax_t kib = (ckpt * 5 / 2 + 256 * 1024) / 1024;
  const fs::path out = disk / "runs";
  // The listing is printed inside the namespace, before its tmpfs goes away.
  write_file_atomic(dir_->path() / "full_disk.sh",
                    "mount -t tmpfs -o size=" + std::to_string(kib) + "k none " + quote(disk.string()) +
                        " || exit 3\n" + tiny_train_command(db_, out, "--max_steps 40 --save_every 2") +
                        "\nrc=$?\nls -laR " + quote(disk.string()) + "\nexit $rc\n");
  auto r = run_command("unshare -rm sh " + quote((dir_->path() / "full_disk.sh").string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "disk full while writing")) << r.output;
  EXPECT_TRUE(contains(r.output, "training failed")) << r.output;
  EXPECT_FALSE(contains(r.output, "terminate called")) << r.output;
  EXPECT_FALSE(contains(r.output, ".tmp.")) << "a temporary file was left:\n" << r.output;
  EXPECT_TRUE(contains(r.output, "step_2.ckpt")) << r.output;
}

TEST_F(RaveBadInput, NonFiniteLossFailsTheRunAndKeepsTheLastGoodCheckpoint) {
  // The batch of step 15 is NaN (tests/support/nan_batches.h, through train_with_faults).
  std::string command =
      tiny_train_command(db_, dir_->path() / "nan", "--max_steps 30 --save_every 10 --log_every 5");
  command.replace(0, bin_path("train").size(), "RT_TEST_NAN_AT_STEP=15 " + bin_path("train_with_faults"));
  auto r = run_command(command);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "non-finite loss at step 15")) << r.output;
  const fs::path run = run_dir_from_output(r.output);
  ASSERT_FALSE(run.empty()) << r.output;

  auto summary = read_json(run / "training_summary.json");
  EXPECT_EQ(summary["status"], "failed: non-finite loss at step 15");
  EXPECT_EQ(summary["total_steps"], 15);  // steps 0..14 completed

  const fs::path last = run / "checkpoints" / "last.ckpt";
  ASSERT_TRUE(fs::exists(last));
  EXPECT_EQ(read_checkpoint_meta(last).step, 10);
  EXPECT_FALSE(fs::exists(run / "checkpoints" / "step_20.ckpt"));
  const auto tensors = checkpoint_tensors(last);
  const auto step10 = checkpoint_tensors(run / "checkpoints" / "step_10.ckpt");
  ASSERT_EQ(tensors.size(), step10.size());
  for (const auto& [name, t] : tensors) {
    if (t.is_floating_point()) {
      EXPECT_TRUE(torch::isfinite(t).all().item<bool>()) << name;
    }
    EXPECT_TRUE(torch::equal(t, step10.at(name))) << name;
  }
  // The intact checkpoint resumes.
  auto resumed = run_command(
      tiny_train_command(db_, dir_->path() / "nan", "--max_steps 12 --ckpt " + quote(last.string())));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, "at step 10")) << resumed.output;
}

}  // namespace
}  // namespace rt::e2e
