#include "trainer/run_dir.h"

#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <regex>
#include <set>

#include "support/expect.h"
#include "support/test_support.h"
#include "trainer/config.h"
#include "util/atomic_file.h"
#include "util/error.h"

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

  const fs::path latest = out / "latest";
  ASSERT_TRUE(fs::is_symlink(latest));
  EXPECT_TRUE(fs::read_symlink(latest).is_relative()) << fs::read_symlink(latest);
  EXPECT_EQ(fs::read_symlink(latest), fs::path(name));
  EXPECT_TRUE(fs::equivalent(latest, first.path));

  const RunDir second = create_run_dir(out, "v3");
  EXPECT_NE(second.path, first.path);
  EXPECT_TRUE(fs::equivalent(latest, second.path));
  // Only the two runs and the link: no temporary link left behind.
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

  const RunDir run = prepare_run_dir(config);
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
  const RunDir resumed = prepare_run_dir(by_path);
  EXPECT_TRUE(resumed.resumed);
  EXPECT_TRUE(fs::equivalent(resumed.path, run.path));
  EXPECT_EQ(resumed.checkpoint, ckpt);
  EXPECT_TRUE(fs::equivalent(scratch / "runs" / "latest", run.path));
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

}  // namespace
}  // namespace rt
