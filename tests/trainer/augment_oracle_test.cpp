// RAVE's dataset transforms (data/augment.h) against RAVE's own code run by
// tests/oracle/rave_oracle.py (tests/assets/golden/rave_augment.*): --normalize,
// --derivative and its integrator, normalize_ambient.gin's compressor and --augment compress's
// compand through the same libsox; and the pipeline and the flags that choose them.
#include <gtest/gtest.h>

#include <random>

#include "config/cli.h"
#include "data/augment.h"
#include "support/expect.h"
#include "support/golden.h"
#include "support/test_support.h"

namespace rt {
namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

struct AugmentOracle : ::testing::Test {
  testing::Golden g = testing::load_golden("rave_augment");
  int sr = g.manifest.at("sampling_rate").get<int>();
  torch::Tensor x = g.at("x").clone();
};

TEST_F(AugmentOracle, NormalizeDerivativeAndIntegratorAreRaves) {
  torch::Tensor n = x.clone();
  normalize_peak(n);
  EXPECT_LE(max_abs_diff(n, g.at("normalize")), 1e-6);
  torch::Tensor d = x.clone();
  take_derivative(d);
  EXPECT_LE(max_abs_diff(d, g.at("derivative")), 1e-7);
  torch::Tensor i = x.clone();
  integrate_derivative(i, sr);
  EXPECT_LE(max_abs_diff(i, g.at("integrate")), 1e-6);
}

// SoX's compander through libsox, fed as torchaudio feeds it: sample for sample RAVE's output
// (the int32 round trip makes both exact to one step of 2^-31).
TEST_F(AugmentOracle, CompressorsAreSoxsAsRaveRunsThem) {
  const auto& c = g.manifest.at("compress");
  const auto args = c.at("sox_args").get<std::vector<std::string>>();
  const torch::Tensor y = sox_compand(x, sr, args);
  EXPECT_LE(max_abs_diff(y, g.at("compress")), 1e-7) << "compand " << args[0] << " " << args[1];
  EXPECT_GT(max_abs_diff(y, x), 1e-3) << "the compander changed nothing: the comparison proves nothing";

  auto ambient_args = g.manifest.at("normalize_ambient_sox_args").get<std::vector<std::string>>();
  ASSERT_EQ(ambient_args.front(), "compand");
  ambient_args.erase(ambient_args.begin());
  torch::Tensor a = x.clone();
  std::mt19937_64 rng(1);
  apply_augmentation(Augmentation::kNormalizeAmbient, a, sr, rng);
  EXPECT_LE(max_abs_diff(a, g.at("normalize_ambient")), 1e-7);
  EXPECT_EQ(ambient_args, (std::vector<std::string>{"0.01,0.01", "6:-30,-15,-10,-8,0,-5", "0"}))
      << "normalize_ambient.gin changed: update data/augment.cpp";
}

TEST_F(AugmentOracle, RandomAugmentationsDrawAsRavesDo) {
  // The documented divergence: RAVE 2.3.1's RandomGain returns its input (data/augment.h).
  EXPECT_TRUE(g.manifest.at("random_gain_returns_its_input").get<bool>());
  std::mt19937_64 rng(7);
  int muted = 0, gained = 0, compressed = 0;
  const int n = 400;
  const torch::Tensor small = x.narrow(1, 0, 4096).contiguous();
  for (int i = 0; i < n; ++i) {
    torch::Tensor m = x.clone();
    apply_augmentation(Augmentation::kMute, m, sr, rng);
    muted += m.abs().max().item<float>() == 0.0f;
    torch::Tensor k = x.clone();
    apply_augmentation(Augmentation::kGain, k, sr, rng);
    if (!torch::equal(k, x)) {
      ++gained;
      const double ratio = (k.abs().max() / x.abs().max()).item<double>();
      EXPECT_GE(ratio, std::pow(10.0, -6.0 / 20) - 1e-6);
      EXPECT_LE(k.abs().max().item<double>(), 1.0 + 1e-6);
    }
    if (i < 100) {
      torch::Tensor c = small.clone();
      apply_augmentation(Augmentation::kCompress, c, sr, rng);
      compressed += !torch::equal(c, small);
    }
  }
  // Binomial bounds at about 5 sigma: mute p = 0.1, gain p = 0.5, compress p = 0.8.
  EXPECT_NEAR(muted, 0.1 * n, 5 * std::sqrt(n * 0.09));
  EXPECT_NEAR(gained, 0.5 * n, 5 * std::sqrt(n * 0.25));
  EXPECT_NEAR(compressed, 80, 5 * std::sqrt(100 * 0.16));
}

// --rand_pitch: RAVE's factor table and (up, down) choice, and scipy's resample_poly output.
TEST(PitchOracle, RandomPitchIsRavesAndResamplesAsScipy) {
  const auto g = testing::load_golden("rave_pitch");
  const auto range = g.manifest.at("pitch_range").get<std::vector<double>>();
  const RandomPitch pitch(range.at(0), range.at(1), g.manifest.at("n_signal").get<int64_t>());
  const auto x = g.at("input:x");
  const auto draws = g.manifest.at("draws").get<std::vector<double>>();
  const auto ratios = g.manifest.at("ratios").get<std::vector<std::vector<int64_t>>>();
  const double hi =
      std::min(range.at(1), static_cast<double>(x.size(1)) / g.manifest.at("n_signal").get<double>());
  for (size_t i = 0; i < draws.size(); ++i) {
    SCOPED_TRACE("draw " + std::to_string(draws[i]));
    const auto [up, down] = pitch.ratio_for(draws[i] * (hi - range.at(0)) + range.at(0));
    EXPECT_EQ(up, ratios[i].at(0));
    EXPECT_EQ(down, ratios[i].at(1));
    const auto y = resample_poly(x, up, down);
    const auto& ref = g.at("output:pitched." + std::to_string(i));
    ASSERT_EQ(y.sizes(), ref.sizes());
    EXPECT_LE(max_abs_diff(y, ref), 2e-6);
  }
  EXPECT_HAS(testing::error_of([] { RandomPitch(1.3, 0.7, 100); }), "expected two factors 0 < LO <= HI");
}

TEST(AugmentFlags, AugmentAppendsInOrderAndUnknownNamesAreRefused) {
  const TrainArgs a = parse_train_args(std::vector<std::string>{
      "--config", "tiny_rave", "--augment", "mute", "--augment", "gain", "--normalize", "--derivative"});
  EXPECT_EQ(a.config.get_string("data.augment"), "mute,gain");
  EXPECT_TRUE(a.config.get_bool("data.normalize"));
  EXPECT_TRUE(a.config.get_bool("data.derivative"));
  const auto list = parse_augmentations(a.config.get_string("data.augment"), "data.augment");
  EXPECT_EQ(list, (std::vector<Augmentation>{Augmentation::kMute, Augmentation::kGain}));
  EXPECT_HAS(testing::error_of([] {
               parse_train_args(std::vector<std::string>{"--augment", "pitch"});
             }),
             "data.augment (--augment pitch): unknown augmentation 'pitch' (accepted: mute, compress, gain");
  // normalize_ambient's compressor comes first, --augment adds after it.
  const TrainArgs b = parse_train_args(std::vector<std::string>{
      "--config", "tiny_rave", "--config", "normalize_ambient", "--augment", "compress"});
  EXPECT_EQ(b.config.get_string("data.augment"), "normalize_ambient,compress");
  EXPECT_HAS(testing::error_of([] { parse_augmentations("mute,,loud", "data.augment"); }),
             "data.augment: unknown augmentation 'loud'");
}

}  // namespace
}  // namespace rt
