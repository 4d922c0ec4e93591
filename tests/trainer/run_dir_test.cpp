#include "trainer/run_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <regex>
#include <set>

#include "config/config.h"
#include "support/expect.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/run_pointer.h"

namespace rt {
namespace {

namespace fs = std::filesystem;

std::string today() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

TEST(RunDir, NameHasDateAndSixHexAndLatestPointsAtTheNewestRun) {
  testing::ScratchDir scratch;
  const fs::path out = scratch / "runs";
  const RunDir first = create_run_dir(out, "v3");
  const std::string name = first.path.filename().string();
  EXPECT_TRUE(std::regex_match(name, std::regex(R"(v3_\d{4}-\d{2}-\d{2}_[0-9a-f]{6})"))) << name;
  EXPECT_EQ(name.substr(3, 10), today());
  EXPECT_TRUE(fs::is_directory(first.path));
  EXPECT_FALSE(first.resumed);

  // A file naming the run, relative to out_path: TensorBoard walks (and follows links into)
  // every directory of its --logdir, so a `latest` link listed every run twice.
  const fs::path latest = out / "latest";
  EXPECT_FALSE(fs::is_symlink(latest));
  ASSERT_TRUE(fs::is_regular_file(latest));
  EXPECT_EQ(read_file(latest), name + "\n");
  EXPECT_TRUE(fs::equivalent(resolve_run_pointer(latest), first.path));

  const RunDir second = create_run_dir(out, "v3");
  EXPECT_NE(second.path, first.path);
  EXPECT_TRUE(fs::equivalent(resolve_run_pointer(latest), second.path));
  // Only the two runs and the pointer: no temporary file left behind.
  EXPECT_EQ(entries(out), (std::set<std::string>{"latest", first.path.filename().string(),
                                                 second.path.filename().string()}));
}

TEST(RunDir, ManyRunsOnOneDayGetDistinctDirectories) {
  testing::ScratchDir scratch;
  std::set<fs::path> seen;
  for (int i = 0; i < 20; ++i) seen.insert(create_run_dir(scratch.path(), "x").path);
  EXPECT_EQ(seen.size(), 20u);
}

TEST(RunDir, RejectsNamesThatAreNotOneFolder) {
  testing::ScratchDir scratch;
  EXPECT_HAS(std::string([&] {
               try {
                 create_run_dir(scratch.path(), "a/b");
               } catch (const Error& e) {
                 return std::string(e.what());
               }
               return std::string();
             }()),
             "'a/b'");
  EXPECT_THROW(create_run_dir(scratch.path(), ""), Error);
  // A newline or tab would make a directory that shells and logs cannot show; shown escaped.
  std::string msg;
  try {
    create_run_dir(scratch.path(), "run\nname");
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_HAS(msg, "'run\\x0aname'");
  EXPECT_HAS(msg, "control characters");
  EXPECT_THROW(create_run_dir(scratch.path(), "a\tb"), Error);
  EXPECT_TRUE(fs::is_empty(scratch.path())) << "a directory was created for a refused name";
}

TEST(RunDir, PrepareWritesTheResolvedConfigAndResumesFromLast) {
  testing::ScratchDir scratch;
  Config config;
  config.set("train.out_path", (scratch / "runs").string(), "test");
  config.set("train.name", "tiny", "test");
  config.set("train.batch", "3", "test");
  config.finalize();

  // No run yet: "last" names the path it looked for.
  Config resume = config;
  resume.set("train.ckpt", "last", "--ckpt");
  try {
    prepare_run_dir(resume);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), (scratch / "runs" / "latest" / "checkpoints" / "last.ckpt").string());
  }

  RunDir run = prepare_run_dir(config);
  EXPECT_TRUE(run.checkpoint.empty());
  const Config written = load_config_file(run.path / "config.toml");
  EXPECT_EQ(written, config);
  EXPECT_EQ(written.get_int("train.batch"), 3);

  write_file_atomic(run.path / "checkpoints" / "last.ckpt", "weights");
  const fs::path ckpt = resolve_checkpoint("last", scratch / "runs");
  EXPECT_EQ(ckpt, fs::canonical(run.path / "checkpoints" / "last.ckpt"));
  EXPECT_EQ(run_dir_of_checkpoint(ckpt), fs::canonical(run.path));

  // Another run moves `latest`; resuming that first run by path reuses its directory.
  const RunDir other = create_run_dir(scratch / "runs", "other");
  Config by_path = config;
  by_path.set("train.ckpt", ckpt.string(), "--ckpt");
  run.lock.reset();  // the first writer has ended
  const RunDir resumed = prepare_run_dir(by_path);
  EXPECT_TRUE(resumed.resumed);
  EXPECT_TRUE(fs::equivalent(resumed.path, run.path));
  EXPECT_EQ(resumed.checkpoint, ckpt);
  EXPECT_TRUE(fs::equivalent(resolve_run_pointer(scratch / "runs" / "latest"), run.path));
  EXPECT_EQ(load_config_file(run.path / "config.toml").get_string("train.ckpt"), ckpt.string());
  (void)other;

