// Scenarios for the communicator itself: collectives and their trace spans, lost and hung ranks.
#include <ATen/CPUGeneratorImpl.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "profiling/trace/chrome_trace.h"
#include "profiling/trace/op_tracer.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "worker.h"

namespace rt::testing::dist {
namespace {

// Stops the tracer and writes its timeline as this rank's Chrome trace, trace_rank<R>.json, with
// the communicator's distributedInfo.
void write_rank_trace(prof::OpTracer& tracer, const rt::dist::Communicator& comm,
                      const std::filesystem::path& out) {
  auto timeline = tracer.stop();
  prof::finalize_timeline(timeline);
  prof::ChromeTraceOptions trace;
  trace.backend = comm.backend();
  trace.rank = comm.rank();
  trace.world_size = comm.world_size();
  rt::write_file_atomic(out / ("trace_rank" + std::to_string(comm.rank()) + ".json"),
                        prof::chrome_trace_json(timeline, trace));
}

// Every collective once, inside a trace window; the trace is written for the test to check.
int collectives(rt::dist::Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank();
  prof::OpTracer tracer;
  tracer.start();
  auto sum = torch::full({5}, static_cast<float>(r + 1));
  comm.all_reduce_sum(sum);
  save_result(out, "sum", r, sum);
  auto async_sum = torch::arange(6, torch::kDouble) * (r + 1);
  auto pending = comm.all_reduce_sum_async(async_sum);
  pending.wait();
  pending.wait();  // waiting twice is allowed
  save_result(out, "async_sum", r, async_sum);
  std::vector<torch::Tensor> tensors{torch::full({2, 3}, static_cast<float>(r)),
                                     torch::full({4}, int64_t{10 + r}),
                                     torch::full({1}, static_cast<float>(100 + r))};
  comm.broadcast(tensors, 1);
  for (size_t i = 0; i < tensors.size(); ++i)
    save_result(out, "broadcast" + std::to_string(i), r, tensors[i]);
  auto gathered = comm.all_gather(torch::full({3}, static_cast<int64_t>(r * 7)));
  save_result(out, "gathered", r, torch::stack(gathered));
  comm.barrier();
  write_rank_trace(tracer, comm, out);
  rt::dist::check_same_on_all_ranks(comm, "config", "same everywhere");
  try {
    rt::dist::check_same_on_all_ranks(comm, "config", r == 0 ? "lr = 1e-3" : "lr = 1e-4");
  } catch (const Error& e) {
    save_text(out, "mismatch", r, e.what());
  }
  return 0;
}
Register collectives_scenario("collectives", collectives);

// All-reduces of random tensors of several sizes (each rank its own values) inside a trace
// window: the sums, and the trace whose spans say which ran as a gather (train.distributed.
// small_all_reduce_kib, c10d_communicator.h).
int sums(rt::dist::Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank();
  prof::OpTracer tracer;
  tracer.start();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + r);
  int i = 0;
  for (const int64_t n : {1, 9, 255, 300, 70000}) {
    auto t = torch::randn({n}, gen, torch::kFloat);
    comm.all_reduce_sum(t);
    save_result(out, "sum" + std::to_string(i++), r, t);
  }
  auto d = torch::randn({9}, gen, torch::kDouble);
  comm.all_reduce_sum_async(d).wait();
  save_result(out, "sum" + std::to_string(i), r, d);
  write_rank_trace(tracer, comm, out);
  return 0;
}
Register sums_scenario("sums", sums);

// train.distributed.gloo_loop: what the communicator says its event-loop thread runs under, the
// threads of this process under SCHED_BATCH, and how many of them were seen waiting in epoll_wait
// (Gloo's loop, gloo/transport/tcp/loop.cc) within a second; then an all-reduce still works.
int event_loop(rt::dist::Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank();
  std::vector<long> batch;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    const long tid = std::stol(task.path().filename().string());
    if (sched_getscheduler(static_cast<pid_t>(tid)) == SCHED_BATCH) batch.push_back(tid);
  }
  int in_epoll = 0;
  for (const long tid : batch) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
      long number = -1;
      in >> number;  // "running" while it runs: not a number, try again
      if (number == SYS_epoll_wait || number == SYS_epoll_pwait) {
        ++in_epoll;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  auto t = torch::ones({3});
  comm.all_reduce_sum(t);
  save_text(out, "loop", r,
            comm.event_loop_scheduling() + " " + std::to_string(batch.size()) + " " +
                std::to_string(in_epoll) + " " + std::to_string(t[0].item<float>()));
  return 0;
}
Register event_loop_scenario("event_loop", event_loop);

// Rank 1 joins an all-reduce 400 ms late; rank 0 reports its policy and, for its thread over the
// wait: the CPU time, the wall time, and the time it was runnable (on a core, or queued for one:
// CPU time plus run-queue delay from /proc/thread-self/schedstat; -1 where the kernel keeps no
// schedstat). An active wait stays runnable while it polls, even on cores so busy that each
// sched_yield gives the core away and its CPU time stays small; a passive wait sleeps
// (train.distributed.wait, process_group.h).
int late_peer(rt::dist::Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank();
  auto thread_cpu_ms = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  };
  auto thread_runnable_ms = [] {
    std::ifstream in("/proc/thread-self/schedstat");
    double cpu_ns = 0, delay_ns = 0;
    if (!(in >> cpu_ns >> delay_ns)) return -1.0;
    return (cpu_ns + delay_ns) * 1e-6;
  };
  comm.barrier();
  if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const double cpu0 = thread_cpu_ms(), runnable0 = thread_runnable_ms();
  const auto wall0 = std::chrono::steady_clock::now();
  auto t = torch::ones({4});
  comm.all_reduce_sum(t);
  const double wall =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
  const double cpu = thread_cpu_ms() - cpu0, runnable1 = thread_runnable_ms();
  const double runnable = runnable0 < 0 || runnable1 < 0 ? -1.0 : runnable1 - runnable0;
  save_result(out, "wait", r, torch::tensor({cpu, wall, runnable}, torch::kDouble));
  save_text(out, "policy", r, comm.wait_policy());
  return 0;
}
Register late_peer_scenario("late_peer", late_peer);

