// Two hosts over a real network: two network namespaces of our own joined by a veth pair,
// 10.77.0.1/24 and 10.77.0.2/24, one rank in each (the variables torchrun sets on each node:
// LOCAL_WORLD_SIZE=1, no GLOO_SOCKET_IFNAME, the host name resolving to loopback as on this
// machine). Traffic stays between the two namespaces. Needs root and `ip netns`; skipped,
// naming what is missing, elsewhere.
//
// Covered: equivalence against one process with the doubled batch; a link that goes down
// mid-run; a peer killed with kill -9; SIGTERM to one rank; and the rendezvous bound by
// train.distributed.timeout_s (rank 0 alone; the link down before start).
#include <unistd.h>

#include <limits>

#include "e2e/e2e_fixtures.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

using testing::contains;

class TwoHosts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_two_hosts");
    db_ = make_neural_db(dir_->path(), "--groups 1 --units 24 --trials 66 --seed 7");
    tag_ = "rt" + std::to_string(::getpid() % 100000);
    if (::geteuid() != 0) {
      missing_ = "needs root to make network namespaces";
      return;
    }
    const std::string a = tag_ + "a", b = tag_ + "b";
    auto r = run_command(
        "ip netns add " + a + " && ip netns add " + b + " && ip link add " + a + "v type veth peer name " +
        b + "v && ip link set " + a + "v netns " + a + " && ip link set " + b + "v netns " + b +
        " && ip -n " + a + " addr add 10.77.0.1/24 dev " + a + "v && ip -n " + b +
        " addr add 10.77.0.2/24 dev " + b + "v && ip -n " + a + " link set " + a + "v up && ip -n " + b +
        " link set " + b + "v up && ip -n " + a + " link set lo up && ip -n " + b + " link set lo up");
    if (r.exit_code != 0)
      missing_ = "cannot make two network namespaces with a veth pair (ip netns): " + r.output;
  }
  static void TearDownTestSuite() {
    run_command("ip netns del " + tag_ + "a; ip netns del " + tag_ + "b");
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!missing_.empty()) GTEST_SKIP() << missing_;
    link(true);
  }

  // The link between the namespaces up or down (rank 0's end).
  static void link(bool up) {
    auto r = run_command("ip -n " + tag_ + "a link set " + tag_ + "av " + (up ? "up" : "down"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  // `train` as rank `rank` of 2 in its namespace; rank 0 listens on 10.77.0.1:port.
  static std::string rank_command(int rank, int port, const fs::path& out, const std::string& extra) {
    return "ip netns exec " + tag_ + (rank == 0 ? "a" : "b") +
           " env -u GLOO_SOCKET_IFNAME RANK=" + std::to_string(rank) +
           " LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 MASTER_ADDR=10.77.0.1 MASTER_PORT=" +
           std::to_string(port) + " " + bin_path("train") + " --config tiny_ssm --db_path " +
           quote(db_.string()) + " --out_path " + quote(out.string()) + " --threads 1 --workers 0 " + extra;
  }
  static int next_port() { return 29500 + (port_counter_++ % 400); }

  static ScratchDir* dir_;
  static fs::path db_;
  static std::string tag_, missing_;
  static int port_counter_;
};
ScratchDir* TwoHosts::dir_ = nullptr;
fs::path TwoHosts::db_;
std::string TwoHosts::tag_, TwoHosts::missing_;
int TwoHosts::port_counter_ = 17;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double max_difference(const std::map<std::string, torch::Tensor>& a,
                      const std::map<std::string, torch::Tensor>& b) {
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end()) {
      ADD_FAILURE() << "missing " << name;
      continue;
    }
    if (!t.is_floating_point()) {
      if (!torch::equal(t, it->second)) worst = std::numeric_limits<double>::infinity();
      continue;
    }
    worst =
        std::max(worst, (t.to(torch::kDouble) - it->second.to(torch::kDouble)).abs().max().item<double>());
  }
  return worst;
}

