// docs/distributed.md "What each node writes": on separate disks, every node other than node 0
// holds, under a run directory of the same name, only its ranks' profiles and traces, and the
// page's rsync gathers them onto node 0 for HTA and TensorBoard's profiler plugin. Checked on a
// real 2-rank run: rank 1's files are moved to a second "disk" as a second node would hold them,
// and the page's own command, with the host name replaced by that folder, brings back exactly them.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "e2e/e2e_fixtures.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

// The relative paths of the regular files under `dir`.
std::set<std::string> files_under(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.insert(e.path().lexically_relative(dir).string());
  }
  return out;
}

// The bash block that follows the "What each node writes" paragraph of docs/distributed.md.
std::string documented_gather_command() {
  const std::string page = read_file(testing::source_path("docs/distributed.md"));
  const size_t at = page.find("**What each node writes.**");
  if (at == std::string::npos) return "";
  const size_t fence = page.find("```bash\n", at);
  if (fence == std::string::npos) return "";
  const size_t begin = fence + 8, end = page.find("```", begin);
  return end == std::string::npos ? "" : page.substr(begin, end - begin);
}

TEST(WhatEachNodeWrites, TheReadmesRsyncGathersEveryOtherNodesProfilesAndTraces) {
  std::string command = documented_gather_command();
  ASSERT_FALSE(command.empty())
      << "docs/distributed.md has no bash block after its 'What each node writes' paragraph";
  const std::string remote = "node1:\"$PWD/runs/$run/\"";
  const size_t remote_at = command.find(remote);
  ASSERT_NE(remote_at, std::string::npos)
      << "docs/distributed.md's gather command no longer reads " << remote << ":\n"
      << command;
  if (run_command("command -v rsync").exit_code != 0) GTEST_SKIP() << "rsync is not installed";

  ScratchDir dir("node_gather");
  const fs::path db = make_neural_db(dir.path(), "--groups 1 --units 24 --trials 66 --seed 7");
  const fs::path node0 = dir.path() / "node0", node1 = dir.path() / "node1";
  auto r =
      run_command(bin_path("train") + " --nproc_per_node 2 --config tiny_ssm --db_path " +
                  quote(db.string()) + " --out_path " + quote((node0 / "runs").string()) +
                  " --threads 1 --workers 0 --batch 4 --max_steps 8 --log_every 2 --val_every 100 "
                  "--enable_timing_profiling --enable_memory_profiling --enable_profiling --profile_steps 1 "
                  "--profiling.skip_first 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path run = run_dir_from_output(r.output);
  ASSERT_FALSE(run.empty()) << r.output;
  const std::set<std::string> all = files_under(run);

  // What rank 1 wrote: the files named for it, and its traces (profile_step_<N>.rank1.json is a
  // hard link to rank 1's trace in profiler_traces/).
  std::set<std::string> rank1;
  for (const auto& f : all) {
    if (f.find(".rank1.") != std::string::npos) rank1.insert(f);
  }
  std::set<std::string> traces;
  for (const auto& f : all) {
    if (f.rfind("profiler_traces/", 0) != 0) continue;
    for (const auto& step : rank1) {
      if (step.rfind("profile_step_", 0) == 0 && fs::equivalent(run / f, run / step)) traces.insert(f);
    }
  }
  rank1.insert(traces.begin(), traces.end());
  // The page's list of what another node holds names every one of them.
  const std::regex listed(
      R"((timing|memory)_profile\.rank1(\.part[0-9]+)?\.json|profile_step_[0-9]+\.rank1\.json|)"
      R"(profiler_traces/.+)");
  bool has_trace = false;
  for (const auto& f : rank1) {
    EXPECT_TRUE(std::regex_match(f, listed))
        << "rank 1 wrote " << f << ", which docs/distributed.md's list does not name";
    has_trace |= f.rfind("profiler_traces/", 0) == 0;
  }
  ASSERT_TRUE(has_trace) << "rank 1's trace was not found";
  ASSERT_TRUE(rank1.count("timing_profile.rank1.json"));
  ASSERT_TRUE(rank1.count("memory_profile.rank1.json"));

  // Node 1's disk: a run directory of the same name with rank 1's files only, and two files that
  // must not travel (a stale checkpoint and config of its own).
  const fs::path run1 = node1 / "runs" / run.filename();
  for (const auto& f : rank1) {
    fs::create_directories((run1 / f).parent_path());
    fs::rename(run / f, run1 / f);
  }
  write_file_atomic(run1 / "checkpoints" / "stale.ckpt", "not node 0's");
  write_file_atomic(run1 / "config.toml", "# not node 0's\n");
  const std::string config = read_file(run / "config.toml");

  command.replace(remote_at, remote.size(), "\"" + node1.string() + "/runs/$run/\"");
  write_file_atomic(dir.path() / "gather.sh", "set -e\n" + command);
  r = run_command("cd " + quote(node0.string()) + " && bash " + quote((dir.path() / "gather.sh").string()));
  ASSERT_EQ(r.exit_code, 0) << command << "\n" << r.output;
  EXPECT_EQ(files_under(run), all) << command;
  EXPECT_EQ(read_file(run / "config.toml"), config);
  EXPECT_FALSE(fs::exists(run / "checkpoints" / "stale.ckpt"));
}

}  // namespace
}  // namespace rt::e2e
