// The local launcher (`train --nproc_per_node`), run as its own process (rt_rank_worker launch)
// with /bin/sh children: environment, output prefixes, failure propagation, signals.
#include "distributed/local_launcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <regex>

#include "dist_fixtures.h"
#include "util/error.h"

namespace rt::dist {
namespace {

// `rt_rank_worker launch 2 GRACE_MS -- /bin/sh -c SCRIPT` with OMP_NUM_THREADS unset.
std::string launch(const std::string& script, int grace_ms = 5000) {
  return "env -u OMP_NUM_THREADS " + std::string(RT_RANK_WORKER) + " launch 2 " + std::to_string(grace_ms) +
         " -- /bin/sh -c '" + script + "'";
}

TEST(LocalLauncher, ChildrenGetTorchrunVariablesAndRankOneIsPrefixed) {
  const auto r = testing::run_command(launch(
      "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $TORCHELASTIC_USE_AGENT_STORE "
      "$TORCHELASTIC_RESTART_COUNT $OMP_NUM_THREADS port=$MASTER_PORT\"; echo \"to stderr $RANK\" >&2"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(
      std::regex_search(r.output, std::regex("(^|\n)0 2 0 2 127\\.0\\.0\\.1 True 0 1 port=[1-9][0-9]*\n")))
      << r.output;
  EXPECT_TRUE(
      std::regex_search(r.output, std::regex("\n?\\[rank 1\\] 1 2 1 2 127\\.0\\.0\\.1 True 0 1 port=[1-9]")))
      << r.output;
  EXPECT_NE(r.output.find("[rank 1] to stderr 1"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("(^|\n)to stderr 0\n"))) << r.output;
  EXPECT_EQ(r.output.find("[rank 0]"), std::string::npos) << "rank 0's output is passed through unchanged";
}

// The children below would sleep 60 s or loop for ever: what they print when a signal reaches
// them, and the exit codes, show that the launcher stopped them; one that did not would hang
// into the test's timeout. No bound on the wall time, which would measure the machine.
//
// Children mark themselves ready in `dir` once their traps are set and their background sleep
// has started, so that a trap's `kill $!` always finds the sleep (marked before it, a signal
// could come while $! was still unset); `wait_ready` waits for both.
std::string ready(const testing::ScratchDir& dir) { return "touch " + dir.path().string() + "/ready$RANK"; }
std::string wait_ready(const testing::ScratchDir& dir) {
  const std::string d = dir.path().string();
  return "while [ ! -e " + d + "/ready0 ] || [ ! -e " + d + "/ready1 ]; do sleep 0.05; done";
}

TEST(LocalLauncher, AFailingRankStopsTheOthersAndSetsTheExitCode) {
  testing::ScratchDir dir("launcher_fail");
  const auto r = testing::run_command(
      launch("trap \"echo rank0 got SIGTERM; kill \\$!; exit 143\" TERM; sleep 60 & " + ready(dir) +
             "; if [ $RANK = 1 ]; then " + wait_ready(dir) + "; kill $!; exit 3; fi; wait"));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("rank0 got SIGTERM"), std::string::npos) << r.output;
}

TEST(LocalLauncher, ARankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  testing::ScratchDir dir("launcher_grace");
  const auto r =
      testing::run_command(launch("trap \"\" TERM; " + ready(dir) + "; if [ $RANK = 1 ]; then " +
                                      wait_ready(dir) + "; exit 5; fi; while :; do sleep 0.1; done",
                                  1000));
  EXPECT_EQ(r.exit_code, 5) << r.output;
}

TEST(LocalLauncher, SigintAndSigtermAreForwardedToEveryRank) {
  for (const std::string sig : {"INT", "TERM"}) {
    testing::ScratchDir dir("launcher_signal");
    const int code = sig == "INT" ? 130 : 143;
    const std::string child = "trap \"echo rank $RANK got " + sig + "; kill \\$!; exit " +
                              std::to_string(code) + "\" " + sig + "; sleep 60 & " + ready(dir) + "; wait";
    const auto r = testing::run_command(launch(child) + " & L=$!; " + wait_ready(dir) + "; kill -" + sig +
                                        " $L; wait $L; echo launcher exit $?");
    EXPECT_NE(r.output.find("rank 0 got " + sig), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("[rank 1] rank 1 got " + sig), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("launcher exit " + std::to_string(code)), std::string::npos) << r.output;
  }
}

TEST(LocalLauncher, AMissingProgramIsReported) {
  const auto r = testing::run_command(std::string(RT_RANK_WORKER) + " launch 2 1000 -- no-such-program-xyz");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cannot find the program 'no-such-program-xyz'"), std::string::npos) << r.output;
}

TEST(LocalLauncher, NprocPerNodeIsTakenOutOfTheArguments) {
  std::vector<std::string> args{"--config", "v2", "--nproc_per_node", "4", "--db_path", "x"};
  EXPECT_EQ(take_nproc_per_node(args), 4);
  EXPECT_EQ(args, (std::vector<std::string>{"--config", "v2", "--db_path", "x"}));
  args = {"--nproc-per-node=2", "a"};
  EXPECT_EQ(take_nproc_per_node(args), 2);
  EXPECT_EQ(args, std::vector<std::string>{"a"});
  args = {"a"};
  EXPECT_EQ(take_nproc_per_node(args), 0);
  for (const auto& bad : std::vector<std::vector<std::string>>{{"--nproc_per_node"},
                                                               {"--nproc_per_node", "0"},
                                                               {"--nproc_per_node=x"},
                                                               {"--nproc_per_node", "2000"}}) {
    auto copy = bad;
    EXPECT_THROW(take_nproc_per_node(copy), Error);
  }
}

}  // namespace
}  // namespace rt::dist
