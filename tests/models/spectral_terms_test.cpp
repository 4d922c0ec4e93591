// models/rave/losses.cpp's one-node STFT and spectral terms (models/rave/spectral_kernel.h)
// compute what the chain of aten operators (torch.stft, abs, …) computes: RAVE's multi-scale
// distance, its gradient and its second derivatives, in float and double, with the target's
// magnitudes given or computed; the magnitudes are torch.stft's; the float log it uses is within
// rounding of std::log.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "models/rave/losses.h"
#include "models/rave/spectral_kernel.h"
#include "tests/support/expect.h"

namespace rt::rave {
namespace {

// RAVE's distance written out with aten's operators (the pre-fusion code path).
torch::Tensor chain_distance(const torch::Tensor& x, const torch::Tensor& y,
                             const std::vector<int64_t>& scales, double eps) {
  auto xf = x.reshape({-1, x.size(-1)}), yf = y.reshape({-1, y.size(-1)});
  torch::Tensor total = torch::zeros({}, x.options());
  for (int64_t n : scales) {
    auto window = torch::hann_window(n, x.options().dtype(torch::kFloat32)).to(x.scalar_type());
    auto mag = [&](const torch::Tensor& s) {
      return torch::stft(s, n, n / 4, n, window, true, "reflect", false, true, true).abs();
    };
    auto sx = mag(xf), sy = mag(yf);
    total = total + (sx - sy).pow(2).mean() / sx.pow(2).mean() +
            ((sx + eps).log() - (sy + eps).log()).abs().mean();
  }
  return total;
}

using rt::testing::max_rel_error;

TEST(SpectralTerms, TheDistanceAndItsGradientAreTheOperatorChainsInDoubleAndFloat) {
  torch::manual_seed(21);
  const std::vector<int64_t> scales{256, 128, 64, 32};
  for (auto dtype : {torch::kDouble, torch::kFloat}) {
    const double tol = dtype == torch::kDouble ? 1e-12 : 2e-5;
    auto x = torch::randn({2, 3, 1000}, dtype);
    // Some bins of y equal to x's (a zero log difference) and a silent example (zero magnitudes).
    auto base = (0.7 * x + 0.3 * torch::randn_like(x));
    base.select(1, 2).zero_();
    auto y = base.clone().requires_grad_();
    auto d = spectral_distance(x, y, scales, 1e-7);
    d.backward();
    auto yr = base.clone().requires_grad_();
    auto dr = chain_distance(x, yr, scales, 1e-7);
    dr.backward();
    EXPECT_LT(max_rel_error(d, dr), tol) << dtype << ": " << d.item<double>() << " vs " << dr.item<double>();
    EXPECT_LT(max_rel_error(y.grad(), yr.grad()), tol * 10) << dtype;

    // The magnitudes precomputed (rave.cpp's reuse of the target's spectra) and given energies.
    auto mags = stft_magnitudes(x, scales);
    auto energies = spectral_energy(mags);
    auto y2 = base.clone().requires_grad_();
    auto d2 = spectral_distance(x, y2, scales, 1e-7, energies, &mags);
    d2.backward();
    EXPECT_LT(max_rel_error(d2, dr), tol) << dtype;
    EXPECT_LT(max_rel_error(y2.grad(), yr.grad()), tol * 10) << dtype;
  }
}

TEST(SpectralTerms, ATargetThatRequiresGradTakesTheOperatorChainWithItsGradient) {
  torch::manual_seed(22);
  auto x = torch::randn({1, 1, 600}, torch::kDouble).requires_grad_();
  auto y = torch::randn({1, 1, 600}, torch::kDouble).requires_grad_();
  spectral_distance(x, y, {128, 64}, 1e-7).backward();
  auto xr = x.detach().clone().requires_grad_(), yr = y.detach().clone().requires_grad_();
  chain_distance(xr, yr, {128, 64}, 1e-7).backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_LT(max_rel_error(x.grad(), xr.grad()), 1e-12);
  EXPECT_LT(max_rel_error(y.grad(), yr.grad()), 1e-12);
}

TEST(SpectralTerms, WithoutGradientsTheValueIsTheSame) {
  torch::manual_seed(23);
  auto x = torch::randn({2, 1, 800}), y = torch::randn({2, 1, 800});
  auto with = spectral_distance(x, y.clone().requires_grad_(), {128, 64}, 1e-7).item<double>();
  torch::NoGradGuard ng;
  EXPECT_EQ(spectral_distance(x, y, {128, 64}, 1e-7).item<double>(), with);
}

TEST(SpectralTerms, TheStftsMagnitudesAreTorchStftsAtOddAndEvenScalesAndShortSignals) {
  // The own STFT (frames of the reflect-padded signal, rfft) and its magnitude kernel against
  // torch.stft(...).abs(): even and odd frame lengths, a signal only just longer than n/2 (every
  // frame reflected), a single example.
  torch::manual_seed(25);
  for (auto dtype : {torch::kDouble, torch::kFloat}) {
    const double tol = dtype == torch::kDouble ? 1e-12 : 2e-6;
    for (int64_t T : {int64_t{1000}, int64_t{65}, int64_t{33}}) {
      for (int64_t n : {int64_t{64}, int64_t{63}, int64_t{16}}) {
        if (n / 2 >= T) continue;
        auto x = torch::randn({T <= 65 ? 1 : 3, 1, T}, dtype);
        auto mine = stft_magnitudes(x, {n})[0];
        auto window = torch::hann_window(n, torch::TensorOptions().dtype(torch::kFloat32)).to(dtype);
        auto ref =
            torch::stft(x.reshape({-1, T}), n, n / 4, n, window, true, "reflect", false, true, true).abs();
        ASSERT_EQ(mine.sizes(), ref.sizes()) << "T " << T << ", n " << n;
        EXPECT_LT(max_rel_error(mine, ref), tol) << dtype << ", T " << T << ", n " << n;
      }
    }
  }
}

TEST(SpectralTerms, SecondDerivativesAreTheOperatorChains) {
  // create_graph through both nodes (the STFT's and the terms'): aten's differentiable operators.
  torch::manual_seed(26);
  const auto x = torch::randn({2, 1, 300}, torch::kDouble), y0 = torch::randn({2, 1, 300}, torch::kDouble);
  const auto v = torch::randn({2, 1, 300}, torch::kDouble);
  torch::Tensor hv[2];
  for (bool own : {true, false}) {
    auto y = y0.clone().requires_grad_();
    auto d = own ? spectral_distance(x, y, {64, 32}, 1e-7) : chain_distance(x, y, {64, 32}, 1e-7);
    auto g = torch::autograd::grad({d}, {y}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
    hv[own] = torch::autograd::grad({(g * v).sum()}, {y})[0];  // a Hessian-vector product
  }
  EXPECT_LT(max_rel_error(hv[1], hv[0]), 1e-9);
}

TEST(SpectralTerms, TheFloatLogIsWithinRoundingOfStdLog) {
  // Magnitudes + ε span 1e-7 … 1e4 in RAVE's losses; the mantissa's reduction edges (powers of
  // two, √2) and values next to 1 (where log is near 0) included.
  std::vector<float> xs;
  for (float v = 1e-7f; v < 1e5f; v *= 1.013f) xs.push_back(v);
  for (int e = -24; e <= 16; ++e) {
    const float p = std::ldexp(1.0f, e);
    for (float f : {1.0f, 1.41421354f, 1.41421366f, 1.9999999f}) xs.push_back(p * f);
  }
  for (float d = -1e-3f; d <= 1e-3f; d += 1.7e-5f) xs.push_back(1.0f + d);
  double worst = 0;
  for (float v : xs) {
    const double exact = std::log(static_cast<double>(v));
    const double err = std::abs(static_cast<double>(detail::log_positive(v)) - exact);
    // Two float ulps of the result, or of 1e-7 absolute near log(1) = 0.
    const double allowed = 2.0 * std::max(std::abs(exact), 0.5) * std::numeric_limits<float>::epsilon();
    worst = std::max(worst, err / allowed);
    ASSERT_LE(err, allowed) << "log(" << v << ")";
  }
  EXPECT_GT(worst, 0.0);
}

}  // namespace
}  // namespace rt::rave
