// RAVE's latent PCA (models/rave/latent_pca.h): the fit, the fidelity curve and the crop rule.
#include "models/rave/latent_pca.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/rave/rave.h"
#include "util/error.h"

namespace {

using rt::rave::LatentPcaAccumulator;

// Frames (N, 4) with variances 9, 4, 1, 0.25 along the columns of a random rotation, plus a mean.
struct Synthetic {
  torch::Tensor means;  // (B, 4, T) as the encoder's posterior means
  torch::Tensor rotation, mean;
  std::vector<double> variances{9.0, 4.0, 1.0, 0.25};
};

Synthetic synthetic(int64_t batch, int64_t frames) {
  torch::manual_seed(3);
  Synthetic s;
  s.rotation = std::get<0>(torch::linalg_qr(torch::randn({4, 4}, torch::kFloat64)));
  s.mean = torch::tensor({1.0, -2.0, 0.5, 3.0}, torch::kFloat64);
  auto scale = torch::tensor(s.variances, torch::kFloat64).sqrt();
  auto white = torch::randn({batch * frames, 4}, torch::kFloat64);
  white = (white - white.mean(0)) / white.std(0);  // exact unit variance per axis
  auto q = std::get<0>(torch::linalg_qr(white));   // decorrelated columns
  q = q * std::sqrt(static_cast<double>(batch * frames - 1));
  auto z = (q * scale).mm(s.rotation.t()) + s.mean;
  s.means = z.reshape({batch, frames, 4}).permute({0, 2, 1}).to(torch::kFloat32).contiguous();
  return s;
}

TEST(LatentPca, FitFindsTheAxesTheMeanAndTheExplainedVariance) {
  auto s = synthetic(4, 500);
  LatentPcaAccumulator acc(4);
  acc.add(s.means);
  auto pca = acc.fit();
  EXPECT_TRUE(torch::allclose(pca.mean.to(torch::kFloat64), s.mean, 1e-4, 1e-4)) << pca.mean;
  // Each component is one of the rotation's columns, largest variance first, up to sign.
  for (int64_t i = 0; i < 4; ++i) {
    const double dot = pca.components[i].to(torch::kFloat64).dot(s.rotation.select(1, i)).item<double>();
    EXPECT_NEAR(std::abs(dot), 1.0, 1e-4) << "component " << i;
    auto row = pca.components[i];
    EXPECT_GT(row[row.abs().argmax()].item<float>(), 0.f) << "sign convention, component " << i;
  }
  double total = 0, cumulative = 0;
  for (double v : s.variances) total += v;
  for (int64_t i = 0; i < 4; ++i) {
    cumulative += s.variances[static_cast<size_t>(i)];
    EXPECT_NEAR(pca.fidelity[i].item<double>(), cumulative / total, 1e-4) << i;
  }
}

TEST(LatentPca, BatchesAccumulateLikeOneBatch) {
  auto s = synthetic(6, 50);
  LatentPcaAccumulator whole(4), parts(4);
  whole.add(s.means);
  parts.add(s.means.narrow(0, 0, 2));
  parts.add(s.means.narrow(0, 2, 4));
  EXPECT_EQ(parts.count(), 300);
  auto a = whole.fit(), b = parts.fit();
  EXPECT_TRUE(torch::allclose(a.components, b.components, 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(a.fidelity, b.fidelity, 1e-6, 1e-6));
}

TEST(LatentPca, FewerThanTwoFramesCannotBeFitted) {
  LatentPcaAccumulator acc(4);
  acc.add(torch::zeros({1, 4, 1}));
  EXPECT_THROW(acc.fit(), rt::Error);
}

TEST(LatentPca, AllZeroFidelityMeansNoPca) {
  EXPECT_FALSE(rt::rave::has_latent_pca(torch::zeros({8})));
  EXPECT_TRUE(rt::rave::has_latent_pca(torch::tensor({0.5f, 1.f})));
}

TEST(LatentPca, LatentSizeIsTheSmallestPowerOfTwoReachingTheFidelity) {
  auto f = torch::tensor({0.50f, 0.70f, 0.80f, 0.90f, 0.96f, 0.98f, 0.99f, 1.0f});
  EXPECT_EQ(rt::rave::latent_size_for_fidelity(f, 0.95), 8);  // 5 dimensions needed
  EXPECT_EQ(rt::rave::latent_size_for_fidelity(f, 0.90), 4);  // exactly reached at 4
  EXPECT_EQ(rt::rave::latent_size_for_fidelity(f, 0.60), 2);
  EXPECT_EQ(rt::rave::latent_size_for_fidelity(f, 0.40), 1);
  // Never more than the model has.
  auto six = torch::tensor({0.5f, 0.6f, 0.7f, 0.8f, 0.96f, 1.0f});
  EXPECT_EQ(rt::rave::latent_size_for_fidelity(six, 0.95), 6);
}

TEST(LatentPca, StoredInTheModelBuffersThatCheckpointsCarry) {
  auto o = rt::rave::RaveOptions::preset(rt::rave::RaveVersion::kV2);
  o.capacity = 4;
  o.latent_size = 4;
  o.ratios = {2};
  o.dilations = {{1}};
  o.discriminator = rt::rave::DiscriminatorKind::kNone;
  rt::rave::RaveModel model(o);
  LatentPcaAccumulator acc(4);
  acc.add(synthetic(2, 20).means);
  rt::rave::store_latent_pca(*model, acc.fit());
  auto buffers = model->named_buffers();
  auto stored = rt::rave::stored_latent_pca(*model);
  EXPECT_TRUE(rt::rave::has_latent_pca(*buffers.find("fidelity")));
  EXPECT_TRUE(torch::equal(stored.components, *buffers.find("latent_pca")));
  EXPECT_FALSE(torch::equal(stored.components, torch::eye(4)));
}

}  // namespace
