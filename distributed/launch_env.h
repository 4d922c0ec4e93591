// Where this process sits in a data-parallel job, read from the launcher's environment
// variables. Pure functions over an environment map, so every rule is unit-tested.
//
// Launchers, in the order they are recognised:
//  1. torchrun (and `train --nproc_per_node N`, which sets the same variables): RANK,
//     WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and from the elastic
//     agent TORCHELASTIC_USE_AGENT_STORE ("True": the launcher already hosts the TCPStore on
//     MASTER_PORT, so every rank is a client) and TORCHELASTIC_RESTART_COUNT (torch
//     distributed/elastic/agent/server/local_elastic_agent.py). LOCAL_RANK and LOCAL_WORLD_SIZE
//     default to RANK and WORLD_SIZE (one node) when a hand-written launch omits them.
//     Debian 12's torchrun (torch 1.13 on Python 3.11) must be given `--redirects 2 --tee 2`
//     (or 1 and 1): without them its Std flag parsing raises AttributeError before any rank
//     starts (torch/distributed/elastic/multiprocessing/api.py Std.from_str; fixed in 2.x).
//  2. SLURM (srun starts one task per process): RANK = SLURM_PROCID, WORLD_SIZE = SLURM_NTASKS,
//     LOCAL_RANK = SLURM_LOCALID, LOCAL_WORLD_SIZE = entry SLURM_NODEID of the expanded
//     SLURM_TASKS_PER_NODE ("2(x3),1"), else SLURM_NTASKS_PER_NODE. MASTER_ADDR = the first host
//     of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST / SLURM_NODELIST unless MASTER_ADDR is set;
//     MASTER_PORT from the environment, else 15000 + the last four digits of SLURM_JOB_ID
//     (Lightning's rule: jobs sharing a node get different ports), else 29500.
//  3. Neither: one process.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rt::dist {

using EnvMap = std::map<std::string, std::string>;

// The variables of this process (environ).
EnvMap process_environment();

// torch's default MASTER_PORT (c10d TCPStoreOptions::kDefaultPort).
inline constexpr int kDefaultMasterPort = 29500;

struct LaunchEnv {
  enum class Source { kSingleProcess, kTorchrun, kSlurm };
  Source source = Source::kSingleProcess;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;  // empty for one process
  int master_port = 0;
  bool agent_store = false;  // the launcher hosts the store: every rank connects as a client
  int restart_count = 0;     // torchelastic restarts so far (store keys are prefixed with it)

  bool distributed() const { return world_size > 1; }
  // "rank 1 of 2 (local 1 of 2), rendezvous 127.0.0.1:29500 (torchrun)".
  std::string describe() const;
};

// Parses `env` by the rules above. Throws rt::Error naming the variable, its value and what is
// expected when a variable is malformed, out of range or missing for a multi-process job
// ("WORLD_SIZE=2 but MASTER_ADDR is not set: ...").
LaunchEnv parse_launch_env(const EnvMap& env);

// SLURM's compressed host list ("node[01-03,7],gpu[1-2]-r[1-2]"): comma-separated items, each a
// prefix followed by bracket groups of comma-separated numbers or ranges a-b, zero padding kept
// (the width of the range's first bound). Several groups in one item expand leftmost-slowest.
// Throws rt::Error naming `variable` on malformed input or more than 100000 hosts.
std::vector<std::string> expand_slurm_nodelist(const std::string& list,
                                               const std::string& variable = "SLURM_JOB_NODELIST");
// The first host of a node list, without expanding the rest.
std::string first_slurm_host(const std::string& list, const std::string& variable = "SLURM_JOB_NODELIST");

// SLURM_TASKS_PER_NODE ("2(x3),1" → 2, 2, 2, 1). Throws rt::Error naming `variable`.
std::vector<int> expand_slurm_tasks_per_node(const std::string& value,
                                             const std::string& variable = "SLURM_TASKS_PER_NODE");

// `value` as a whole decimal integer in [lo, hi] (an optional sign and digits only: no spaces,
// trailing characters or overflow), or nullopt. Shared by the environment parser and `train
// --nproc_per_node`.
std::optional<long> parse_whole_number(const std::string& value, long lo, long hi);

}  // namespace rt::dist
