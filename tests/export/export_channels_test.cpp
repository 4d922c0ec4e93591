// export --channels (RAVE's scripts/export.py --channels): decode's and forward's output
// channels. More than the model's: the latent decoded once per copy (each copy its own random
// draws), the copies' channels stacked; fewer: the first channels. nn~'s method attributes say
// the new count; offline and streaming alike.
#include "export/export_fixtures.h"

namespace rt::exporting::testing {
namespace {

torch::jit::Module exported(rave::RaveModelImpl& model, int64_t channels, bool streaming,
                            const std::filesystem::path& file) {
  ScriptOptions s;
  s.streaming = streaming;
  s.channels = channels;
  return save_and_load(script_rave(model, s), file);
}

TEST(ExportChannels, AMonoModelDecodesOneCopyPerChannelAndSaysSoToNnTilde) {
  rt::testing::ScratchDir dir("export_channels");
  auto model = tiny_model(tiny_options({"v2 mono", rave::RaveVersion::kV2, 1, 0, false}));
  const int64_t ratio = model->options().compression(), frames = 8;
  torch::manual_seed(2);
  const auto x = torch::randn({2, 1, frames * ratio}) * 0.3;
  for (bool streaming : {false, true}) {
    auto mono = exported(*model, 0, streaming, dir / "mono.ts");
    auto three = exported(*model, 3, streaming, dir / "three.ts");
    EXPECT_EQ(three.attr("target_channels").toInt(), 3);
    EXPECT_FALSE(mono.hasattr("target_channels")) << "the default file is unchanged";
    EXPECT_TRUE(torch::equal(three.attr("forward_params").toTensor(), torch::tensor({1, 1, 3, 1})));
    EXPECT_TRUE(torch::equal(three.attr("decode_params").toTensor().narrow(0, 2, 1), torch::tensor({3})));
    EXPECT_EQ(three.attr("decode_output_labels").toList().size(), 3u);
    set_noise_scale(mono, 0.0);
    set_noise_scale(three, 0.0);
    torch::NoGradGuard no_grad;
    const auto want = call(mono, "forward", x), got = call(three, "forward", x);
    ASSERT_EQ(got.sizes(), (std::vector<int64_t>{2, 3, frames * ratio})) << streaming;
    for (int64_t c = 0; c < 3; ++c) {
      EXPECT_LT(max_diff(got.narrow(1, c, 1), want), 1e-6)
          << "channel " << c << (streaming ? " streaming" : "");
    }
    // Each copy draws its own posterior fill and noise: the channels differ at noise_scale 1.
    set_noise_scale(three, 1.0);
    const auto z = torch::randn({2, 3, frames});  // fewer dimensions than the latent: the rest drawn
    const auto y = call(three, "decode", z);
    EXPECT_GT(max_diff(y.narrow(1, 0, 1), y.narrow(1, 1, 1)), 1e-4) << streaming;
  }
}

TEST(ExportChannels, AStereoModelToOneChannelKeepsTheFirstAndFiveTakeThreeCopies) {
  rt::testing::ScratchDir dir("export_channels_stereo");
  auto model = tiny_model(tiny_options({"v2 stereo", rave::RaveVersion::kV2, 2, 0, false}));
  const int64_t ratio = model->options().compression(), frames = 6;
  torch::manual_seed(3);
  const auto x = torch::randn({1, 2, frames * ratio}) * 0.3;
  auto stereo = exported(*model, 0, false, dir / "stereo.ts");
  auto one = exported(*model, 1, false, dir / "one.ts");
  auto five = exported(*model, 5, false, dir / "five.ts");
  for (auto* m : {&stereo, &one, &five}) set_noise_scale(*m, 0.0);
  torch::NoGradGuard no_grad;
  const auto want = call(stereo, "forward", x);
  EXPECT_LT(max_diff(call(one, "forward", x), want.narrow(1, 0, 1)), 1e-6);
  const auto got = call(five, "forward", x);
  ASSERT_EQ(got.size(1), 5);  // copies L R L R L
  for (int64_t c = 0; c < 5; ++c)
    EXPECT_LT(max_diff(got.narrow(1, c, 1), want.narrow(1, c % 2, 1)), 1e-6) << c;
  EXPECT_THROW(exported(*model, 257, false, dir / "many.ts"), Error);
}

// Streaming, each stream takes one batch slot of the state per copy: 64 copies leave one stream,
// 65 none, which is refused naming --channels before anything is written.
TEST(ExportChannels, AStreamingFileHoldsSixtyFourStreamsDividedByTheCopies) {
  rt::testing::ScratchDir dir("export_channels_streams");
  auto model = tiny_model(tiny_options({"v2 mono", rave::RaveVersion::kV2, 1, 0, false}));
  const int64_t ratio = model->options().compression();
  auto file = exported(*model, 64, true, dir / "64.ts");
  torch::NoGradGuard no_grad;
  EXPECT_EQ(call(file, "forward", torch::zeros({1, 1, 2 * ratio})).size(1), 64);
  EXPECT_THROW(call(file, "forward", torch::zeros({2, 1, 2 * ratio})), std::exception) << "two streams";
  try {
    exported(*model, 65, true, dir / "65.ts");
    FAIL() << "65 copies were exported streaming";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--channels 65 with --streaming"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rt::exporting::testing
