// Data parallelism in the loader: each rank's slice of every global batch, the union over
// ranks equal to one process's batch (examples and per-example randomness), resuming the
// global stream with another world size, and multi-session group batches split by rank.
#include <gtest/gtest.h>

#include <set>

#include "data/loader.h"
#include "data/neural/neural_dataset.h"
#include "data_fixtures.h"
#include "util/error.h"

namespace rt {
namespace {

using testing::take;

// input = [index, two rng draws] (the draws stand for augmentation); group = index % 3.
class DrawingSource : public ExampleSource {
 public:
  explicit DrawingSource(size_t n) : n_(n) {}
  size_t size() const override { return n_; }
  Example get(size_t index, std::mt19937_64& rng) const override {
    std::uniform_real_distribution<float> u(0, 1);
    Example e;
    e.input = torch::tensor({static_cast<float>(index), u(rng), u(rng)});
    e.group = static_cast<int64_t>(index % 3);
    return e;
  }
  int64_t group_of(size_t index) const override { return static_cast<int64_t>(index % 3); }

 private:
  size_t n_;
};

LoaderOptions options(int64_t batch, int rank, int world, int workers) {
  LoaderOptions o;
  o.batch = batch;
  o.rank = rank;
  o.world_size = world;
  o.workers = workers;
  o.seed = 5;
  return o;
}

// The union over ranks (in rank order) of step i's batches.
Batch concat(const std::vector<std::vector<Batch>>& ranks, size_t i) {
  Batch b = ranks[0][i];
  for (size_t r = 1; r < ranks.size(); ++r) {
    b.input = torch::cat({b.input, ranks[r][i].input});
    b.indices.insert(b.indices.end(), ranks[r][i].indices.begin(), ranks[r][i].indices.end());
  }
  return b;
}

TEST(LoaderSharding, RanksTogetherDeliverTheSingleProcessBatches) {
  auto src = std::make_shared<DrawingSource>(26);  // 6 global batches of 4 per epoch, 2 dropped
  Loader single(src, options(4, 0, 1, 2));
  const auto expected = take(single, 14);  // crosses two epochs
  std::vector<std::vector<Batch>> ranks;
  for (int r = 0; r < 2; ++r) {
    Loader loader(src, options(2, r, 2, r == 0 ? 0 : 3));  // worker counts differ on purpose
    ranks.push_back(take(loader, 14));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const Batch both = concat(ranks, i);
    EXPECT_TRUE(torch::equal(both.input, expected[i].input)) << "step " << i;
    EXPECT_EQ(both.indices, expected[i].indices);
    std::set<size_t> r0(ranks[0][i].indices.begin(), ranks[0][i].indices.end());
    for (size_t k : ranks[1][i].indices) EXPECT_EQ(r0.count(k), 0u) << "ranks share example " << k;
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(ranks[r][i].indices.size(), 2u);
      EXPECT_EQ(ranks[r][i].batch_idx, expected[i].batch_idx);
      EXPECT_EQ(ranks[r][i].epoch, expected[i].epoch);
      EXPECT_EQ(ranks[r][i].position.example, expected[i].position.example);
    }
  }
  EXPECT_EQ(expected[5].position.example, 24);
  EXPECT_EQ(expected[6].position.epoch, 1u);
  EXPECT_EQ(expected[6].position.example, 4);
}

TEST(LoaderSharding, ResumingWithAnotherWorldSizeContinuesTheGlobalStream) {
  auto src = std::make_shared<DrawingSource>(26);
  // Two ranks × 2 for four steps: 16 examples of epoch 0 consumed.
  std::vector<Batch> before;
  for (int r = 0; r < 2; ++r) {
    Loader loader(src, options(2, r, 2, 1));
    before = take(loader, 4);
  }
  const StreamPosition at = before.back().position;
  EXPECT_EQ(at.epoch, 0u);
  EXPECT_EQ(at.example, 16);
  // One process × 2 resumes there; an uninterrupted one-process × 2 stream is at batch 8 then.
  LoaderOptions resumed = options(2, 0, 1, 2);
  resumed.start = at;
  Loader after(src, resumed);
  Loader fresh(src, options(2, 0, 1, 0));
  const auto reference = take(fresh, 20);
  const auto got = take(after, 12);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].indices, reference[8 + i].indices) << "batch " << i;
    EXPECT_TRUE(torch::equal(got[i].input, reference[8 + i].input)) << "same per-example randomness";
    EXPECT_EQ(got[i].position.example, reference[8 + i].position.example);
  }
  // A position at the end of an epoch starts the next one.
  resumed.start = {0, 26};
  Loader next_epoch(src, resumed);
  EXPECT_EQ(take(next_epoch, 1)[0].indices, reference[13].indices);
  EXPECT_EQ(reference[13].epoch, 1u);
}

