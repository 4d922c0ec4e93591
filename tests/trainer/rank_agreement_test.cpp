// The decisions ranks take together (trainer/rank_agreement.h) and the per-rank figures of
// training_summary.json (trainer/job_summary.h), on the one-process communicator and on a
// scripted one that plays the other ranks of a larger job.
#include "trainer/rank_agreement.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "trainer/job_summary.h"

namespace rt {
namespace {

// Rank `rank` of `others.size() + 1` ranks: a collective combines this rank's tensor with the
// other ranks' next scripted tensors (one per rank, in rank order, this rank's left out).
class ScriptedCommunicator final : public dist::Communicator {
 public:
  ScriptedCommunicator(int rank, std::vector<std::vector<torch::Tensor>> others)
      : rank_(rank), others_(std::move(others)) {}
  int rank() const override { return rank_; }
  int world_size() const override { return static_cast<int>(others_.size()) + 1; }
  std::string backend() const override { return "scripted"; }
  void all_reduce_sum(torch::Tensor& tensor) override {
    for (auto& t : take()) tensor.add_(t);
    ++collectives;
  }
  dist::PendingCollective all_reduce_sum_async(const torch::Tensor&) override { return {}; }
  void broadcast(std::vector<torch::Tensor>&, int) override {}
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor) override {
    std::vector<torch::Tensor> all = take();
    all.insert(all.begin() + rank_, tensor);
    ++collectives;
    return all;
  }
  void barrier() override {}
  int collectives = 0;

