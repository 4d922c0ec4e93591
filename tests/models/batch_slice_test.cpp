// models/common/batch_slice.h: a rank's noise is its rows of the global batch's noise, drawn
// from a generator that advances as one process's would.
#include "models/common/batch_slice.h"

#include <gtest/gtest.h>

#include "support/expect.h"

namespace rt::models {
namespace {

TEST(BatchSlice, RankNoiseIsItsRowsOfTheGlobalBatchNoise) {
  const auto like = torch::zeros({3, 2, 5});
  torch::manual_seed(7);
  const auto uniform = torch::rand({8, 2, 5});
  const auto normal = torch::randn({8, 2, 5});
  const auto after = torch::rand({1});
  torch::manual_seed(7);
  torch::Tensor u, n;
  {
    BatchSliceScope scope(BatchSlice{5, 3, 8, nullptr});
    u = batch_rand_like(like);
    n = batch_randn_like(like);
  }
  EXPECT_TRUE(torch::equal(u, uniform.narrow(0, 5, 3)));
  EXPECT_TRUE(torch::equal(n, normal.narrow(0, 5, 3)));
  // The generator advanced by the global draws, as every other rank's.
  EXPECT_TRUE(torch::equal(torch::rand({1}), after));
}

TEST(BatchSlice, OutsideASliceTheHelpersAreTorchsOwn) {
  const auto like = torch::zeros({4, 6});
  torch::manual_seed(3);
  const auto plain = torch::rand_like(like);
  torch::manual_seed(3);
  EXPECT_TRUE(torch::equal(batch_rand_like(like), plain));
  EXPECT_EQ(current_batch_slice().global, 0);
  EXPECT_EQ(batch_row_offset(40), 0);
  const auto t = torch::arange(12, torch::kFloat);
  EXPECT_TRUE(torch::equal(batch_global_mean(t), t.mean()));
}

TEST(BatchSlice, DropoutMasksFollowTheGlobalBatch) {
  const auto x = torch::ones({8, 16});
  torch::manual_seed(11);
  const auto whole = batch_dropout(x, 0.5, true);
  torch::manual_seed(11);
  torch::Tensor part;
  {
    BatchSliceScope scope(BatchSlice{4, 4, 8, nullptr});
    part = batch_dropout(x.narrow(0, 4, 4), 0.5, true);
  }
  EXPECT_TRUE(torch::equal(part, whole.narrow(0, 4, 4)));
  EXPECT_TRUE(((whole == 0) | (whole == 2)).all().item<bool>());
  EXPECT_TRUE(torch::equal(batch_dropout(x, 0.5, false), x));
}

TEST(BatchSlice, RowOffsetCountsRowsPerExampleAndScopesNest) {
  BatchSliceScope outer(BatchSlice{2, 2, 6, nullptr});
  EXPECT_EQ(batch_row_offset(2 * 140), 2 * 140);  // rows are examples × 140 time bins
  EXPECT_EQ(batch_row_offset(7), 0);              // not a multiple of the slice: no offset
  {
    BatchSliceScope inner(BatchSlice{0, 6, 6, nullptr});
    EXPECT_EQ(current_batch_slice().offset, 0);
  }
  EXPECT_EQ(current_batch_slice().offset, 2);
  EXPECT_NE(testing::error_of([] {
              BatchSliceScope bad(BatchSlice{5, 3, 6, nullptr});
            }).find("do not lie in"),
            std::string::npos);
}

}  // namespace
}  // namespace rt::models
