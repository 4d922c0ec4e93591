// `train --nproc_per_node N`: N ranks of the same program on this machine, started and
// supervised the way torchrun does it, so the ranks take the same code path as under torchrun.
//
// The launcher hosts the rendezvous TCPStore itself on 127.0.0.1 at a port the kernel picks
// (port 0: no race with other jobs for a "free" port) and starts every child with RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT=<that port>,
// TORCHELASTIC_USE_AGENT_STORE=True and TORCHELASTIC_RESTART_COUNT=0 (torchrun's static
// rendezvous: every rank connects as a client), and OMP_NUM_THREADS=1 unless it is set (as
// torchrun does for N > 1).
//
// Output: rank 0 writes to the launcher's stdout and stderr unchanged (it is the rank that
// prints the console); every other rank's lines are prefixed with "[rank R] ".
//
// Supervision: SIGINT/SIGTERM to the launcher are forwarded to every child (children run in
// their own process groups, so a terminal's Ctrl-C reaches them once, through the launcher);
// when a child exits non-zero or is killed, the others get SIGTERM (unless a stop signal was
// already forwarded: they are stopping, and a second signal could cut their handlers short).
// Children still running `grace` after either event get SIGKILL. A child whose launcher dies
// gets SIGTERM (PR_SET_PDEATHSIG). The exit code is the first failing child's (128 + signal
// when it was killed), else 128 + the signal the launcher received, else 0.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace rt::dist {

struct LocalLaunchOptions {
  int nproc = 2;
  std::vector<std::string> argv;  // the children's command line; argv[0] is run via PATH lookup
  std::chrono::milliseconds grace{std::chrono::seconds(30)};  // torchrun's SIGTERM → SIGKILL delay
  int out_fd = 1;  // where rank 0's stdout and the others' prefixed stdout go
  int err_fd = 2;  // and their stderr
};

// Runs the ranks to completion and returns the exit code described above. Throws rt::Error
// when the store cannot be hosted or a child cannot be started (the ones already started are
// stopped first).
int run_local_ranks(const LocalLaunchOptions& options);

// Removes "--nproc_per_node N" / "--nproc_per_node=N" from `args` and returns N, or 0 when the
// flag is absent. Throws rt::Error when N is not an integer in 1..1024.
int take_nproc_per_node(std::vector<std::string>& args);

// The path of the running executable (/proc/self/exe), for re-running it as the ranks.
std::string current_executable();

}  // namespace rt::dist
