// export/checks/fidelity.h: the check export prints after writing a file. The float32 export is the
// model's computation (lossless: within 1e-5 of the C++ model, nothing added to its spectral
// distance), offline and streaming; an int8 export is measured as lossy, and still runs as
// nn~ runs it. Every version export supports, mono and stereo.
#include "export/checks/fidelity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "export_fixtures.h"

namespace rt::exporting::testing {
namespace {

// Tones with vibrato and decaying plucks, at 44.1 kHz: audio with structure at every STFT scale.
torch::Tensor test_audio(int64_t channels, int64_t samples) {
  const auto t = torch::arange(samples, torch::kDouble) / 44100.0;
  auto x = 0.3 * torch::sin(2 * M_PI * 220.0 * t + 3.0 * torch::sin(2 * M_PI * 5.0 * t)) +
           0.2 * torch::sin(2 * M_PI * 1320.0 * t);
  const auto phase = torch::fmod(t, 0.25);
  x = x + 0.3 * torch::exp(-phase * 30.0) * torch::sin(2 * M_PI * 660.0 * t);
  return x.to(torch::kFloat).unsqueeze(0).repeat({channels, 1});
}

class FidelityCheck : public ::testing::TestWithParam<std::tuple<Variant, bool>> {
 protected:
  const Variant& variant() const { return std::get<0>(GetParam()); }
  bool streaming() const { return std::get<1>(GetParam()); }
  FidelityFigures check(const ScriptOptions& s, ScriptInfo* info) {
    const Variant& v = variant();
    model_ = tiny_model(tiny_options(v));
    file_ = dir_.path() / (std::string(streaming() ? "streaming" : "offline") + ".ts");
    script_rave(*model_, s, info).save(file_.string());
    const auto audio = test_audio(v.channels, fidelity_samples(*info, 44100, 1.0, s.streaming));
    return measure_fidelity(*model_, file_, s, *info, audio, "test tones");
  }
  rt::testing::ScratchDir dir_{"fidelity_check"};
  rave::RaveModel model_{nullptr};
  std::filesystem::path file_;
};

TEST_P(FidelityCheck, FloatExportIsTheModelWithinItsBudget) {
  ScriptOptions s;
  s.streaming = streaming();
  ScriptInfo info;
  const auto f = check(s, &info);
  ASSERT_TRUE(f.measured) << f.not_measured;
  EXPECT_EQ(info.int8_layers, 0);
  EXPECT_LE(f.max_abs_diff, 1e-5) << format_fidelity(f);
  EXPECT_GT(f.own_distance, 0.0);
  EXPECT_TRUE(f.within_budget()) << format_fidelity(f);
  EXPECT_GE(f.seconds, 1.0 - 1e-9);
  EXPECT_NE(format_fidelity(f).find("of the model's own reconstruction distance"), std::string::npos);
}

TEST_P(FidelityCheck, Int8ExportIsMeasuredAsLossyAndRunsAsNnTildeCallsIt) {
  ScriptOptions s;
  s.streaming = streaming();
  s.quantize = Quantize::kInt8;
  s.int8_min_weights = 0;  // every product: the tiny model has no large layer
  ScriptInfo info;
  const auto f = check(s, &info);
  ASSERT_TRUE(f.measured) << f.not_measured;
  EXPECT_GT(info.int8_layers, 0);
  EXPECT_GT(info.int8_weights, 0);
  EXPECT_GT(f.max_abs_diff, 0.0);
  EXPECT_GT(f.added_distance, 0.0);
  EXPECT_TRUE(std::isfinite(f.snr_db));
  // Coarse (7-bit activations per call through every layer of a random 4-channel model), but
  // the signal: a product laid out wrong leaves no correlation (SNR at or below 0 dB).
  EXPECT_GT(f.snr_db, 3.0) << format_fidelity(f);
  // nn~: batch 4, two whole blocks, from the saved file.
  auto m = torch::jit::load(file_.string());
  c10::InferenceMode guard;
  const int64_t channels = variant().channels;
  auto y = m.get_method("forward")({torch::randn({4, channels, 2 * info.ratio}) * 0.3}).toTensor();
  EXPECT_EQ(y.sizes(), (at::IntArrayRef{4, channels, 2 * info.ratio}));
  EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
}

TEST(FidelityCheckFigures, ShareAndBudget) {
  FidelityFigures f;
  EXPECT_FALSE(f.within_budget());  // not measured
  f.measured = true;
  f.own_distance = 2.0;
  f.added_distance = 0.1;
  EXPECT_DOUBLE_EQ(f.share(), 0.05);
  EXPECT_TRUE(f.within_budget());
  f.added_distance = 0.1001;
  EXPECT_FALSE(f.within_budget());
  f.added_distance = 0.0;
  EXPECT_EQ(f.share(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(EveryVersion, FidelityCheck,
                         ::testing::Combine(::testing::ValuesIn(all_variants()), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<Variant, bool>>& i) {
                           return variant_name({std::get<0>(i.param), i.index}) +
                                  (std::get<1>(i.param) ? "_streaming" : "_offline");
                         });

}  // namespace
}  // namespace rt::exporting::testing
