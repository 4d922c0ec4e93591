// Joining a process group and the communicator's collectives, spans and failure messages:
// real 2-rank Gloo groups on loopback (rt_rank_worker), plus the rendezvous errors in-process.
#include "distributed/process_group.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>

#include "dist_fixtures.h"
#include "distributed/c10d_communicator.h"
#include "support/expect.h"
#include "util/error.h"
#include "util/json.h"

namespace rt::dist {
namespace {

using testing::ScratchDir;
using testing::dist::load_result;
using testing::dist::run_ranks;

using rt::testing::read_text;

// A TCP socket listening on 127.0.0.1 at a port the kernel picked (closed by the destructor).
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd, 4), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};

std::string join_error(const LaunchEnv& env, std::chrono::milliseconds timeout) {
  ProcessGroupOptions o;
  o.timeout = timeout;
  try {
    join_process_group(env, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ProcessGroup, OneProcessIsTheIdentityCommunicator) {
  auto comm = join_process_group(LaunchEnv{}, {});
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->world_size(), 1);
  EXPECT_EQ(comm->backend(), "none");
  auto t = torch::arange(3.0);
  comm->all_reduce_sum(t);
  comm->all_reduce_sum_async(t).wait();
  EXPECT_TRUE(torch::equal(t, torch::arange(3.0)));
  EXPECT_EQ(comm->all_gather(t).size(), 1u);
  check_same_on_all_ranks(*comm, "config", "anything");
}

TEST(ProcessGroup, BackendNamesAndTheAutoRule) {
  EXPECT_EQ(parse_enum<Backend>("gloo", "train.distributed.backend"), Backend::kGloo);
  EXPECT_EQ(to_string(parse_enum<Backend>("nccl", "train.distributed.backend")), "nccl");
  EXPECT_EQ(resolve_backend(Backend::kAuto, false), Backend::kGloo);
  EXPECT_EQ(resolve_backend(Backend::kAuto, true), nccl_available() ? Backend::kNccl : Backend::kGloo);
  EXPECT_EQ(testing::error_of([] { parse_enum<Backend>("mpi", "train.distributed.backend"); }),
            "train.distributed.backend = \"mpi\" is not allowed; expected one of auto, gloo, nccl");
  EXPECT_THROW(resolve_backend(Backend::kNccl, false), Error);
}

TEST(ProcessGroup, WaitPolicyNamesAndTheAutoRule) {
  EXPECT_EQ(parse_enum<WaitPolicy>("auto", "train.distributed.wait"), WaitPolicy::kAuto);
  EXPECT_EQ(parse_enum<WaitPolicy>("active", "train.distributed.wait"), WaitPolicy::kActive);
  EXPECT_EQ(parse_enum<WaitPolicy>("passive", "train.distributed.wait"), WaitPolicy::kPassive);
  EXPECT_EQ(testing::error_of([] { parse_enum<WaitPolicy>("spin", "train.distributed.wait"); }),
            "train.distributed.wait = \"spin\" is not allowed; expected one of auto, active, passive");
  // auto: active while this host's ranks × compute threads fit its cores.
  EXPECT_TRUE(resolve_active_wait(WaitPolicy::kAuto, Backend::kGloo, 2, 1, 2));
  EXPECT_FALSE(resolve_active_wait(WaitPolicy::kAuto, Backend::kGloo, 2, 2, 2));
  EXPECT_TRUE(resolve_active_wait(WaitPolicy::kAuto, Backend::kGloo, 4, 4, 16));
  EXPECT_FALSE(resolve_active_wait(WaitPolicy::kAuto, Backend::kGloo, 3, 1, 2));
  // Explicit choices hold; NCCL's waits are stream waits: never active.
  EXPECT_TRUE(resolve_active_wait(WaitPolicy::kActive, Backend::kGloo, 8, 8, 2));
  EXPECT_FALSE(resolve_active_wait(WaitPolicy::kPassive, Backend::kGloo, 1, 1, 64));
  EXPECT_FALSE(resolve_active_wait(WaitPolicy::kActive, Backend::kNccl, 1, 1, 64));
  EXPECT_FALSE(resolve_active_wait(WaitPolicy::kAuto, Backend::kNccl, 1, 1, 64));
  EXPECT_GE(usable_cores(), 1);
}

// An active wait polls (its thread burns CPU) for at most kActiveWaitLimit, then sleeps; a
// passive one sleeps at once. Rank 0 waits ~400 ms for a late rank 1 in both.
TEST(ProcessGroup, ActiveWaitsPollThenSleepPassiveWaitsSleep) {
  for (const std::string policy : {"active", "passive"}) {
    ScratchDir out("pg_wait_" + policy);
    const auto run = run_ranks(2, "late_peer", out.path(), "RT_TEST_WAIT=" + policy + " ");
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_EQ(read_text(out / "policy_rank0.txt"), policy);
    const auto wait = load_result(out.path(), "wait", 0);
    const double cpu_ms = wait[0].item<double>(), wall_ms = wait[1].item<double>();
    // Runnable: on a core or queued for one. Polling keeps the thread runnable for the whole
    // limit; its CPU time alone is small when other threads take the core at each sched_yield
    // (seen under ctest -j2 on 2 cores: 0.4 ms). Without schedstat, the CPU time of an idle host.
    const double runnable_ms = wait[2].item<double>();
    const double half_limit_ms = 0.5 * static_cast<double>(kActiveWaitLimit.count());
    EXPECT_GT(wall_ms, 300.0) << policy;
    if (policy == "active") {
      if (runnable_ms >= 0) {
        EXPECT_GT(runnable_ms, half_limit_ms) << "an active wait polls before it sleeps";
      } else {
        EXPECT_GT(cpu_ms, 5.0) << "an active wait polls before it sleeps";
      }
      EXPECT_LT(cpu_ms, 0.5 * wall_ms) << "past " << kActiveWaitLimit.count() << " ms an active wait sleeps";
    } else if (runnable_ms >= 0) {
      EXPECT_LT(runnable_ms, half_limit_ms) << "a passive wait sleeps at once";
    } else {
      // Without schedstat: a sleeping wait spends a small share of its own length on the CPU
      // (the active one above may spend half), whatever the machine's speed.
      EXPECT_LT(cpu_ms, 0.05 * wall_ms) << "a passive wait sleeps at once";
    }
  }
}

TEST(ProcessGroup, APortInUseIsNamed) {
  Listener busy;
  LaunchEnv env;
  env.source = LaunchEnv::Source::kTorchrun;
  env.world_size = 2;
  env.local_world_size = 2;
  env.master_addr = "127.0.0.1";
  env.master_port = busy.port;
  const std::string what = join_error(env, std::chrono::seconds(5));
  EXPECT_NE(what.find("port " + std::to_string(busy.port) + " (MASTER_PORT) is already in use"),
            std::string::npos)
      << what;
}

TEST(ProcessGroup, AnUnreachableStoreIsNamedAfterTheTimeout) {
  int port = 0;
  {
    Listener probe;  // a port nobody listens on once closed
    port = probe.port;
  }
  LaunchEnv env;
  env.source = LaunchEnv::Source::kTorchrun;
  env.rank = 1;
  env.world_size = 2;
  env.local_rank = 1;
  env.local_world_size = 2;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  // The wait's end is the code's own event, named with how long it waited (an unbounded wait
  // would hang into the test's timeout); no bound on the wall time, which would measure the
  // machine.
  const std::string what = join_error(env, std::chrono::seconds(2));
  EXPECT_NE(
      what.find(
          "rank 1: the process group did not form within train.distributed.timeout_s = 2 s (gave up after "),
      std::string::npos)
      << what;
  EXPECT_NE(what.find("reaching the rendezvous store at MASTER_ADDR:MASTER_PORT"), std::string::npos) << what;
  EXPECT_NE(what.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << what;
}

TEST(ProcessGroup, CollectivesGiveTheSameResultOnEveryRank) {
  ScratchDir out("pg_collectives");
  const auto run = run_ranks(2, "collectives", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(torch::equal(load_result(out.path(), "sum", r), torch::full({5}, 3.0f)));
    EXPECT_TRUE(torch::equal(load_result(out.path(), "async_sum", r), torch::arange(6, torch::kDouble) * 3));
    EXPECT_TRUE(torch::equal(load_result(out.path(), "broadcast0", r), torch::full({2, 3}, 1.0f)));
    EXPECT_TRUE(torch::equal(load_result(out.path(), "broadcast1", r), torch::full({4}, int64_t{11})));
    EXPECT_TRUE(torch::equal(load_result(out.path(), "broadcast2", r), torch::full({1}, 101.0f)));
    EXPECT_TRUE(torch::equal(load_result(out.path(), "gathered", r),
                             torch::stack({torch::full({3}, int64_t{0}), torch::full({3}, int64_t{7})})));
    EXPECT_EQ(
        read_text(out / ("mismatch_rank" + std::to_string(r) + ".txt")),
        "mismatched config across ranks: rank 1 differs from rank 0; first difference at line 1: rank 0 has "
        "'lr = 1e-3', rank 1 has 'lr = 1e-4'; every rank must be started with the same settings");
  }
}

// The spans of a trace written by a scenario, by name (gloo:*).
std::map<std::string, std::vector<Json>> gloo_spans(const std::filesystem::path& trace) {
  std::map<std::string, std::vector<Json>> spans;
  const Json parsed = Json::parse(read_text(trace));
  for (const auto& e : parsed["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (name.rfind("gloo:", 0) == 0) spans[name].push_back(e);
  }
  return spans;
}

// Gloo's ring all-reduce (small_all_reduce_kib = 0).
TEST(ProcessGroup, CollectivesAreTracedWithPyTorchNamesAndCommArgs) {
  ScratchDir out("pg_trace");
  const auto run = run_ranks(2, "collectives", out.path(), "RT_TEST_SMALL_ALL_REDUCE_KIB=0 ");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (int r = 0; r < 2; ++r) {
    const std::string text = read_text(out / ("trace_rank" + std::to_string(r) + ".json"));
    EXPECT_NE(text.find("\"distributedInfo\": {\"backend\": \"gloo\", \"rank\": " + std::to_string(r) +
                        ", \"world_size\": 2}"),
              std::string::npos);
    const Json trace = Json::parse(text);
    std::map<std::string, std::vector<Json>> spans;
    for (const auto& e : trace["traceEvents"]) {
      const std::string name = e.value("name", "");
      if (name.rfind("gloo:", 0) == 0) spans[name].push_back(e);
    }
    ASSERT_EQ(spans["gloo:all_reduce"].size(), 2u);
    ASSERT_EQ(spans["gloo:broadcast"].size(), 3u);  // float, int64, float: one buffer per run of a dtype
    ASSERT_EQ(spans["gloo:all_gather"].size(), 1u);
    ASSERT_EQ(spans["gloo:barrier"].size(), 1u);
    const Json& first = spans["gloo:all_reduce"][0];
    EXPECT_EQ(first["cat"], "user_annotation");
    EXPECT_EQ(first["args"]["Collective name"], "allreduce");
    EXPECT_EQ(first["args"]["dtype"], "Float");
    EXPECT_EQ(first["args"]["In msg nelems"], 5);
    EXPECT_EQ(first["args"]["Out msg nelems"], 5);
    EXPECT_EQ(first["args"]["Group size"], 2);
    EXPECT_EQ(first["args"]["In msg size"], 20);
    EXPECT_EQ(spans["gloo:all_reduce"][1]["args"]["dtype"], "Double");
    EXPECT_EQ(spans["gloo:all_gather"][0]["args"]["Out msg nelems"], 6);
    EXPECT_EQ(spans["gloo:all_gather"][0]["args"]["Collective name"], "allgather");
    // One row of their own, never overlapping.
    std::vector<std::pair<double, double>> intervals;
    for (const auto& [name, list] : spans) {
      for (const auto& e : list) {
        EXPECT_EQ(e["tid"], first["tid"]);
        intervals.emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
      }
    }
    std::sort(intervals.begin(), intervals.end());
    for (size_t i = 1; i < intervals.size(); ++i)
      EXPECT_LE(intervals[i - 1].second, intervals[i].first + 1e-3);
  }
}

// Both ways an all-reduce runs: Gloo's ring, and the gather of a small one (its 1 MiB tensor is
// at the default small_all_reduce_kib).
TEST(ProcessGroup, AKilledRankIsNamedBySurvivorsWithinSeconds) {
  for (const std::string kib : {"0", "1024"}) {
    ScratchDir out("pg_lost");
    const auto run = run_ranks(2, "lost_rank", out.path(),
                               "RT_TEST_PG_TIMEOUT_S=20 RT_TEST_SMALL_ALL_REDUCE_KIB=" + kib + " ");
    EXPECT_NE(run.exit_code, 0) << run.output;
    const std::string lost = read_text(out / "lost_rank0.txt");
    const std::string op = kib == "0" ? "gloo:all_reduce" : "gloo:all_gather";
    EXPECT_TRUE(
        std::regex_search(lost, std::regex("^rank 1 stopped answering during " + op + " \\(.+\\); stopping")))
        << lost << "\n"
        << run.output;
    // "stopped answering" is the broken connection's message; the timeout's is "no answer from
    // the other ranks within 20 s" (AHungRankStopsTheOthersAfterTheTimeout): which one came says
    // whether the loss was noticed before the timeout, whatever the machine's speed.
    EXPECT_EQ(lost.find("no answer from the other ranks within"), std::string::npos) << lost;
    EXPECT_EQ(read_text(out / "after_failure_rank0.txt"), lost.substr(0, lost.find('\n')))
        << "after a failure every call fails at once with the first failure's message";
  }
}

TEST(ProcessGroup, AHungRankStopsTheOthersAfterTheTimeout) {
  ScratchDir out("pg_hung");
  const auto run = run_ranks(2, "hung_rank", out.path(), "RT_TEST_PG_TIMEOUT_S=3 ", 120, 2000);
  EXPECT_NE(run.exit_code, 0) << run.output;
  const std::string hung = read_text(out / "hung_rank0.txt");
  // Its 16-element all-reduce runs as a gather (small_all_reduce_kib).
  EXPECT_NE(hung.find("no answer from the other ranks within 3 s during gloo:all_gather"), std::string::npos)
      << hung << "\n"
      << run.output;
  const double after = std::stod(hung.substr(hung.rfind("after ") + 6));
  EXPECT_GT(after, 2.5);
  EXPECT_LT(after, 12.0);
}

// Small all-reduces run as an all-gather and a sum in rank order (c10d_communicator.h): for 2
// ranks bit for bit the ring's sums; for 3, the same sums on every rank, within rounding of the
// ring's. The trace shows what ran, and the threshold counts the other ranks' bytes.
TEST(ProcessGroup, SmallAllReducesGatherAndSumInRankOrder) {
  for (const int world : {2, 3}) {
    ScratchDir ring("pg_sums_ring"), gathered("pg_sums_gather");
    auto run = run_ranks(world, "sums", ring.path(), "RT_TEST_SMALL_ALL_REDUCE_KIB=0 ");
    ASSERT_EQ(run.exit_code, 0) << run.output;
    run = run_ranks(world, "sums", gathered.path(), "RT_TEST_SMALL_ALL_REDUCE_KIB=1 ");
    ASSERT_EQ(run.exit_code, 0) << run.output;
    for (int i = 0; i < 6; ++i) {
      const auto reference = load_result(ring.path(), "sum" + std::to_string(i), 0);
      const auto mine = load_result(gathered.path(), "sum" + std::to_string(i), 0);
      EXPECT_GT(reference.abs().sum().item<double>(), 0.0);
      for (int r = 0; r < world; ++r) {
        EXPECT_TRUE(torch::equal(load_result(ring.path(), "sum" + std::to_string(i), r), reference)) << i;
        EXPECT_TRUE(torch::equal(load_result(gathered.path(), "sum" + std::to_string(i), r), mine))
            << "every rank sums the gathered copies in the same order: tensor " << i << ", rank " << r;
      }
      if (world == 2) {
        EXPECT_TRUE(torch::equal(mine, reference)) << "2 ranks: the ring's sum, bit for bit; tensor " << i;
      } else {
        EXPECT_TRUE(torch::allclose(mine, reference, 1e-5, 1e-6)) << i;
      }
    }
    // 1 KiB of other ranks' data: float tensors of 1, 9 and 255 elements (1020 bytes) and the
    // 9 doubles gather with 2 ranks; with 3 (2 other copies) the 255 floats take the ring.
    for (int r = 0; r < world; ++r) {
      auto spans = gloo_spans(gathered / ("trace_rank" + std::to_string(r) + ".json"));
      ASSERT_EQ(spans["gloo:all_gather"].size(), world == 2 ? 4u : 3u) << world;
      ASSERT_EQ(spans["gloo:all_reduce"].size(), world == 2 ? 2u : 3u) << world;
      const Json& first = spans["gloo:all_gather"][0];
      EXPECT_EQ(first["args"]["Collective name"], "allgather");
      EXPECT_EQ(first["args"]["In msg nelems"], 1);
      EXPECT_EQ(first["args"]["Out msg nelems"], world);
      EXPECT_EQ(spans["gloo:all_gather"].back()["args"]["dtype"], "Double");
      EXPECT_EQ(spans["gloo:all_reduce"].back()["args"]["In msg nelems"], 70000);
      EXPECT_EQ(gloo_spans(ring / ("trace_rank" + std::to_string(r) + ".json"))["gloo:all_reduce"].size(),
                6u);
    }
  }
}

// train.distributed.gloo_loop: "batch" puts exactly one thread per rank under SCHED_BATCH, and it
// is Gloo's event loop (seen in epoll_wait); "normal" leaves every thread under the default policy.
// Collectives work either way.
TEST(ProcessGroup, GlooEventLoopRunsUnderSchedBatch) {
  for (const std::string loop : {"batch", "normal"}) {
    ScratchDir out("pg_loop_" + loop);
    const auto run = run_ranks(2, "event_loop", out.path(), "RT_TEST_GLOO_LOOP=" + loop + " ");
    ASSERT_EQ(run.exit_code, 0) << run.output;
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(read_text(out / ("loop_rank" + std::to_string(r) + ".txt")),
                loop == "batch" ? "SCHED_BATCH 1 1 2.000000" : "SCHED_OTHER 0 0 2.000000")
          << loop << ", rank " << r;
    }
  }
  EXPECT_EQ(scheduling_policy_name(SCHED_OTHER), "SCHED_OTHER");
  EXPECT_EQ(scheduling_policy_name(SCHED_BATCH), "SCHED_BATCH");
}

// torchrun (python3-torch), when installed: the agent store (static rendezvous, every rank a
// client) and --standalone (rank 0 hosts the store). Debian 12's torchrun needs
// --redirects/--tee (its Std flag parsing fails on Python 3.11 otherwise).
TEST(ProcessGroup, RanksJoinUnderTorchrun) {
  if (const auto why = testing::torchrun_unusable_reason(); !why.empty()) GTEST_SKIP() << why;
  for (const std::string mode : {"static", "standalone"}) {
    ScratchDir out("pg_torchrun");
    int port = 0;
    {
      Listener probe;
      port = probe.port;
    }
    const std::string rdzv =
        mode == "static" ? "--master_addr 127.0.0.1 --master_port " + std::to_string(port) : "--standalone";
    const auto r = testing::run_command(
        "timeout -k 10 120 torchrun --no_python --nproc_per_node 2 --redirects 2 "
        "--tee 2 " +
        rdzv + " " + RT_RANK_WORKER + " join_only " + out.path().string());
    ASSERT_EQ(r.exit_code, 0) << mode << "\n" << r.output;
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_TRUE(torch::equal(load_result(out.path(), "joined", rank), torch::full({1}, 3.0f))) << mode;
    }
  }
}

}  // namespace
}  // namespace rt::dist
