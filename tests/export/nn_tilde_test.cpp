// Loading an exported file the way nn~'s backend does (acids-ircam/nn_tilde
// src/backend/backend.cpp): torch::jit::load, get_methods / get_attributes, <method>_params,
// calls with (B, in_channels, n_vec / in_ratio) under c10::InferenceMode for B = 1 and 4 and
// n_vec = 2048 and 4096, output sample-and-held to n_vec, one set/get of an attribute.
#include "export/export_fixtures.h"

namespace rt::exporting::testing {
namespace {

std::vector<std::string> string_list(const c10::IValue& v) {
  std::vector<std::string> out;
  for (const auto& s : v.toList()) out.push_back(static_cast<c10::IValue>(s).toStringRef());
  return out;
}

// A v2-shaped model at the full-size ratio (16 bands × 4·4·4·2 = 2048), tiny capacity.
rave::RaveOptions v2_ratio_options(int64_t channels) {
  auto o = rave::RaveOptions::preset(rave::RaveVersion::kV2);
  o.channels = channels;
  o.capacity = 2;
  o.latent_size = 8;
  o.discriminator = rave::DiscriminatorKind::kNone;
  return o;
}

class NnTildeLoading : public ::testing::TestWithParam<bool> {};

TEST_P(NnTildeLoading, MethodsRatiosAndBlockCallsWorkAsNnTildeMakesThem) {
  const bool streaming = GetParam();
  for (int64_t channels : {1, 2}) {
    auto model = tiny_model(v2_ratio_options(channels));
    ScriptOptions s;
    s.streaming = streaming;
    s.latent_size = 4;
    s.sampling_rate = 48000;
    rt::testing::ScratchDir dir("export_nn");
    script_rave(*model, s, nullptr).save((dir / "m.ts").string());

    auto m = torch::jit::load((dir / "m.ts").string());  // as Backend::load: no options
    m.eval();
    const auto methods = string_list(m.get_method("get_methods")({}));
    EXPECT_EQ(methods, (std::vector<std::string>{"encode", "decode", "forward"}));
    EXPECT_EQ(string_list(m.get_method("get_attributes")({})), std::vector<std::string>{"noise_scale"});
    EXPECT_EQ(m.attr("sr").toInt(), 48000);
    EXPECT_EQ(m.attr("latent_size").toInt(), 4);
    EXPECT_EQ(m.attr("full_latent_size").toInt(), 8);
    EXPECT_EQ(m.attr("n_channels").toInt(), channels);

    const std::map<std::string, std::vector<int>> expected{
        {"encode", {static_cast<int>(channels), 1, 4, 2048}},
        {"decode", {4, 2048, static_cast<int>(channels), 1}},
        {"forward", {static_cast<int>(channels), 1, static_cast<int>(channels), 1}}};
    for (const auto& method : methods) {
      auto p = m.attr(method + "_params").toTensor();
      EXPECT_EQ(p.scalar_type(), torch::kLong);
      std::vector<int> params;
      for (int i = 0; i < 4; ++i) params.push_back(p[i].item().to<int>());
      EXPECT_EQ(params, expected.at(method)) << method;
      const int in_dim = params[0], in_ratio = params[1], out_dim = params[2], out_ratio = params[3];
      EXPECT_EQ(string_list(m.attr(method + "_input_labels")).size(), static_cast<size_t>(in_dim));
      EXPECT_EQ(string_list(m.attr(method + "_output_labels")).size(), static_cast<size_t>(out_dim));
      for (int64_t batch : {1, 4}) {
        for (int64_t n_vec : {2048, 4096}) {
          c10::InferenceMode guard;
          auto in = torch::randn({batch, in_dim, n_vec / in_ratio});
          auto out = m.get_method(method)({in}, {}).toTensor();
          auto held = out.repeat_interleave(out_ratio).reshape({batch, out_dim, -1});
          EXPECT_EQ(held.size(-1), n_vec) << method << " batch " << batch << " n_vec " << n_vec;
          EXPECT_TRUE(torch::isfinite(out).all().item<bool>()) << method;
        }
      }
    }
    // One set/get round trip; the type tensor says one float.
    EXPECT_EQ(m.attr("noise_scale_params").toTensor().numel(), 1);
    EXPECT_EQ(m.attr("noise_scale_params").toTensor()[0].item().toInt(), 2);
    EXPECT_DOUBLE_EQ(m.get_method("get_noise_scale")({}).toTuple()->elements()[0].toDouble(), 1.0);
    EXPECT_EQ(m.get_method("set_noise_scale")({0.25}).toInt(), 0);
    EXPECT_DOUBLE_EQ(m.get_method("get_noise_scale")({}).toTuple()->elements()[0].toDouble(), 0.25);
  }
}

INSTANTIATE_TEST_SUITE_P(OfflineAndStreaming, NnTildeLoading, ::testing::Values(false, true),
                         [](const auto& info) { return std::string(info.param ? "Streaming" : "Offline"); });

TEST(NnTildeLoading, EveryModuleIsInEvalMode) {
  auto model = tiny_model(tiny_options({"v2", rave::RaveVersion::kV2, 1, 0, false}));
  auto m = script_rave(*model, ScriptOptions{}, nullptr);
  EXPECT_FALSE(m.is_training());
  for (const auto& sub : m.named_modules()) EXPECT_FALSE(sub.value.is_training()) << sub.name;
}

}  // namespace
}  // namespace rt::exporting::testing
