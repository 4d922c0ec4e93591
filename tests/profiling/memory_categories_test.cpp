// Memory by category: blocks tagged by storage keep their category until freed, a peak keeps
// the composition it had, and MemoryCategories attributes a model's parameters, gradients and
// Adam state by matching their storages to the counting allocator's blocks.
#include "profiling/memory_categories.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace rt::prof {
namespace {

TEST(MemoryCategoryTags, TaggedBytesFollowTheBlockUntilItIsFreed) {
  auto reporter = std::make_shared<MemoryReporter>();
  MemoryTrackingScope scope(reporter);
  auto p = torch::zeros({1000});
  ASSERT_TRUE(reporter->tag_storage(p.storage(), MemoryCategory::kParameters));
  EXPECT_EQ(reporter->cpu_bytes_by_category()[MemoryCategory::kParameters], 4000);
  // Tagging again, or under another category, moves the bytes instead of counting them twice.
  reporter->tag_storage(p.storage(), MemoryCategory::kParameters);
  reporter->tag_storage(p.storage(), MemoryCategory::kGradients);
  EXPECT_EQ(reporter->cpu_bytes_by_category()[MemoryCategory::kParameters], 0);
  EXPECT_EQ(reporter->cpu_bytes_by_category()[MemoryCategory::kGradients], 4000);
  p.reset();
  EXPECT_EQ(reporter->cpu_bytes_by_category()[MemoryCategory::kGradients], 0);
}

TEST(MemoryCategoryTags, BlocksAnotherReporterOrNoTrackerMadeAreNotTagged) {
  auto before = torch::zeros({256});  // made before any scope: not a counted block
  auto reporter = std::make_shared<MemoryReporter>(), other = std::make_shared<MemoryReporter>();
  torch::Tensor theirs;
  {
    MemoryTrackingScope scope(other);
    theirs = torch::zeros({256});
  }
  MemoryTrackingScope scope(reporter);
  EXPECT_FALSE(reporter->tag_storage(before.storage(), MemoryCategory::kParameters));
  EXPECT_FALSE(reporter->tag_storage(theirs.storage(), MemoryCategory::kParameters));
  EXPECT_EQ(reporter->cpu_bytes_by_category()[MemoryCategory::kParameters], 0);
}

TEST(MemoryCategoryTags, IntervalPeakKeepsItsCompositionAndStartsAgain) {
  auto reporter = std::make_shared<MemoryReporter>();
  MemoryTrackingScope scope(reporter);
  auto params = torch::zeros({1 << 16});  // 256 KiB
  reporter->tag_storage(params.storage(), MemoryCategory::kParameters);
  reporter->take_interval_peak();
  const int64_t base = reporter->cpu_bytes_in_use();
  {
    auto activation = torch::zeros({1 << 18});  // 1 MiB, freed before the peak is read
  }
  const PeakComposition peak = reporter->take_interval_peak();
  EXPECT_GE(peak.bytes_in_use, base + (1 << 20));
  EXPECT_EQ(peak.categories[MemoryCategory::kParameters], 1 << 18);
  EXPECT_EQ(peak.categories[MemoryCategory::kOther], peak.bytes_in_use - (1 << 18));
  // The next interval starts from what is in use now, not from the old peak.
  EXPECT_LT(reporter->take_interval_peak().bytes_in_use, base + (1 << 20));
}

// A two-layer model trained by Adam, with its own reporter counting from before it was built.
struct TinyTraining {
  std::shared_ptr<MemoryReporter> reporter = std::make_shared<MemoryReporter>();
  MemoryTrackingScope scope{reporter};
  torch::nn::Sequential model{torch::nn::Linear(64, 128), torch::nn::ReLU(), torch::nn::Linear(128, 8)};
  torch::optim::Adam opt{model->parameters(), torch::optim::AdamOptions(1e-3)};