TEST(LoaderSharding, ACustomPlanResumesInsideABatchWithoutLosingExamples) {
  auto src = std::make_shared<DrawingSource>(12);
  BatchSampler plan = [](uint64_t) {
    return std::vector<std::vector<size_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}};
  };
  LoaderOptions o = options(4, 0, 1, 0);
  o.start = {0, 6};
  Loader loader(src, o, {}, plan);
  const auto got = take(loader, 3);
  EXPECT_EQ(got[0].indices, (std::vector<size_t>{6, 7}));
  EXPECT_EQ(got[1].indices, (std::vector<size_t>{8, 9}));
  EXPECT_EQ(got[2].indices, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(got[2].epoch, 1u);
  EXPECT_EQ(got[1].position.example, 10);
}

TEST(LoaderSharding, SmallGlobalBatchesAreSkippedInTrainingAndSplitInEvaluation) {
  EXPECT_EQ(rank_slice({1, 2, 3, 4, 5}, 0, 2), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(rank_slice({1, 2, 3, 4, 5}, 1, 2), (std::vector<size_t>{3, 4, 5}));
  EXPECT_TRUE(rank_slice({1}, 0, 2).empty());
  auto src = std::make_shared<DrawingSource>(5);
  // Evaluation: global batches [0..3], [4]; every example is seen by exactly one rank.
  std::multiset<size_t> seen;
  std::vector<size_t> counts;
  for (int r = 0; r < 2; ++r) {
    LoaderOptions o = options(2, r, 2, 1);
    o.shuffle = false;
    o.drop_last = false;
    o.infinite = false;
    Loader loader(src, o);
    const auto batches = take(loader, 10);
    counts.push_back(batches.size());
    for (const auto& b : batches) seen.insert(b.indices.begin(), b.indices.end());
  }
  EXPECT_EQ(seen, (std::multiset<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(counts, (std::vector<size_t>{1, 2}));  // [0,1] | [2,3], [4]
  // Training: the one-example batch is skipped on both ranks, so they step together.
  for (int r = 0; r < 2; ++r) {
    LoaderOptions o = options(2, r, 2, 0);
    o.shuffle = false;
    o.drop_last = false;
    Loader loader(src, o);
    const auto batches = take(loader, 3);
    EXPECT_EQ(batches[1].epoch, 1u) << "rank " << r;
    EXPECT_EQ(batches[1].batch_idx, 2) << "global batch 1 (one example) was skipped";
  }
}

TEST(LoaderSharding, RejectsImpossibleShards) {
  auto src = std::make_shared<DrawingSource>(4);
  EXPECT_THROW(Loader(src, options(2, 2, 2, 0)), Error);
  LoaderOptions both = options(2, 0, 1, 0);
  both.start_batch = 3;
  both.start = {1, 0};
  EXPECT_THROW(Loader(src, both), Error);
  // Every global batch is smaller than the world: no training step is possible (not a hang).
  LoaderOptions tiny = options(1, 0, 8, 0);
  tiny.drop_last = false;
  Loader loader(src, tiny);
  EXPECT_THROW(loader.next(), Error);
}

TEST(LoaderSharding, GroupBatchesBuiltAtTheGlobalSizeSplitIntoOneGroupPerStep) {
  auto src = std::make_shared<DrawingSource>(36);  // three groups of 12: every group batch is full
  std::vector<size_t> all(36);
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  auto sampler_for = [&](size_t global_batch) -> BatchSampler {
    return [src, all, global_batch](uint64_t epoch) {
      return neural::group_batches(*src, all, global_batch, epoch, 9);
    };
  };
  Loader single(src, options(4, 0, 1, 0), {}, sampler_for(4));
  const auto expected = take(single, 12);
  std::vector<std::vector<Batch>> ranks;
  for (int r = 0; r < 2; ++r) {
    Loader loader(src, options(2, r, 2, 1), {}, sampler_for(4));
    ranks.push_back(take(loader, 12));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(concat(ranks, i).indices, expected[i].indices) << "step " << i;
    EXPECT_EQ(ranks[0][i].group, ranks[1][i].group) << "both ranks train the same group's encoder";
    for (int r = 0; r < 2; ++r) {
      for (size_t k : ranks[r][i].indices) EXPECT_EQ(src->group_of(k), ranks[r][i].group);
    }
  }
}

}  // namespace
}  // namespace rt