TEST_F(TwoHosts, TwoRanksInTwoNamespacesTrainAsOneProcessWithTheDoubledBatch) {
  const std::string common = "--max_steps 20 --log_every 5 --val_every 10 --save_every 1000 --seed 3";
  auto one =
      run_command(bin_path("train") + " --config tiny_ssm --db_path " + quote(db_.string()) + " --out_path " +
                  quote((dir_->path() / "one").string()) + " --threads 1 --workers 0 --batch 8 " + common);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const int port = next_port();
  const fs::path out = dir_->path() / "two";
  BackgroundProcess r1(rank_command(1, port, out, "--batch 4 " + common), dir_->path() / "eq1.log");
  BackgroundProcess r0(rank_command(0, port, out, "--batch 4 " + common), dir_->path() / "eq0.log");
  EXPECT_EQ(r0.wait_exit(300), 0) << r0.log() << r1.log();
  EXPECT_EQ(r1.wait_exit(60), 0) << r1.log();
  // Rank 1's host name resolves to loopback: it advertises the address that reaches rank 0.
  EXPECT_TRUE(contains(r1.log(), "advertising 10.77.0.2, the address that reaches MASTER_ADDR = 10.77.0.1"))
      << r1.log();
  const auto a = checkpoint_tensors(run_dir_from_output(one.output) / "checkpoints" / "last.ckpt");
  const auto b = checkpoint_tensors(run_dir_from_output(r0.log()) / "checkpoints" / "last.ckpt");
  const double diff = max_difference(a, b);
  EXPECT_LT(diff, 1e-5);
}

// A 2-rank run over the veth pair that trains until something stops it.
struct Pair {
  std::unique_ptr<BackgroundProcess> r0, r1;
};
Pair start_pair(const std::string& name, const std::string& extra, int port, const fs::path& dir,
                const std::function<std::string(int, int, const fs::path&, const std::string&)>& command) {
  Pair p;
  const std::string args =
      "--batch 4 --max_steps 1000000 --log_every 5 --val_every 100000 --save_every 20 " + extra;
  p.r1 = std::make_unique<BackgroundProcess>(command(1, port, dir / name, args), dir / (name + "1.log"));
  p.r0 = std::make_unique<BackgroundProcess>(command(0, port, dir / name, args), dir / (name + "0.log"));
  return p;
}

TEST_F(TwoHosts, ALinkDownMidRunEndsBothRanksWithinTheTimeoutNamingIt) {
  Pair p = start_pair("down", "--train.distributed.timeout_s 15", next_port(), dir_->path(), rank_command);
  ASSERT_TRUE(p.r0->wait_until([&] { return last_logged_step(p.r0->log()) >= 30; }, 180))
      << p.r0->log() << p.r1->log();
  link(false);
  const int c0 = p.r0->wait_exit(120), c1 = p.r1->wait_exit(60);
  link(true);
  EXPECT_NE(c0, 0) << p.r0->log();
  EXPECT_NE(c0, -1) << "rank 0 did not stop:\n" << p.r0->log();
  EXPECT_NE(c1, 0) << p.r1->log();
  EXPECT_NE(c1, -1) << "rank 1 did not stop:\n" << p.r1->log();
  EXPECT_TRUE(contains(p.r0->log(), "error:")) << p.r0->log();
  const Json summary = read_json(run_dir_from_output(p.r0->log()) / "training_summary.json");
  EXPECT_EQ(summary.at("status").get<std::string>().rfind("failed: ", 0), 0u) << summary.dump(2);
  EXPECT_FALSE(checkpoint_tensors(run_dir_from_output(p.r0->log()) / "checkpoints" / "last.ckpt").empty());
}

TEST_F(TwoHosts, APeerKilledEndsTheOtherRankNamingIt) {
  Pair p = start_pair("kill", "--train.distributed.timeout_s 60", next_port(), dir_->path(), rank_command);
  ASSERT_TRUE(p.r0->wait_until([&] { return last_logged_step(p.r0->log()) >= 30; }, 180))
      << p.r0->log() << p.r1->log();
  p.r1->signal(SIGKILL);
  EXPECT_EQ(p.r1->wait_exit(30), 128 + SIGKILL);
  const int c0 = p.r0->wait_exit(90);
  EXPECT_NE(c0, 0) << p.r0->log();
  EXPECT_NE(c0, -1) << "rank 0 did not stop:\n" << p.r0->log();
  EXPECT_TRUE(contains(p.r0->log(), "rank 1")) << p.r0->log();
  EXPECT_FALSE(checkpoint_tensors(run_dir_from_output(p.r0->log()) / "checkpoints" / "last.ckpt").empty());
}