// Rank 1 is killed (-9) while rank 0 keeps all-reducing: rank 0 must stop with an error that
// names rank 1, quickly. Rank 0 ignores the launcher's SIGTERM so it can report.
int lost_rank(rt::dist::Communicator& comm, const std::filesystem::path& out) {
  ::signal(SIGTERM, SIG_IGN);
  comm.barrier();
  if (comm.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::raise(SIGKILL);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto big = torch::ones({1 << 18});
  try {
    for (;;) comm.all_reduce_sum(big);
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    save_text(out, "lost", comm.rank(), std::string(e.what()) + "\nafter " + std::to_string(s) + " s");
    try {
      comm.barrier();
    } catch (const Error& again) {
      save_text(out, "after_failure", comm.rank(), again.what());
    }
    return 3;
  }
}
Register lost_rank_scenario("lost_rank", lost_rank);

// Rank 1 stops (SIGSTOP: alive, silent); rank 0 must give up after the group's timeout.
int hung_rank(rt::dist::Communicator& comm, const std::filesystem::path& out) {
  ::signal(SIGTERM, SIG_IGN);
  comm.barrier();
  if (comm.rank() == 1) ::raise(SIGSTOP);
  const auto t0 = std::chrono::steady_clock::now();
  auto t = torch::ones({16});
  try {
    for (;;) comm.all_reduce_sum(t);
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    save_text(out, "hung", comm.rank(), std::string(e.what()) + "\nafter " + std::to_string(s) + " s");
    return 3;
  }
}
Register hung_rank_scenario("hung_rank", hung_rank);

// The smallest check that a group formed (the torchrun tests): one all-reduce.
int join_only(rt::dist::Communicator& comm, const std::filesystem::path& out) {
  auto t = torch::full({1}, static_cast<float>(comm.rank() + 1));
  comm.all_reduce_sum(t);
  save_result(out, "joined", comm.rank(), t);
  return 0;
}
Register join_only_scenario("join_only", join_only);

}  // namespace
}  // namespace rt::testing::dist