 private:
  std::vector<torch::Tensor> take() {
    std::vector<torch::Tensor> out;
    for (auto& queue : others_) {
      EXPECT_FALSE(queue.empty()) << "a collective the test did not script";
      out.push_back(queue.front());
      queue.erase(queue.begin());
    }
    return out;
  }
  int rank_;
  std::vector<std::vector<torch::Tensor>> others_;
};

torch::Tensor d(double v) { return torch::full({1}, v, torch::kDouble); }

TEST(RankAgreement, OneProcessDecidesAlone) {
  dist::LocalCommunicator local;
  EXPECT_FALSE(agree_on_flags(local, stop_and_checkpoint_flags(false, false), std::nullopt).stop);
  const AgreedFlags both = agree_on_flags(local, stop_and_checkpoint_flags(true, true), std::nullopt);
  EXPECT_TRUE(both.stop);
  EXPECT_TRUE(both.checkpoint);
  const NonFiniteStep bad = first_nonfinite_over_ranks(local, 12);
  EXPECT_EQ(bad.step, 12);
  EXPECT_EQ(bad.where, "") << "a one-process run names no rank";
  EXPECT_EQ(first_nonfinite_over_ranks(local, -1).step, -1);
  std::map<std::string, double> means{{"train/loss", 2.5}, {"train/examples_per_second", 40.0}};
  mean_over_ranks(local, means, {"train/examples_per_second"});
  EXPECT_EQ(means.at("train/loss"), 2.5);
  EXPECT_EQ(means.at("train/examples_per_second"), 40.0);
}

TEST(RankAgreement, StopAndCheckpointFlagsStayApartForAnyWorldSize) {
  // 4095 ranks each stopping and asking for a checkpoint: the sum still tells both apart.
  const double worst = 4095 * stop_and_checkpoint_flags(true, true);
  EXPECT_LT(worst, 16777216.0) << "the carried sum must be exact in a float32 gradient bucket";
  dist::LocalCommunicator local;
  const AgreedFlags all = agree_on_flags(local, 0.0, worst);
  EXPECT_TRUE(all.stop);
  EXPECT_TRUE(all.checkpoint);
  const AgreedFlags checkpoints_only = agree_on_flags(local, 0.0, 4095 * kCheckpointFlag);
  EXPECT_FALSE(checkpoints_only.stop);
  EXPECT_TRUE(checkpoints_only.checkpoint);
  const AgreedFlags stops_only = agree_on_flags(local, 0.0, 4095.0);
  EXPECT_TRUE(stops_only.stop);
  EXPECT_FALSE(stops_only.checkpoint);
}

TEST(RankAgreement, OneRanksSignalStopsEveryRank) {
  // Rank 0 got nothing; rank 2 got SIGTERM, rank 1 SIGUSR1.
  ScriptedCommunicator comm(0, {{d(kCheckpointFlag)}, {d(1.0)}});
  const AgreedFlags a = agree_on_flags(comm, stop_and_checkpoint_flags(false, false), std::nullopt);
  EXPECT_TRUE(a.stop);
  EXPECT_TRUE(a.checkpoint);
  EXPECT_EQ(comm.collectives, 1);
  // Carried in the gradients: no collective of its own.
  EXPECT_FALSE(agree_on_flags(comm, 0.0, 0.0).stop);
  EXPECT_EQ(comm.collectives, 1);
}

TEST(RankAgreement, FirstNonFiniteStepIsTheEarliestOverRanksAndNamesThem) {
  auto step = [](int64_t s) { return torch::tensor({s}, torch::kLong); };
  ScriptedCommunicator comm(1, {{step(9)}, {step(7)}, {step(-1)}});  // ranks 0, 2, 3
  const NonFiniteStep bad = first_nonfinite_over_ranks(comm, 7);     // rank 1
  EXPECT_EQ(bad.step, 7);
  EXPECT_EQ(bad.where, " on ranks 1, 2");
  ScriptedCommunicator one(0, {{step(-1)}});
  EXPECT_EQ(first_nonfinite_over_ranks(one, 3).where, " on rank 0");
  ScriptedCommunicator none(0, {{step(-1)}});
  EXPECT_EQ(first_nonfinite_over_ranks(none, -1).step, -1);
}

TEST(RankAgreement, LoggedMeansAverageOverRanksAndRatesAdd) {
  std::map<std::string, double> means{{"train/examples_per_second", 10.0}, {"train/loss", 1.0}};
  // Tags in map order: examples_per_second, loss.
  ScriptedCommunicator comm(0, {{torch::tensor({30.0, 3.0}, torch::kDouble)}});
  mean_over_ranks(comm, means, {"train/examples_per_second"});
  EXPECT_DOUBLE_EQ(means.at("train/loss"), 2.0);
  EXPECT_DOUBLE_EQ(means.at("train/examples_per_second"), 40.0);
}

TEST(JobSummaryRanks, EveryRanksFiguresAndTheJobsThroughput) {
  LoopFigures mine;
  mine.steps = 10;
  mine.examples = 40;
  mine.train_seconds = 2.0;
  mine.data_seconds = 0.5;
  mine.samples_per_example = 100;
  // Rank 1: 10 steps, 4 s, 40 examples, 1 s busy, 0.5 s waiting, 20 collectives, 800 bytes, 1 s data.
  ScriptedCommunicator comm(0,
                            {{torch::tensor({10.0, 4.0, 40.0, 1.0, 0.5, 20.0, 800.0, 1.0}, torch::kDouble)}});
  JobSummary summary;
  summary.record_ranks(comm, true, mine);
  const Json d = summary.summary().to_json("running").at("distributed");
  EXPECT_EQ(d.at("ranks_reported"), 2);
  EXPECT_EQ(d.at("world_size"), 2);
  EXPECT_DOUBLE_EQ(d.at("examples_per_second").get<double>(), 20.0 + 10.0);
  EXPECT_DOUBLE_EQ(d.at("samples_per_second").get<double>(), 3000.0);
  EXPECT_DOUBLE_EQ(d.at("step_time_skew").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(d.at("comm_wait_share").get<double>(), 0.125);
  const Json r1 = d.at("per_rank").at(1);
  EXPECT_EQ(r1.at("rank"), 1);
  EXPECT_EQ(r1.at("collectives"), 20);
  EXPECT_DOUBLE_EQ(r1.at("step_examples_per_second").get<double>(), 40.0 / 3.0);
  EXPECT_DOUBLE_EQ(d.at("per_rank").at(0).at("data_wait_share").get<double>(), 0.25);
  // Ranks that did not finish together: this rank's own figures, under its own rank.
  ScriptedCommunicator alone(1, {{}});
  JobSummary own;
  own.record_ranks(alone, false, mine);
  const Json o = own.summary().to_json("running").at("distributed");
  EXPECT_EQ(o.at("ranks_reported"), 1);
  EXPECT_EQ(o.at("per_rank").at(0).at("rank"), 1);
}

}  // namespace
}  // namespace rt