  // A checkpoint outside any run directory starts a fresh run.
  write_file_atomic(scratch / "loose.ckpt", "weights");
  EXPECT_TRUE(run_dir_of_checkpoint(scratch / "loose.ckpt").empty());
  Config loose = config;
  loose.set("train.ckpt", (scratch / "loose.ckpt").string(), "--ckpt");
  const RunDir fresh = prepare_run_dir(loose);
  EXPECT_FALSE(fresh.resumed);
  EXPECT_FALSE(fs::equivalent(fresh.path, run.path));
  EXPECT_THROW(resolve_checkpoint((scratch / "nope.ckpt").string(), scratch / "runs"), Error);
  EXPECT_TRUE(resolve_checkpoint("", scratch / "runs").empty());
}

TEST(RunDir, ASecondWriterIsRefusedNamingTheHolderAndNothingIsWritten) {
  testing::ScratchDir scratch;
  const fs::path out = scratch / "runs";
  RunDir first = create_run_dir(out, "a");
  const RunDir second = create_run_dir(out, "b");  // `latest` now points at b
  ASSERT_TRUE(first.lock);
  const std::string pid = std::to_string(::getpid());
  EXPECT_EQ(read_file(first.path / "train.lock"), pid + "\n");
  const auto before = entries(first.path);
  try {
    open_run_dir(first.path, out);
    FAIL() << "a second writer was let in";
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()),
               "run directory '" + first.path.string() + "' is in use by another train process");
    EXPECT_HAS(std::string(e.what()), "(pid " + pid + ",");
  }
  EXPECT_TRUE(fs::equivalent(resolve_run_pointer(out / "latest"), second.path))
      << "latest moved to the refused run";
  EXPECT_EQ(entries(first.path), before);
  // Once the holder ends (kill -9 included: the kernel drops the lock), the run reopens.
  first.lock.reset();
  const RunDir reopened = open_run_dir(first.path, out);
  EXPECT_TRUE(reopened.resumed);
  EXPECT_TRUE(fs::equivalent(resolve_run_pointer(out / "latest"), first.path));
}

TEST(RunDir, ALatestSymlinkOfAnEarlierVersionBecomesAPointerFile) {
  testing::ScratchDir scratch;
  const fs::path out = scratch / "runs";
  const RunDir first = create_run_dir(out, "a");
  fs::remove(out / "latest");
  fs::create_directory_symlink(first.path.filename(), out / "latest");
  EXPECT_TRUE(fs::equivalent(resolve_run_pointer(out / "latest"), first.path))
      << "an old link still resolves";
  const RunDir second = create_run_dir(out, "b");
  EXPECT_FALSE(fs::is_symlink(out / "latest"));
  EXPECT_TRUE(fs::equivalent(resolve_run_pointer(out / "latest"), second.path));
  // Anything else is left as given, for the caller's own error.
  EXPECT_EQ(resolve_run_pointer(first.path / "config.toml"), first.path / "config.toml");
  EXPECT_EQ(resolve_run_pointer(out / "missing"), out / "missing");
}

// A `latest` pointer whose run was deleted or moved is named as such, never read as a damaged
// checkpoint: train --init_from / --ckpt, evaluate and generate take the pointer the same way.
TEST(RunDir, ALatestPointerToARunThatIsGoneIsNamedAsSuch) {
  testing::ScratchDir dir;
  const fs::path out = dir.path() / "runs", run = out / "deleted_2026-12-06_abcdef";
  fs::create_directories(run / "checkpoints");
  write_file_atomic(run / "config.toml", "");
  write_latest_pointer(out, run);
  fs::remove_all(run);
  EXPECT_EQ(dangling_run_pointer(out / "latest"), run);
  EXPECT_HAS(
      testing::error_of([&] { resolve_run_or_checkpoint((out / "latest").string(), "train.init_from"); }),
      "train.init_from = '" + (out / "latest").string() + "' is a `latest` pointer naming the run '" +
          run.string() + "', which no longer exists");
  EXPECT_HAS(testing::error_of([&] { resolve_checkpoint("last", out); }),
             "names the run '" + run.string() + "', which no longer exists");
  EXPECT_HAS(testing::error_of([&] { resolve_checkpoint((out / "latest").string(), out); }),
             "is a `latest` pointer naming the run");
  // Anything else is no pointer: a run directory, a pointer to a run that exists, another file.
  write_file_atomic(dir.path() / "notes", "some text\n");
  EXPECT_TRUE(dangling_run_pointer(dir.path() / "notes").empty());
  EXPECT_TRUE(dangling_run_pointer(out).empty());
}

}  // namespace
}  // namespace rt
