// An output the user asked for and did not get fails the run: exit 1, the summary's status and
// `lost_outputs` name it. Before: the final last.ckpt and the trace failed with a warning only,
// exit 0 and status "completed", and `--ckpt last` failed afterwards.
#include "e2e/e2e_fixtures.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

using testing::contains;

class LostOutputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_lost_outputs");
    db_ = make_demo_db(dir_->path());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static ScratchDir* dir_;
  static fs::path db_;
};
ScratchDir* LostOutputs::dir_ = nullptr;
fs::path LostOutputs::db_;

// Bytes `file` takes on a tmpfs: whole 4 KiB pages.
uintmax_t pages(uintmax_t bytes) { return (bytes + 4095) / 4096 * 4096; }

TEST_F(LostOutputs, AFinalLastCkptThatCannotBeWrittenFailsTheRun) {
  const fs::path disk = dir_->path() / "small_disk";
  fs::create_directories(disk);
  auto probe =
      run_command("unshare -rm sh -c 'mount -t tmpfs -o size=64k none " + quote(disk.string()) + "'");
  if (probe.exit_code != 0) GTEST_SKIP() << "cannot mount a small tmpfs here (unshare -rm): " << probe.output;
  // No periodic checkpoint; the validation at the last step writes best.ckpt, then last.ckpt
  // is due. The disk holds everything the sizing run wrote but half of last.ckpt.
  const std::string flags = "--max_steps 4 --save_every 1000 --val_every 1000";
  auto sizing = run_command(tiny_train_command(db_, dir_->path() / "sizing", flags));
  ASSERT_EQ(sizing.exit_code, 0) << sizing.output;
  const fs::path sized = run_dir_from_output(sizing.output);
  uintmax_t before = 0, last = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_->path() / "sizing")) {
    if (!e.is_regular_file()) continue;
    if (e.path().filename() == "last.ckpt") {
      last = e.file_size();
    } else {
      before += pages(e.file_size()) + 4096;
    }
  }
  ASSERT_GT(last, 256u * 1024) << "the checkpoint is too small to size the disk by";
  // The summary is rewritten through a temporary file: room for a second copy.
  before += pages(fs::file_size(sized / "training_summary.json"));
  const uintmax_t kib = (before + last / 2) / 1024;
  const fs::path out = disk / "runs";
  write_file_atomic(dir_->path() / "last_ckpt.sh",
                    "mount -t tmpfs -o size=" + std::to_string(kib) + "k none " + quote(disk.string()) +
                        " || exit 3\n" + tiny_train_command(db_, out, flags) +
                        "\nrc=$?\necho '--- summary'\ncat " + quote(out.string()) +
                        "/*/training_summary.json\nls -laR " + quote(disk.string()) + "\nexit $rc\n");
  auto r = run_command("unshare -rm sh " + quote((dir_->path() / "last_ckpt.sh").string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "error: could not write last.ckpt: disk full while writing")) << r.output;
  EXPECT_TRUE(contains(r.output, "training failed: could not write last.ckpt")) << r.output;
  const auto summary_at = r.output.find("--- summary");
  ASSERT_NE(summary_at, std::string::npos) << r.output;
  const std::string summary = r.output.substr(summary_at);
  EXPECT_TRUE(contains(summary, "\"status\": \"failed: could not write last.ckpt")) << summary;
  EXPECT_TRUE(contains(summary, "\"lost_outputs\"")) << summary;
  EXPECT_FALSE(contains(summary, "\"running\"")) << summary;
  EXPECT_FALSE(contains(r.output, ".tmp.")) << "a temporary file was left:\n" << r.output;
}

