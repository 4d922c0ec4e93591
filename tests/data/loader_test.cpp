#include "data/loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <set>
#include <thread>

#include "data/audio_dataset.h"
#include "data_fixtures.h"
#include "support/test_support.h"
#include "util/error.h"

namespace rt {
namespace {

using testing::take;

// input = [index, three rng draws]; optional delay and a failing index.
class FakeSource : public ExampleSource {
 public:
  FakeSource(size_t n, int delay_ms = 0, long fail_at = -1) : n_(n), delay_ms_(delay_ms), fail_at_(fail_at) {}
  size_t size() const override { return n_; }
  Example get(size_t index, std::mt19937_64& rng) const override {
    ++calls;
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    if (static_cast<long>(index) == fail_at_) throw Error("record '" + std::to_string(index) + "' is broken");
    std::uniform_real_distribution<float> u(0, 1);
    Example e;
    e.input = torch::tensor({static_cast<float>(index), u(rng), u(rng), u(rng)});
    e.target = torch::full({2}, static_cast<float>(index));
    e.group = static_cast<int64_t>(index % 3);
    return e;
  }
  mutable std::atomic<int> calls{0};

 private:
  size_t n_;
  int delay_ms_;
  long fail_at_;
};

TEST(Loader, BatchesAreIdenticalForAnyWorkerCount) {
  auto src = std::make_shared<FakeSource>(23);
  LoaderOptions o;
  o.batch = 4;
  o.seed = 11;
  std::vector<std::vector<Batch>> runs;
  for (int w : {0, 1, 3}) {
    o.workers = w;
    Loader loader(src, o);
    runs.push_back(take(loader, 13));  // Crosses two epoch boundaries (5 batches per epoch).
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].size(), runs[0].size());
    for (size_t i = 0; i < runs[0].size(); ++i) {
      EXPECT_TRUE(torch::equal(runs[r][i].input, runs[0][i].input)) << "run " << r << " batch " << i;
      EXPECT_EQ(runs[r][i].indices, runs[0][i].indices);
      EXPECT_EQ(runs[r][i].batch_idx, static_cast<int64_t>(i));
      EXPECT_EQ(runs[r][i].epoch, runs[0][i].epoch);
    }
  }
  EXPECT_EQ(runs[0][12].epoch, 2u);
  EXPECT_EQ(runs[0][0].input.sizes(), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(runs[0][0].target.sizes(), (std::vector<int64_t>{4, 2}));
  // Epochs are reshuffled, and a different seed gives a different stream.
  EXPECT_NE(runs[0][0].indices, runs[0][5].indices);
  o.seed = 12;
  Loader other(src, o);
  EXPECT_FALSE(torch::equal(take(other, 1)[0].input, runs[0][0].input));
}

TEST(Loader, AFiniteEpochVisitsEachIndexOnceThenEnds) {
  auto src = std::make_shared<FakeSource>(30);
  LoaderOptions o;
  o.batch = 4;
  o.workers = 2;
  o.infinite = false;
  o.drop_last = false;
  std::vector<size_t> subset;
  for (size_t i = 0; i < 30; i += 3) subset.push_back(i);  // 10 indices → 4 + 4 + 2.
  Loader loader(src, o, subset);
  auto batches = take(loader, 100);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2].indices.size(), 2u);
  std::multiset<size_t> seen;
  for (auto& b : batches) seen.insert(b.indices.begin(), b.indices.end());
  EXPECT_EQ(seen, std::multiset<size_t>(subset.begin(), subset.end()));
  EXPECT_FALSE(loader.next().has_value());
  o.drop_last = true;
  Loader dropping(src, o, subset);
  EXPECT_EQ(take(dropping, 100).size(), 2u);
}

TEST(Loader, CustomBatchSamplerIsFollowed) {
  auto src = std::make_shared<FakeSource>(12);
  LoaderOptions o;
  o.workers = 2;
  BatchSampler by_group = [](uint64_t epoch) {
    std::vector<std::vector<size_t>> b = {{0, 3, 6}, {1, 4}, {2, 5, 8, 11}};
    if (epoch % 2 == 1) std::reverse(b.begin(), b.end());
    return b;
  };
  Loader loader(src, o, {}, by_group);
  auto batches = take(loader, 4);
  EXPECT_EQ(batches[0].indices, (std::vector<size_t>{0, 3, 6}));
  EXPECT_EQ(batches[2].group, 2);
  EXPECT_EQ(batches[2].input.size(0), 4);
  EXPECT_EQ(batches[3].indices, (std::vector<size_t>{2, 5, 8, 11}));
  EXPECT_EQ(batches[3].epoch, 1u);
}

