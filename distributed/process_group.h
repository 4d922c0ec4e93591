// Joining the data-parallel job: the TCPStore rendezvous and a c10d process group (Gloo, or
// NCCL when LibTorch was built with CUDA), behind a Communicator (communicator.h).
//
// Store (torch distributed/elastic/rendezvous rules): under an agent that already hosts the
// store on MASTER_PORT (torchrun's static rendezvous, `train --nproc_per_node`:
// TORCHELASTIC_USE_AGENT_STORE=True) every rank connects as a client; otherwise rank 0 hosts
// it and waits for the others. Keys are prefixed with "rt/attempt_<restart count>" so a
// restarted group never reads a previous attempt's keys.
//
// Gloo's network device: the interfaces in GLOO_SOCKET_IFNAME (comma-separated) when set;
// loopback when MASTER_ADDR is a loopback address (the whole job is on this host); otherwise
// the address this host's name resolves to (c10d createDefaultDevice). Gloo runs collectives
// on one worker thread, in the order they are issued (which the trace spans rely on).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "distributed/communicator.h"
#include "distributed/launch_env.h"
#include "util/enum_names.h"

namespace rt::dist {

enum class Backend { kAuto, kGloo, kNccl, kMaxValue = kNccl };
constexpr EnumNames<Backend> enum_names(Backend) { return {{"auto", "gloo", "nccl"}}; }

std::string to_string(Backend backend);
// auto → NCCL for a CUDA device, Gloo otherwise. Throws rt::Error when NCCL is asked for but
// this build has no NCCL (a CPU LibTorch) or the device is not CUDA.
Backend resolve_backend(Backend backend, bool cuda_device);
// True when this build can create NCCL process groups.
bool nccl_available();

// train.distributed.wait: how a rank waits for a collective (C10dCommunicator::wait).
//  - active: polls the collective, yielding its core between polls (sched_yield), for up to
//    kActiveWaitLimit (c10d_communicator.h), then sleeps, as MPI's progress loops and
//    OMP_WAIT_POLICY=active do. The rank sees the completion at its next poll. A passive rank sleeps on the
//    work's condition variable and must be woken by the backend's thread and scheduled again; its core falls
//    idle meanwhile (on a virtual machine the idle vCPU halts, and waking it goes through the
//    hypervisor). BENCHMARKS.md "Data-parallel training" measures both policies.
//  - passive: sleeps at once (c10d's Work::wait), leaving the core to other processes.
//  - auto: active with Gloo when this host's ranks keep at most one compute thread per core
//    (local ranks × intra-op threads ≤ the cores this process may run on), passive otherwise.
//    Loader workers are not counted: they run between a rank's waits, and an active wait
//    yields to them. NCCL's waits are stream waits, not host waits: always passive.
enum class WaitPolicy { kAuto, kActive, kPassive, kMaxValue = kPassive };
constexpr EnumNames<WaitPolicy> enum_names(WaitPolicy) { return {{"auto", "active", "passive"}}; }
// Whether a rank waits actively: `policy` resolved for `backend` (already resolved: Gloo or
// NCCL), `local_ranks` ranks on this host each running `busy_threads` compute threads, on
// `cores`.
bool resolve_active_wait(WaitPolicy policy, Backend backend, int local_ranks, int busy_threads, int cores);
// The cores this process may run on (its affinity mask; hardware_concurrency if unknown).
int usable_cores();

struct ProcessGroupOptions {
  Backend backend = Backend::kAuto;
  bool cuda_device = false;  // the training device is CUDA (auto picks NCCL)
  int cuda_index = 0;        // its index: NCCL collectives of CPU tensors are staged through it
  // train.distributed.timeout_s: bounds the rendezvous, every collective, and how long a
  // rank waits for a lost peer before it stops.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  WaitPolicy wait = WaitPolicy::kAuto;  // train.distributed.wait
  int busy_threads = 1;                 // per rank, for wait = auto: its intra-op threads
  // train.distributed.small_all_reduce_kib, in bytes: Gloo all-reduces whose other ranks' data
  // come to at most this much run as an all-gather and a local sum (c10d_communicator.h); 0:
  // always Gloo's ring all-reduce.
  int64_t gather_sum_bytes = int64_t{1} << 20;
  // train.distributed.gloo_loop: "batch" (true) runs Gloo's network event-loop thread under
  // SCHED_BATCH (below), "normal" (false) leaves it under the default policy.
  bool gloo_loop_batch = true;
  // The whole rendezvous within `timeout`: past it, a watchdog prints what it waited for and
  // how long (stderr), then ends the process with exit 2 — the library calls that wait cannot
  // be interrupted. `train` sets it; without it (tests joining in-process) each stage still
  // waits only what is left of the timeout, and a failing stage throws.
  bool exit_at_deadline = false;
};

// train.distributed.gloo_loop. Gloo's TCP transport reads and writes every connection on one
// event-loop thread per device (gloo/transport/tcp/loop.cc), beside the worker thread that runs
// the collectives. Both take the connection's lock, and the loop only *tries* it, going back to
// epoll_wait when it is taken: with data pending, epoll_wait returns at once, so the loop spins
// until the lock is free. On a host whose cores all run ranks, a message that wakes the loop on
// the core where the worker is writing under that lock preempts the worker, and the loop then
// spins until the scheduler switches back: up to a whole time slice of a core that a rank's
// training thread needed (`perf sched timehist` shows it as long runs of the loop thread and a
// flood of epoll_wait calls). Under SCHED_BATCH a woken thread does not preempt the running
// one; it runs at the next switch (a wait, a yield, the end of the running thread's slice), so
// the worker finishes its write first: fewer epoll_wait calls, more throughput. The figures,
// with the loop under either policy, are in BENCHMARKS.md, "Data-parallel training" (not copied
// here, where a rerun would leave them stale). The worker keeps the default policy, so that a
// collective it is given starts at once. Moving a thread between the two policies needs no
// privilege. The loop thread is the thread that creating the device started (/proc/self/task
// before and after).
//
// "SCHED_OTHER", "SCHED_BATCH", … for a sched_getscheduler() result.
std::string scheduling_policy_name(int policy);

// The communicator of the job `env` describes: LocalCommunicator for one process, otherwise
// the store and process group described above (blocks until every rank has joined). Throws
// rt::Error with what to change: the port already in use (naming it), the store unreachable
// (naming MASTER_ADDR:MASTER_PORT), ranks that did not join within the timeout.
std::shared_ptr<Communicator> join_process_group(const LaunchEnv& env, const ProcessGroupOptions& options);

}  // namespace rt::dist