// A disk that fills while the run trains: at the end neither last.ckpt nor a new summary fits.
// The summary's final status is written over the "running" file in place, in blocks it already
// holds, so after the process ended it does not say "running". Before: it stayed "running".
TEST_F(LostOutputs, ASummaryThatCannotBeWrittenWholeDoesNotStayRunning) {
  const fs::path disk = dir_->path() / "full_disk";
  fs::create_directories(disk);
  auto probe =
      run_command("unshare -rm sh -c 'mount -t tmpfs -o size=64k none " + quote(disk.string()) + "'");
  if (probe.exit_code != 0) GTEST_SKIP() << "cannot mount a small tmpfs here (unshare -rm): " << probe.output;
  const fs::path out = disk / "runs", log = dir_->path() / "full_disk.log";  // the log beside the disk
  // The run trains until the disk is full, then gets SIGTERM: its final writes meet a full disk.
  write_file_atomic(
      dir_->path() / "full_disk.sh",
      "mount -t tmpfs -o size=32m none " + quote(disk.string()) + " || exit 3\n" +
          tiny_train_command(db_, out,
                             "--max_steps 100000 --log_every 1 --save_every 100000 --val_every 100000") +
          " > " + quote(log.string()) + " 2>&1 &\npid=$!\ni=0\n" + "while ! grep -q '^step 3' " +
          quote(log.string()) + "; do sleep 0.1; i=$((i+1)); [ $i -gt 3000 ] && break; done\n" +
          "dd if=/dev/zero of=" + quote((disk / "filler").string()) + " bs=64k 2>/dev/null\n" +
          "dd if=/dev/zero of=" + quote((disk / "filler2").string()) + " bs=4k 2>/dev/null\n" +
          "kill -TERM $pid\nwait $pid\nrc=$?\necho \"--- rc $rc\"\ncat " + quote(log.string()) +
          "\necho '--- summary'\ncat " + quote(out.string()) + "/*/training_summary.json\n");
  auto r = run_command("unshare -rm sh " + quote((dir_->path() / "full_disk.sh").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "--- rc 1\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "holds the final status only")) << r.output;
  const auto summary_at = r.output.find("--- summary");
  ASSERT_NE(summary_at, std::string::npos) << r.output;
  const std::string summary = r.output.substr(summary_at);
  EXPECT_FALSE(contains(summary, "\"running\"")) << summary;
  EXPECT_TRUE(contains(summary, "\"status\": \"failed: ")) << summary;
  EXPECT_TRUE(contains(summary, "(training_summary.json could not be written whole)")) << summary;
}

TEST_F(LostOutputs, ATraceThatCannotBeWrittenFailsTheRunNamingIt) {
  // The trace goes into profiling.output_dir; a directory that vanishes under the run (replaced
  // by a file) makes the trace's write fail at the end of its window.
  const fs::path traces = dir_->path() / "traces";
  fs::create_directories(traces);
  const fs::path out = dir_->path() / "trace_runs";
  BackgroundProcess p(
      tiny_train_command(db_, out,
                         "--max_steps 400 --log_every 1 --enable_profiling --profiling.skip_first 29 "
                         "--profile_steps 1 --profiling.output_dir " +
                             quote(traces.string())),
      dir_->path() / "trace.log");
  ASSERT_TRUE(p.wait_until([&] { return last_logged_step(p.log()) >= 2; }, 120)) << p.log();
  if (last_logged_step(p.log()) >= 30)
    GTEST_SKIP() << "the run passed its trace window before the directory went";
  fs::remove_all(traces);
  write_file_atomic(traces, "not a directory");
  const int code = p.wait_exit(300);
  const std::string log = p.log();
  EXPECT_EQ(code, 1) << log;
  EXPECT_TRUE(
      contains(log, "training failed: could not write the trace output 'chrome_trace' of steps 30-30"))
      << log;
  const Json summary = read_json(run_dir_from_output(log) / "training_summary.json");
  EXPECT_EQ(summary.at("status").get<std::string>().rfind("failed: could not write the trace output", 0), 0u)
      << summary.dump(2);
  ASSERT_TRUE(summary.contains("lost_outputs")) << summary.dump(2);
  // The checkpoint is still written: one lost output does not cost the others.
  EXPECT_TRUE(fs::exists(run_dir_from_output(log) / "checkpoints" / "last.ckpt"));
}

}  // namespace
}  // namespace rt::e2e
