// The exported module (offline) computes what the C++ model computes: encode, decode and
// forward for v1, v2, v3, mono and stereo, with the same random draws (same seed) or with
// noise_scale = 0 against the posterior mean.
#include "export/export_fixtures.h"

namespace rt::exporting::testing {
namespace {

constexpr double kOfflineTolerance = 1e-5;

class OfflineEquivalence : public ::testing::TestWithParam<Variant> {};

TEST_P(OfflineEquivalence, EncodeDecodeForwardEqualTheModel) {
  const Variant v = GetParam();
  auto o = tiny_options(v);
  auto model = tiny_model(o, v.warm);
  ScriptInfo info;
  rt::testing::ScratchDir dir("export_offline");
  auto ts = save_and_load(script_rave(*model, ScriptOptions{}, &info), dir / "m.ts");
  EXPECT_EQ(info.ratio, o.compression());
  EXPECT_EQ(info.encode_latency, 0);
  const int64_t frames = 12, t = frames * o.compression();
  torch::manual_seed(11);
  auto x = torch::randn({2, o.channels, t}) * 0.3;
  auto z = torch::randn({2, o.latent_size, frames});

  // Sampled posterior: the same draw after the same seed.
  torch::manual_seed(5);
  auto encoded = call(ts, "encode", x);
  EXPECT_LT(max_diff(encoded, reference_latent(*model, x, true, 5)), kOfflineTolerance) << v.name;
  torch::manual_seed(6);
  auto decoded = call(ts, "decode", z);
  EXPECT_LT(max_diff(decoded, reference_decode(*model, z, 6)), kOfflineTolerance) << v.name;
  torch::manual_seed(7);
  auto forward = call(ts, "forward", x);
  torch::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    torch::manual_seed(7);
    expected = model->forward(x);
  }
  EXPECT_LT(max_diff(forward, expected), kOfflineTolerance) << v.name;
  EXPECT_GT(expected.abs().max().item<double>(), 1e-3) << "a silent model proves nothing";

  // noise_scale 0: the posterior mean, no noise anywhere.
  set_noise_scale(ts, 0.0);
  EXPECT_LT(max_diff(call(ts, "encode", x), reference_latent(*model, x, false)), kOfflineTolerance) << v.name;
}

INSTANTIATE_TEST_SUITE_P(AllVersions, OfflineEquivalence,
                         ::testing::Values(Variant{"v1 mono", rave::RaveVersion::kV1, 1, 0, false},
                                           Variant{"v1 stereo", rave::RaveVersion::kV1, 2, 0, false},
                                           Variant{"v1 phase 2 (noise)", rave::RaveVersion::kV1, 1, 0, true},
                                           Variant{"v2 mono", rave::RaveVersion::kV2, 1, 0, false},
                                           Variant{"v2 stereo", rave::RaveVersion::kV2, 2, 0, false},
                                           Variant{"v2 noise", rave::RaveVersion::kV2, 1, 4, false},
                                           Variant{"v3 mono", rave::RaveVersion::kV3, 1, 0, false},
                                           Variant{"v3 stereo", rave::RaveVersion::kV3, 2, 0, false}),
                         variant_name);

TEST(ExportedLatent, CroppedDimensionsAreFilledWithScaledNoise) {
  auto o = tiny_options({"v2", rave::RaveVersion::kV2, 1, 0, false});
  auto model = tiny_model(o);
  ScriptOptions s;
  s.latent_size = 2;
  rt::testing::ScratchDir dir("export_crop");
  auto ts = save_and_load(script_rave(*model, s, nullptr), dir / "m.ts");
  EXPECT_EQ(ts.attr("latent_size").toInt(), 2);
  EXPECT_EQ(ts.attr("full_latent_size").toInt(), o.latent_size);
  auto x = torch::randn({1, 1, 8 * o.compression()}) * 0.3;
  set_noise_scale(ts, 0.0);
  auto z = call(ts, "encode", x);
  ASSERT_EQ(z.size(1), 2);
  EXPECT_LT(max_diff(z, reference_latent(*model, x, false).narrow(1, 0, 2)), kOfflineTolerance);
  // Deterministic decode: the cropped dimensions are the mean (zero in PCA coordinates).
  auto padded = torch::cat({z, torch::zeros({1, o.latent_size - 2, z.size(2)})}, 1);
  EXPECT_LT(max_diff(call(ts, "decode", z), reference_decode(*model, padded)), kOfflineTolerance);
  // RAVE fills them with unit Gaussian noise: two calls then differ.
  set_noise_scale(ts, 1.0);
  EXPECT_GT(max_diff(call(ts, "decode", z), call(ts, "decode", z)), 1e-4);
}

TEST(ExportedModule, EveryModelTensorIsUsedOrDroppedWithAReason) {
  auto o = tiny_options({"v3", rave::RaveVersion::kV3, 1, 0, false});
  o.discriminator = rave::DiscriminatorKind::kDescript;
  o.mrd_n_ffts = {256, 128};
  o.periods = {2};
  auto model = tiny_model(o);
  ScriptInfo info;
  script_rave(*model, ScriptOptions{}, &info);
  ASSERT_EQ(info.dropped.size(), 2u);
  size_t dropped = 0;
  for (const auto& [why, keys] : info.dropped) dropped += keys.size();
  size_t discriminator = 0;
  for (const auto& p : model->discriminator->named_parameters()) discriminator += p.value().defined();
  EXPECT_GE(dropped, discriminator + 1);  // + receptive_field
}

}  // namespace
}  // namespace rt::exporting::testing
