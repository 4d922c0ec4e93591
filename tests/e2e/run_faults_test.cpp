// Faults an operator meets in long runs: a database truncated under the reader, folders that
// cannot be written (found before the first step, not at the first save), a read-only out_path
// whose `latest` already names the run.
#include "e2e/e2e_fixtures.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

using testing::contains;

class RunFaults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_run_faults");
    db_ = make_demo_db(dir_->path());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // A mount namespace of our own (unshare -rm) where bind mounts can be made read-only; empty
  // when allowed, else why not.
  static std::string mount_namespace_missing() {
    const fs::path probe = dir_->path() / "mount_probe";
    fs::create_directories(probe);
    auto r =
        run_command("unshare -rm sh -c 'mount --bind " + quote(probe.string()) + " " + quote(probe.string()) +
                    " && mount -o remount,bind,ro " + quote(probe.string()) + "'");
    return r.exit_code == 0 ? "" : "cannot make a read-only bind mount here (unshare -rm): " + r.output;
  }
  static ScratchDir* dir_;
  static fs::path db_;
};
ScratchDir* RunFaults::dir_ = nullptr;
fs::path RunFaults::db_;

// truncate -s 0 DB/data.mdb under a training run: an error naming the database, exit 1, a
// summary that says failed. Before: SIGBUS (rc 135), no message, the summary left "running".
TEST_F(RunFaults, ADatabaseTruncatedWhileTrainingFailsTheRunNamingIt) {
  const fs::path db = dir_->path() / "db_copy";
  fs::copy(db_, db, fs::copy_options::recursive);
  BackgroundProcess p(tiny_train_command(db, dir_->path() / "truncated", "--max_steps 100000 --log_every 1"),
                      dir_->path() / "truncated.log");
  ASSERT_TRUE(p.wait_until([&] { return last_logged_step(p.log()) >= 3; }, 120)) << p.log();
  fs::resize_file(db / "data.mdb", 0);
  const int code = p.wait_exit(120);
  const std::string log = p.log();
  EXPECT_EQ(code, 1) << log;
  EXPECT_TRUE(
      contains(log, "LMDB database '" + db.string() + "' changed under the reader: data.mdb is now 0 bytes"))
      << log;
  const Json summary = read_json(run_dir_from_output(log) / "training_summary.json");
  EXPECT_TRUE(contains(summary.at("status").get<std::string>(), "failed: ")) << summary.dump(2);
  EXPECT_TRUE(contains(summary.at("status").get<std::string>(), db.string())) << summary.dump(2);
}

// A read-only checkpoints/ is refused before the first step, naming it; the finished run's
// summary stays "completed". Before: training ran, failed at the first save and rewrote the
// summary as "failed".
TEST_F(RunFaults, AReadOnlyCheckpointsFolderIsRefusedBeforeTheFirstStep) {
  if (const std::string why = mount_namespace_missing(); !why.empty()) GTEST_SKIP() << why;
  const fs::path out = dir_->path() / "ro_ckpt";
  auto first = run_command(tiny_train_command(db_, out, "--max_steps 2"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path run = run_dir_from_output(first.output);
  const fs::path ckpts = run / "checkpoints";
  write_file_atomic(dir_->path() / "ro_ckpt.sh",
                    "mount --bind " + quote(ckpts.string()) + " " + quote(ckpts.string()) + " || exit 3\n" +
                        "mount -o remount,bind,ro " + quote(ckpts.string()) + " || exit 3\n" +
                        tiny_train_command(db_, out, "--max_steps 6 --save_every 2 --ckpt last") + "\n");
  auto r = run_command("unshare -rm sh " + quote((dir_->path() / "ro_ckpt.sh").string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "cannot write into the run's checkpoints folder '" + ckpts.string() + "'"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "Read-only file system")) << r.output;
  EXPECT_FALSE(contains(r.output, "step 3/")) << "trained anyway:\n" << r.output;
  EXPECT_EQ(read_json(run / "training_summary.json").at("status"), "completed");
}

// A read-only out_path whose `latest` already names the run resumes with --ckpt last.
// Before: refused, because `latest` was rewritten on every resume.
TEST_F(RunFaults, AReadOnlyOutPathResumesWhenLatestAlreadyNamesTheRun) {
  if (const std::string why = mount_namespace_missing(); !why.empty()) GTEST_SKIP() << why;
  const fs::path out = dir_->path() / "ro_out";
  auto first = run_command(tiny_train_command(db_, out, "--max_steps 2"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path run = run_dir_from_output(first.output);
  // out_path read-only; the run directory inside it writable (a mount of its own).
  write_file_atomic(dir_->path() / "ro_out.sh",
                    "mount --bind " + quote(out.string()) + " " + quote(out.string()) + " || exit 3\n" +
                        "mount -o remount,bind,ro " + quote(out.string()) + " || exit 3\n" + "mount --bind " +
                        quote(run.string()) + " " + quote(run.string()) + " || exit 3\n" +
                        "mount -o remount,bind,rw " + quote(run.string()) + " || exit 3\n" + "touch " +
                        quote((out / "probe").string()) + " 2>/dev/null && exit 4\n" +
                        tiny_train_command(db_, out, "--max_steps 4 --ckpt last") + "\n");
  auto r = run_command("unshare -rm sh " + quote((dir_->path() / "ro_out.sh").string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "at step 2")) << r.output;
  EXPECT_TRUE(contains(r.output, "training completed after")) << r.output;
}

// profiling.output_dir that cannot be written is refused before the first step.
TEST_F(RunFaults, AnUnwritableProfilesFolderIsRefusedBeforeTheFirstStep) {
  const fs::path not_a_dir = dir_->path() / "plain_file";
  write_file_atomic(not_a_dir, "x");
  auto r = run_command(tiny_train_command(db_, dir_->path() / "ro_prof",
                                          "--max_steps 4 --enable_timing_profiling --profiling.output_dir " +
                                              quote((not_a_dir / "profiles").string())));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "profiling.output_dir '" + (not_a_dir / "profiles").string() + "'"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "step 1/")) << "trained anyway:\n" << r.output;
}

}  // namespace
}  // namespace rt::e2e
