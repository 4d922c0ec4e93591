// RAVE's prior (models/rave/prior.h) on its own: the network is causal, the diagonal shift and
// the quantisation invert as RAVE's do, and the options refuse what RAVE's Prior cannot build.
// Its agreement with RAVE's own prior is tests/models/rave_oracle_test.cpp's (golden
// rave_prior_step).
#include "models/rave/prior.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/expect.h"
#include "util/error.h"

namespace rt::rave {
namespace {

PriorOptions tiny() {
  PriorOptions o;
  o.resolution = 8;
  o.res_size = 8;
  o.skp_size = 4;
  o.kernel_size = 3;
  o.cycle_size = 2;
  o.n_layers = 3;
  o.latent_size = 4;
  return o;
}

TEST(Prior, LogitsAtAFrameDependOnEarlierFramesOnly) {
  torch::manual_seed(3);
  VariationalPrior prior(tiny());
  prior->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  const auto x = quantized_normal_encode(torch::randn({2, 4, 20}, torch::kFloat64), 8);
  auto changed = x.clone();
  changed.slice(2, 12).copy_(quantized_normal_encode(torch::randn({2, 4, 8}, torch::kFloat64), 8));
  const auto a = prior->forward(x), b = prior->forward(changed);
  EXPECT_TRUE(torch::equal(a.slice(2, 0, 12), b.slice(2, 0, 12)));
  EXPECT_FALSE(torch::equal(a.slice(2, 12), b.slice(2, 12)));
  // RAVE's count: (3 − 1) · (1 + 2 + 1) + 1 = 9 frames through the residual blocks; the
  // pre_net's kernel adds 2 more: frame 11 sees frames 1 … 11.
  EXPECT_EQ(prior->receptive_field(), 9);
  auto early = x.clone();
  early.slice(2, 0, 1).copy_(quantized_normal_encode(torch::randn({2, 4, 1}, torch::kFloat64) + 3.0, 8));
  EXPECT_TRUE(torch::equal(prior->forward(early).select(2, 11), a.select(2, 11)));
  early.slice(2, 1, 2).copy_(quantized_normal_encode(torch::randn({2, 4, 1}, torch::kFloat64) + 3.0, 8));
  EXPECT_FALSE(torch::equal(prior->forward(early).select(2, 11), a.select(2, 11)));
}

TEST(Prior, DiagonalShiftStaggersTheDimensionsAndItsInverseRealignsThem) {
  const auto z = torch::arange(3 * 6, torch::kFloat64).reshape({1, 3, 6});
  const auto s = diagonal_shift(z);
  ASSERT_EQ(s.sizes(), (std::vector<int64_t>{1, 3, 4}));
  // Dimension 0 advanced by 2 frames, dimension 1 by 1, dimension 2 not at all (RAVE's core.py).
  EXPECT_TRUE(torch::equal(s[0][0], z[0][0].slice(0, 2, 6)));
  EXPECT_TRUE(torch::equal(s[0][1], z[0][1].slice(0, 1, 5)));
  EXPECT_TRUE(torch::equal(s[0][2], z[0][2].slice(0, 0, 4)));
  // The inverse of a shifted sequence puts every dimension of a frame back together.
  const auto back = diagonal_shift_inverse(s);
  ASSERT_EQ(back.sizes(), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_TRUE(torch::equal(back, z.slice(2, 2, 4)));
  EXPECT_HAS(testing::error_of([&] { diagonal_shift(z.slice(2, 0, 2)); }), "at least 3 frames, got 2");
}

TEST(Prior, QuantisationKeepsEachValueInItsBin) {
  torch::manual_seed(5);
  const auto z = torch::randn({2, 4, 50}, torch::kFloat64);
  const auto one_hot = quantized_normal_encode(z, 16);
  ASSERT_EQ(one_hot.sizes(), (std::vector<int64_t>{2, 64, 50}));
  EXPECT_TRUE(torch::equal(one_hot.sum(1), torch::full({2, 50}, 4.0, torch::kFloat64)));
  // Channel d·R + r: dimension d's bin r.
  const auto bins = split_classes(one_hot, 4).argmax(-1);
  EXPECT_TRUE(torch::equal(stack_one_hot(bins, 16).to(torch::kFloat64), one_hot));
  // Decoding with a dither in [0, 1) of a bin lands in the same bin.
  const auto dither = torch::rand({2, 4, 50}, torch::kFloat64) * 0.999;
  const auto decoded = quantized_normal_decode(one_hot, 16, dither);
  EXPECT_TRUE(torch::equal(quantized_normal_encode(decoded, 16), one_hot));
  // Values beyond the clamp's reach land in the outer bins.
  const auto edges =
      quantized_normal_encode(torch::tensor({-9.0, 9.0}, torch::kFloat64).reshape({1, 1, 2}), 16);
  EXPECT_EQ(split_classes(edges, 1).argmax(-1)[0][0][0].item<int64_t>(), 0);
  EXPECT_EQ(split_classes(edges, 1).argmax(-1)[0][0][1].item<int64_t>(), 15);
}

TEST(Prior, OptionsRefuseWhatRavesPriorCannotBuild) {
  EXPECT_EQ(prior_latent_size(1), 1);
  EXPECT_EQ(prior_latent_size(5), 8);
  EXPECT_EQ(prior_latent_size(8), 8);
  auto o = tiny();
  o.latent_size = 6;
  EXPECT_HAS(testing::error_of([&] { o.validate(); }), "model.prior_latent_size = 6: must be a power of two");
  o = tiny();
  o.resolution = 1;
  EXPECT_HAS(testing::error_of([&] { o.validate(); }), "model.prior_resolution = 1: must be at least 2");
  o = tiny();
  o.res_size = 6;  // the grouped pre_net gives each of the 4 dimensions its share of channels
  EXPECT_HAS(testing::error_of([&] { o.validate(); }),
             "model.prior_res_size = 6: must be a multiple of model.prior_latent_size = 4");
  o = tiny();
  o.n_layers = 0;
  EXPECT_HAS(testing::error_of([&] { VariationalPrior p(o); }), "model.prior_n_layers = 0");
}

}  // namespace
}  // namespace rt::rave