TEST_F(TwoHosts, SigtermToOneRankStopsBothAfterTheSameStep) {
  Pair p = start_pair("term", "--train.distributed.timeout_s 60", next_port(), dir_->path(), rank_command);
  ASSERT_TRUE(p.r0->wait_until([&] { return last_logged_step(p.r0->log()) >= 20; }, 180))
      << p.r0->log() << p.r1->log();
  p.r1->signal(SIGTERM);
  EXPECT_EQ(p.r1->wait_exit(60), 143) << p.r1->log();
  // Rank 0 stops with the others' agreement: interrupted, the same step, its files whole.
  EXPECT_EQ(p.r0->wait_exit(60), 0 + 128 + SIGTERM) << p.r0->log();
  const Json summary = read_json(run_dir_from_output(p.r0->log()) / "training_summary.json");
  EXPECT_EQ(summary.at("status"), "interrupted") << summary.dump(2);
  ASSERT_EQ(summary["distributed"]["per_rank"].size(), 2u) << summary.dump(2);
  EXPECT_EQ(summary["distributed"]["per_rank"][0]["steps"], summary["distributed"]["per_rank"][1]["steps"]);
}

// The rendezvous is bounded by train.distributed.timeout_s as a whole, and the message says how
// long it waited. Before: rank 0 alone with 10 s exited after 21.8 s; the link down before the
// start with 30 s after 63.6 s. Budget (label `timing`): the timeout plus what starting and
// ending a rank takes on this machine now, measured first in the same test (a rank refused at
// its command line: the same libraries loaded, no rendezvous), four times over and at least 4 s.
TEST_F(TwoHosts, TheRendezvousEndsWithinItsTimeoutSayingHowLongItWaited) {
  double start_and_exit = 0.0;
  {
    const auto t0 = std::chrono::steady_clock::now();
    BackgroundProcess cal(rank_command(0, next_port(), dir_->path() / "cal", "--no_such_flag"),
                          dir_->path() / "cal.log");
    EXPECT_EQ(cal.wait_exit(120), 2) << cal.log();
    start_and_exit = seconds_since(t0);
  }
  const double overhead = std::max(4.0, 4.0 * start_and_exit);
  {
    const auto t0 = std::chrono::steady_clock::now();
    BackgroundProcess alone(rank_command(0, next_port(), dir_->path() / "alone",
                                         "--batch 4 --max_steps 4 --train.distributed.timeout_s 5"),
                            dir_->path() / "alone.log");
    const int code = alone.wait_exit(120);
    const double took = seconds_since(t0);
    EXPECT_EQ(code, 2) << alone.log();
    EXPECT_TRUE(contains(alone.log(), "train.distributed.timeout_s = 5 s (gave up after 5.")) << alone.log();
    EXPECT_LT(took, 5.0 + overhead) << alone.log() << "(a rank starts and exits in " << start_and_exit
                                    << " s)";
  }
  link(false);
  const auto t0 = std::chrono::steady_clock::now();
  const int port = next_port();
  const std::string args = "--batch 4 --max_steps 4 --train.distributed.timeout_s 5";
  BackgroundProcess r1(rank_command(1, port, dir_->path() / "nolink", args), dir_->path() / "nolink1.log");
  BackgroundProcess r0(rank_command(0, port, dir_->path() / "nolink", args), dir_->path() / "nolink0.log");
  const int c0 = r0.wait_exit(120), c1 = r1.wait_exit(120);
  const double took = seconds_since(t0);
  link(true);
  EXPECT_EQ(c0, 2) << r0.log();
  EXPECT_NE(c1, 0) << r1.log();
  EXPECT_NE(c1, -1) << r1.log();
  EXPECT_TRUE(contains(r1.log(), "gave up after")) << r1.log();
  EXPECT_LT(took, 5.0 + overhead) << r0.log() << r1.log();
}

}  // namespace
}  // namespace rt::e2e
