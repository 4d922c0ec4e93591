// The rational converter of export --sr (models/rave/rational_resampler.h) against the signals
// it must give, computed in closed form: a sine below the passband edge comes out as the same
// sine sampled at the new rate (no reference implementation to share its mistakes), a tone above
// the lower rate's Nyquist comes out silent, a constant stays constant, and a stream cut into
// arbitrary blocks gives the offline output.
#include "models/rave/rational_resampler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "util/error.h"

namespace rt::rave {
namespace {

torch::Tensor tone_at_rate(double hz, int64_t rate, int64_t n) {
  const auto t = torch::arange(n, torch::kDouble) / static_cast<double>(rate);
  return torch::sin(2.0 * M_PI * hz * t).reshape({1, 1, n});
}

// The largest error in the middle (away from the zero-padded ends), relative to a unit sine.
double error_away_from_ends(const torch::Tensor& a, const torch::Tensor& b, int64_t margin) {
  const int64_t n = std::min(a.size(-1), b.size(-1)) - 2 * margin;
  return (a.narrow(-1, margin, n) - b.narrow(-1, margin, n)).abs().max().item<double>();
}

TEST(RationalResampler, SinesKeepTheirFrequencyBothWays) {
  for (const auto& [from, to] : {std::pair<int64_t, int64_t>{48000, 44100}, {44100, 48000}, {22050, 48000}}) {
    const auto r = design_rational_resampling(from, to, "--sr");
    for (double hz : {50.0, 1000.0, 9000.0, 0.44 * static_cast<double>(std::min(from, to))}) {
      SCOPED_TRACE(std::to_string(from) + " → " + std::to_string(to) + " Hz, " + std::to_string(hz) + " Hz");
      const auto y = resample_rational(r, tone_at_rate(hz, from, from / 2));
      ASSERT_EQ(y.size(-1), (from / 2 * r.up + r.down - 1) / r.down);
      EXPECT_LT(error_away_from_ends(y, tone_at_rate(hz, to, y.size(-1)), to / 20), 2e-5);  // about −94 dB
    }
  }
}

TEST(RationalResampler, ToneAboveTheLowerNyquistIsRemoved) {
  const auto r = design_rational_resampling(48000, 44100, "--sr");
  // 23 kHz at 48 kHz would fold to 21.1 kHz at 44.1 kHz.
  const auto y = resample_rational(r, tone_at_rate(23000.0, 48000, 24000));
  EXPECT_LT(y.narrow(-1, 2205, y.size(-1) - 4410).abs().max().item<double>(), 2e-5);
  // The converter's own check that this test can fail: 21 kHz (passband edge is 19.8) passes partly.
  const auto edge = resample_rational(r, tone_at_rate(21000.0, 48000, 24000));
  EXPECT_GT(edge.narrow(-1, 2205, edge.size(-1) - 4410).abs().max().item<double>(), 1e-3);
}

TEST(RationalResampler, ConstantStaysConstantAndTermsAreLowest) {
  const auto r = design_rational_resampling(48000, 44100, "--sr");
  EXPECT_EQ(r.up, 147);
  EXPECT_EQ(r.down, 160);
  EXPECT_EQ(r.weights.size(0), 147);
  const auto y = resample_rational(r, torch::full({2, 3, 9600}, 0.25, torch::kDouble));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, 8820}));
  EXPECT_LT((y.narrow(-1, 400, 8000) - 0.25).abs().max().item<double>(), 1e-12);
}

TEST(RationalResampler, AStreamInAnyBlocksIsTheOfflineOutput) {
  const auto r = design_rational_resampling(44100, 48000, "--sr");
  torch::manual_seed(3);
  const auto x = torch::randn({2, 1, 20000}, torch::kDouble);
  const auto whole = resample_rational(r, x);
  auto buffer = torch::zeros({2, 1, r.history}, torch::kDouble);
  std::vector<torch::Tensor> out;
  int64_t at = 0;
  for (int64_t block : {1, 7, 147, 160, 2048, 333, 4096, 1, 5000, 8207}) {
    buffer = torch::cat({buffer, x.narrow(-1, at, std::min(block, x.size(-1) - at))}, -1);
    at += std::min(block, x.size(-1) - at);
    const int64_t cycles = r.cycles_in(buffer.size(-1));
    out.push_back(resample_cycles(r, buffer, cycles));
    buffer = buffer.narrow(-1, cycles * r.down, buffer.size(-1) - cycles * r.down);
  }
  const auto streamed = torch::cat(out, -1);
  ASSERT_GT(streamed.size(-1), 21000);
  EXPECT_LT((streamed - whole.narrow(-1, 0, streamed.size(-1))).abs().max().item<double>(), 1e-12);
}

TEST(RationalResampler, RefusesTermsAboveTheLimitNamingTheFlag) {
  try {
    design_rational_resampling(44101, 44100, "--sr");
    FAIL() << "44101 → 44100 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--sr: 44101 Hz to 44100 Hz is 44100/44101"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace rt::rave