  MemoryCategorySource source() {
    MemoryCategorySource s;
    s.parameters = [this] { return model->parameters(); };
    s.buffers = [this] { return model->buffers(); };
    s.optimizer_state = [this] {
      std::vector<at::Tensor> out;
      for (const auto& [key, state] : opt.state()) {
        const auto& a = static_cast<const torch::optim::AdamParamState&>(*state);
        out.push_back(a.exp_avg());
        out.push_back(a.exp_avg_sq());
      }
      return out;
    };
    return s;
  }
  void step() {
    opt.zero_grad();
    model->forward(torch::randn({32, 64})).pow(2).mean().backward();
    opt.step();
  }
  int64_t parameter_bytes() {
    int64_t total = 0;
    for (const auto& p : model->parameters()) total += p.numel() * static_cast<int64_t>(p.element_size());
    return total;
  }
};

TEST(MemoryCategories, SplitsParametersGradientsAndAdamStateByStorage) {
  TinyTraining t;
  MemoryCategories categories(t.source(), t.reporter);
  const CategorySplit before = categories.measure(t.reporter->cpu_bytes_in_use());
  EXPECT_EQ(before.bytes[MemoryCategory::kParameters], t.parameter_bytes());
  EXPECT_EQ(before.bytes[MemoryCategory::kOptimizerState], 0);  // created by the first step
  EXPECT_EQ(before.bytes[MemoryCategory::kGradients], 0);

  t.step();
  const int64_t in_use = t.reporter->cpu_bytes_in_use();
  const CategorySplit after = categories.measure(in_use);
  EXPECT_EQ(after.bytes[MemoryCategory::kParameters], t.parameter_bytes());
  EXPECT_EQ(after.bytes[MemoryCategory::kGradients], t.parameter_bytes());
  EXPECT_EQ(after.bytes[MemoryCategory::kOptimizerState], 2 * t.parameter_bytes());  // exp_avg, exp_avg_sq
  EXPECT_EQ(after.untracked_bytes, 0);
  EXPECT_EQ(after.bytes[MemoryCategory::kOther], in_use - 4 * t.parameter_bytes());
  // The reporter's tags agree with the walk.
  const CategoryBytes tagged = t.reporter->cpu_bytes_by_category();
  EXPECT_EQ(tagged[MemoryCategory::kParameters], t.parameter_bytes());
  EXPECT_EQ(tagged[MemoryCategory::kOptimizerState], 2 * t.parameter_bytes());
}

TEST(MemoryCategories, GradientsAreTaggedWhenBackwardHandsThemOver) {
  TinyTraining t;
  MemoryCategories categories(t.source(), t.reporter);
  categories.measure(t.reporter->cpu_bytes_in_use());
  // No measure() after this backward: the parameters' hooks tagged the new gradients, so a
  // peak during backward counts them as gradients, not temporaries.
  t.model->forward(torch::randn({32, 64})).pow(2).mean().backward();
  EXPECT_EQ(t.reporter->cpu_bytes_by_category()[MemoryCategory::kGradients], t.parameter_bytes());
}

TEST(MemoryCategories, AStorageNamedTwiceCountsOnceInItsFirstCategory) {
  auto reporter = std::make_shared<MemoryReporter>();
  MemoryTrackingScope scope(reporter);
  auto whole = torch::zeros({100});
  auto view = whole.narrow(0, 10, 20);  // shares the storage
  MemoryCategorySource s;
  s.parameters = [&] { return std::vector<at::Tensor>{whole, view}; };
  s.optimizer_state = [&] { return std::vector<at::Tensor>{view}; };
  MemoryCategories categories(s, reporter);
  const CategorySplit split = categories.measure(reporter->cpu_bytes_in_use());
  EXPECT_EQ(split.bytes[MemoryCategory::kParameters], 400);
  EXPECT_EQ(split.bytes[MemoryCategory::kOptimizerState], 0);
}

TEST(MemoryCategories, StoragesMadeBeforeTrackingAreUntrackedAndNotSubtracted) {
  auto early = torch::zeros({100});
  auto reporter = std::make_shared<MemoryReporter>();
  MemoryTrackingScope scope(reporter);
  MemoryCategorySource s;
  s.parameters = [&] { return std::vector<at::Tensor>{early}; };
  MemoryCategories categories(s, reporter);
  const int64_t in_use = reporter->cpu_bytes_in_use();
  const CategorySplit split = categories.measure(in_use);
  EXPECT_EQ(split.bytes[MemoryCategory::kParameters], 400);
  EXPECT_EQ(split.untracked_bytes, 400);
  EXPECT_EQ(split.bytes[MemoryCategory::kOther], in_use);
}

}  // namespace
}  // namespace rt::prof
