// launch_env: torchrun's and SLURM's variables, the node-list grammar, and the messages for
// missing or inconsistent variables.
#include "distributed/launch_env.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace rt::dist {
namespace {

std::string error_of(const EnvMap& env) {
  try {
    parse_launch_env(env);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchEnv, NoLauncherVariablesIsOneProcess) {
  const auto e = parse_launch_env({{"HOME", "/root"}, {"SLURM_JOB_ID", "12"}});
  EXPECT_EQ(e.source, LaunchEnv::Source::kSingleProcess);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_FALSE(e.distributed());
  EXPECT_EQ(e.describe(), "single process");
}

TEST(LaunchEnv, ReadsTorchrunVariables) {
  const auto e = parse_launch_env({{"RANK", "3"},
                                   {"WORLD_SIZE", "4"},
                                   {"LOCAL_RANK", "1"},
                                   {"LOCAL_WORLD_SIZE", "2"},
                                   {"MASTER_ADDR", "10.0.0.1"},
                                   {"MASTER_PORT", "29500"},
                                   {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                   {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_EQ(e.source, LaunchEnv::Source::kTorchrun);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "10.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_TRUE(e.agent_store);
  EXPECT_EQ(e.restart_count, 2);
  EXPECT_EQ(e.describe(), "rank 3 of 4 (local 1 of 2), rendezvous 10.0.0.1:29500 (torchrun)");
}

TEST(LaunchEnv, HandWrittenLaunchDefaultsLocalRanksAndHostsTheStore) {
  const auto e = parse_launch_env(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_FALSE(e.agent_store);
  EXPECT_EQ(e.restart_count, 0);
}

TEST(LaunchEnv, WorldSizeOneNeedsNoRendezvous) {
  const auto e = parse_launch_env({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(e.source, LaunchEnv::Source::kTorchrun);
  EXPECT_FALSE(e.distributed());
}

TEST(LaunchEnv, MissingOrBadVariablesAreNamed) {
  const EnvMap base{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  auto without = [&](const std::string& key) {
    EnvMap e = base;
    e.erase(key);
    return e;
  };
  auto with = [&](const std::string& key, const std::string& value) {
    EnvMap e = base;
    e[key] = value;
    return e;
  };
  EXPECT_EQ(error_of(base), "");
  EXPECT_EQ(error_of(without("MASTER_ADDR")).rfind("WORLD_SIZE=2 but MASTER_ADDR is not set: ", 0), 0u);
  EXPECT_NE(error_of(without("MASTER_PORT")).find("MASTER_PORT is not set"), std::string::npos);
  EXPECT_NE(error_of(without("WORLD_SIZE")).find("WORLD_SIZE is not set"), std::string::npos);
  EXPECT_NE(error_of(without("RANK")).find("RANK is not set"), std::string::npos);
  EXPECT_NE(error_of(with("RANK", "2")).find("RANK=2 is not valid with WORLD_SIZE=2: ranks are 0..1"),
            std::string::npos);
  EXPECT_NE(error_of(with("WORLD_SIZE", "two")).find("WORLD_SIZE=two is not valid"), std::string::npos);
  EXPECT_NE(error_of(with("MASTER_PORT", "70000")).find("MASTER_PORT=70000 is not valid"), std::string::npos);
  EXPECT_NE(error_of(with("LOCAL_WORLD_SIZE", "3")).find("LOCAL_WORLD_SIZE=3 is larger than WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(error_of(with("TORCHELASTIC_USE_AGENT_STORE", "yes")).find("expected True or False"),
            std::string::npos);
}

TEST(LaunchEnv, MapsSlurmTasks) {
  const auto e = parse_launch_env({{"SLURM_PROCID", "5"},
                                   {"SLURM_NTASKS", "7"},
                                   {"SLURM_LOCALID", "1"},
                                   {"SLURM_NODEID", "2"},
                                   {"SLURM_TASKS_PER_NODE", "2(x3),1"},
                                   {"SLURM_JOB_NODELIST", "gpu[007-010],cpu1"},
                                   {"SLURM_JOB_ID", "4312345"}});
  EXPECT_EQ(e.source, LaunchEnv::Source::kSlurm);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 7);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "gpu007");
  EXPECT_EQ(e.master_port, 15000 + 2345);
  EXPECT_FALSE(e.agent_store);
}

TEST(LaunchEnv, SlurmPrefersExplicitMasterAndTheStepNodeList) {
  EnvMap env{{"SLURM_PROCID", "0"},
             {"SLURM_NTASKS", "2"},
             {"SLURM_TASKS_PER_NODE", "1(x2)"},
             {"SLURM_STEP_NODELIST", "n[3-4]"},
             {"SLURM_JOB_NODELIST", "n[1-4]"}};
  auto e = parse_launch_env(env);
  EXPECT_EQ(e.master_addr, "n3");
  EXPECT_EQ(e.master_port, kDefaultMasterPort);
  EXPECT_EQ(e.local_world_size, 1);
  env["MASTER_ADDR"] = "head";
  env["MASTER_PORT"] = "4000";
  e = parse_launch_env(env);
  EXPECT_EQ(e.master_addr, "head");
  EXPECT_EQ(e.master_port, 4000);
  env.erase("SLURM_TASKS_PER_NODE");
  EXPECT_NE(error_of(env).find("SLURM_TASKS_PER_NODE is not"), std::string::npos);
  env["SLURM_NTASKS_PER_NODE"] = "1";
  EXPECT_EQ(parse_launch_env(env).local_world_size, 1);
}

TEST(LaunchEnv, TorchrunVariablesWinInsideASlurmJob) {
  const auto e = parse_launch_env({{"SLURM_PROCID", "0"},
                                   {"SLURM_NTASKS", "1"},
                                   {"RANK", "1"},
                                   {"WORLD_SIZE", "2"},
                                   {"MASTER_ADDR", "a"},
                                   {"MASTER_PORT", "1"}});
  EXPECT_EQ(e.source, LaunchEnv::Source::kTorchrun);
  EXPECT_EQ(e.rank, 1);
}

TEST(SlurmNodeList, ExpandsRangesListsPaddingAndSeveralGroups) {
  using V = std::vector<std::string>;
  EXPECT_EQ(expand_slurm_nodelist("node1"), V({"node1"}));
  EXPECT_EQ(expand_slurm_nodelist("node[01-03,7]"), V({"node01", "node02", "node03", "node7"}));
  EXPECT_EQ(expand_slurm_nodelist("node[8-11]"), V({"node8", "node9", "node10", "node11"}));
  EXPECT_EQ(expand_slurm_nodelist("node[098-101]"), V({"node098", "node099", "node100", "node101"}));
  EXPECT_EQ(expand_slurm_nodelist("rack[1-2]-n[01-02]"),
            V({"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}));
  EXPECT_EQ(expand_slurm_nodelist("a[1-2],b,c[5]x"), V({"a1", "a2", "b", "c5x"}));
  EXPECT_EQ(first_slurm_host("rack[3-9]-n[07,01]s,other"), "rack3-n07s");
  EXPECT_EQ(first_slurm_host("gpu7,node[01-04]"), "gpu7");
}

TEST(SlurmNodeList, MalformedListsNameTheVariable) {
  for (const std::string bad :
       {"node[1-", "node]1", "node[3-1]", "node[a-b]", "node[1-2]]", "a,,b", "n[[1]]", "n[]"}) {
    try {
      expand_slurm_nodelist(bad, "SLURM_STEP_NODELIST");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("SLURM_STEP_NODELIST=" + bad + " is not a valid node list", 0),
                0u)
          << e.what();
    }
  }
  EXPECT_THROW(expand_slurm_nodelist("n[1-1000000]"), Error);
}

TEST(SlurmTasksPerNode, ExpandsRepeats) {
  EXPECT_EQ(expand_slurm_tasks_per_node("2(x3),1"), std::vector<int>({2, 2, 2, 1}));
  EXPECT_EQ(expand_slurm_tasks_per_node("4"), std::vector<int>({4}));
  for (const std::string bad : {"", "2(x", "x(2)", "2(x0)", "1,,2", "-1"}) {
    EXPECT_THROW(expand_slurm_tasks_per_node(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace rt::dist

TEST(LaunchEnv, WholeNumbersOnly) {
  using rt::dist::parse_whole_number;
  EXPECT_EQ(parse_whole_number("8", 1, 1024), 8L);
  EXPECT_EQ(parse_whole_number("-3", -5, 5), -3L);
  for (const char* bad : {"", " 8", "8 ", "8x", "0x10", "1e3", "99999999999999999999999"}) {
    EXPECT_FALSE(parse_whole_number(bad, 0, 1L << 40).has_value()) << "'" << bad << "'";
  }
  EXPECT_FALSE(parse_whole_number("0", 1, 1024).has_value());
  EXPECT_FALSE(parse_whole_number("1025", 1, 1024).has_value());
}