// Budget (label `timing`, calibrated in the test): the destructor within 20 times what loading
// two batches took here, with three workers that take 5 ms per record; the failure this guards
// against is a destructor that never returns (workers blocked on a full queue). That the rest of
// the epoch is not loaded is counted below.
TEST(Loader, DestroyingMidEpochDoesNotHang) {
  auto src = std::make_shared<FakeSource>(1000, /*delay_ms=*/5);
  LoaderOptions o;
  o.batch = 4;
  o.workers = 3;
  o.prefetch = 2;
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<Loader> loader;
  loader.emplace(src, o);
  ASSERT_EQ(take(*loader, 2).size(), 2u);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto t1 = std::chrono::steady_clock::now();
  loader.reset();
  const double destroy_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  // The bound is the calibration of this run: stopping takes at most the workers' records in
  // flight (one 5 ms record each), far less than loading two batches did; 20 times that loading
  // time (plus 0.5 s for a scheduler that runs nothing for a while) is a hang, not a slow stop.
  EXPECT_LT(destroy_s, 20.0 * load_s + 0.5) << "loading two batches took " << load_s << " s";
  // Prefetch is bounded: far fewer than the whole epoch was loaded.
  EXPECT_LE(src->calls.load(), 4 * (2 + 2 + 3 + 1));
}

TEST(Loader, AWorkerErrorIsRethrownWithContextAndShutdownIsClean) {
  for (int workers : {0, 2}) {
    auto src = std::make_shared<FakeSource>(16, 1, /*fail_at=*/5);
    LoaderOptions o;
    o.batch = 2;
    o.workers = workers;
    o.shuffle = false;
    Loader loader(src, o);
    EXPECT_TRUE(loader.next().has_value());
    EXPECT_TRUE(loader.next().has_value());
    try {
      loader.next();
      FAIL() << "expected an error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("batch 2"), std::string::npos) << what;
      EXPECT_NE(what.find("record '5' is broken"), std::string::npos) << what;
      EXPECT_NE(what.find("4, 5"), std::string::npos) << what;
    }
  }
}

TEST(Loader, RejectsBadOptionsAndEmptyEpochs) {
  auto src = std::make_shared<FakeSource>(3);
  LoaderOptions o;
  o.batch = 0;
  EXPECT_THROW(Loader(src, o), Error);
  o.batch = 8;  // 3 examples, drop_last: nothing to yield forever.
  o.workers = 0;
  Loader loader(src, o);
  EXPECT_THROW(loader.next(), Error);
  EXPECT_THROW(Loader(src, LoaderOptions{}, {7}), Error);
}

TEST(Loader, AnEmptyEpochCountsTheSplitNotTheWholeDatabase) {
  auto src = std::make_shared<FakeSource>(100);
  LoaderOptions o;
  o.batch = 8;
  o.workers = 0;
  o.drop_last = true;
  o.infinite = true;
  Loader loader(src, o, {1, 2, 3});  // a 3-example training split of a 100-example database
  std::string msg;
  try {
    loader.next();
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("has no batches (3 examples in this split (of 100 in the database), batch 8"),
            std::string::npos)
      << msg;
}

TEST(Loader, LoadsAudioBatchesFromARealDatabase) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 10, 2, 4096);
  AudioDatasetOptions d;
  d.n_signal = 2048;
  auto ds = std::make_shared<AudioDataset>(dir / "db", d);
  LoaderOptions o;
  o.batch = 4;
  o.workers = 2;
  o.pin_memory = true;  // No CUDA here: must be a no-op, not an error.
  Loader loader(ds, o);
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->input.sizes(), (std::vector<int64_t>{4, 2, 2048}));
  EXPECT_FALSE(b->target.defined());
  EXPECT_LE(b->input.abs().max().item<float>(), 1.01f);
}

}  // namespace
}  // namespace rt
