#include "models/common/pqmf.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "models/common/conv1d_backward.h"

namespace {

using rt::models::Pqmf;

// Best-aligned SNR (dB) of y against x over lags in [−max_lag, max_lag], ignoring `edge`
// samples at both ends (zero padding makes the borders inexact).
double aligned_snr_db(const torch::Tensor& x, const torch::Tensor& y, int64_t max_lag, int64_t edge,
                      int64_t* best_lag) {
  const int64_t t = x.size(-1);
  double best = -1e9;
  for (int64_t lag = -max_lag; lag <= max_lag; ++lag) {
    const int64_t start = edge + std::max<int64_t>(0, -lag);
    const int64_t len = t - 2 * edge - std::abs(lag);
    auto xs = x.narrow(-1, start, len);
    auto ys = y.narrow(-1, start + lag, len);
    const double snr =
        10 * std::log10(xs.pow(2).sum().item<double>() / (xs - ys).pow(2).sum().item<double>());
    if (snr > best) best = snr, *best_lag = lag;
  }
  return best;
}

TEST(Pqmf, PrototypeMatchesRaveKaiserDesign) {
  auto p = rt::models::pqmf_prototype(100, 16);
  EXPECT_EQ(p.h.size(), 377u);
  EXPECT_NEAR(p.beta, 0.1102 * (100 - 8.7), 1e-12);
  EXPECT_NEAR(p.beta, 10.06126, 1e-5);
  EXPECT_NEAR(p.wc, 0.10752, 2e-4);
  // The optimum beats the starting point 1/M on the aliasing objective.
  EXPECT_LT(rt::models::pqmf_aliasing(p.wc, 100, 16), rt::models::pqmf_aliasing(1.0 / 16, 100, 16));
}

TEST(Pqmf, KaiserWindowAndBesselAreCorrect) {
  EXPECT_NEAR(rt::models::bessel_i0(0), 1.0, 1e-15);
  EXPECT_NEAR(rt::models::bessel_i0(1), 1.2660658777520082, 1e-13);
  auto w = rt::models::kaiser_window(5, 10.0);
  EXPECT_NEAR(w[2], 1.0, 1e-15);
  EXPECT_NEAR(w[0], 1.0 / rt::models::bessel_i0(10.0), 1e-15);
  EXPECT_NEAR(w[1], w[3], 1e-15);
}

TEST(Pqmf, ParameterAndBufferLayoutMatchesRave) {
  Pqmf pqmf(16);
  int64_t params = 0;
  for (const auto& p : pqmf->parameters()) {
    params += p.numel();
    EXPECT_FALSE(p.requires_grad());
  }
  EXPECT_EQ(params, 16656);
  EXPECT_EQ(pqmf->forward_conv->weight.sizes(), (std::vector<int64_t>{16, 1, 513}));
  EXPECT_EQ(pqmf->inverse_conv->weight.sizes(), (std::vector<int64_t>{16, 16, 33}));
  EXPECT_EQ(pqmf->hk.sizes(), (std::vector<int64_t>{16, 512}));
  EXPECT_EQ(pqmf->h.numel(), 377);
  auto names = pqmf->named_parameters();
  EXPECT_TRUE(names.contains("forward_conv.weight"));
  EXPECT_TRUE(names.contains("inverse_conv.weight"));
}

TEST(Pqmf, ReconstructsWhiteNoiseAndSweepAbove40dB) {
  torch::manual_seed(0);
  Pqmf pqmf(16);
  torch::NoGradGuard ng;
  const int64_t t = 8192;
  auto noise = torch::randn({2, 1, t}) * 0.3;
  auto n = torch::arange(t, torch::kFloat64) / 44100.0;
  // Linear sweep 20 Hz → 20 kHz.
  auto sweep = torch::sin(2 * M_PI * (20 * n + (20000 - 20) / (2 * (t / 44100.0)) * n * n))
                   .to(torch::kFloat32)
                   .reshape({1, 1, t});
  for (const auto& x : {noise, sweep}) {
    auto bands = pqmf->forward(x);
    ASSERT_EQ(bands.sizes(), (std::vector<int64_t>{x.size(0), 16, t / 16}));
    auto y = pqmf->inverse(bands);
    ASSERT_EQ(y.sizes(), x.sizes());
    int64_t lag = 0;
    const double snr = aligned_snr_db(x, y, 64, 600, &lag);
    EXPECT_GE(snr, 40.0) << "lag " << lag;
    EXPECT_LE(std::abs(lag), 32);
  }
}

TEST(Pqmf, FoldsChannelsIntoBatch) {
  torch::manual_seed(1);
  Pqmf pqmf(16);
  torch::NoGradGuard ng;
  auto x = torch::randn({2, 3, 1024});
  auto bands = pqmf->forward(x);
  ASSERT_EQ(bands.sizes(), (std::vector<int64_t>{2, 48, 64}));
  auto one = pqmf->forward(x.narrow(1, 1, 1));
  EXPECT_TRUE(torch::allclose(bands.narrow(1, 16, 16), one, 1e-5, 1e-6));
  auto y = pqmf->inverse(bands);
  EXPECT_EQ(y.sizes(), x.sizes());
  EXPECT_TRUE(torch::allclose(y.narrow(1, 2, 1), pqmf->inverse(bands.narrow(1, 32, 16)), 1e-5, 1e-6));
}

TEST(Pqmf, TrainingSynthesisGoesThroughTheConvNodeWithAtensValuesAndGradient) {
  // The decoder's synthesis under gradients: the Conv1d node of conv1d_backward.h (its input
  // gradient as tap products) against aten's convolution and backward, in double (1e-12) and at
  // RAVE v2's shape in float (1e-5 of the largest value).
  torch::manual_seed(2);
  Pqmf pqmf(16);
  for (auto dtype : {torch::kDouble, torch::kFloat}) {
    pqmf->to(dtype);
    auto bands = torch::randn({2, 16, dtype == torch::kDouble ? 300 : 2048}, dtype);
    auto g = torch::randn({2, 1, bands.size(2) * 16}, dtype);
    torch::Tensor out[2], grad[2];
    for (bool node : {false, true}) {
      rt::models::set_conv1d_backward_gemm(node);
      auto x = bands.clone().requires_grad_();
      out[node] = pqmf->inverse(x);
      out[node].backward(g);
      grad[node] = x.grad();
    }
    rt::models::set_conv1d_backward_gemm(true);
    const double tol = dtype == torch::kDouble ? 1e-12 : 1e-5;
    auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
      return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
    };
    EXPECT_LT(rel(out[1], out[0]), tol) << dtype;
    EXPECT_LT(rel(grad[1], grad[0]), tol) << dtype;
    auto x = bands.clone().requires_grad_();
    auto y = pqmf->inverse(x);
    bool found = false;
    for (auto fn = y.grad_fn(); fn && !found;) {
      found = fn->name().find("Conv1dGemm") != std::string::npos;
      fn = fn->next_edges().empty() ? nullptr : fn->next_edges()[0].function;
    }
    EXPECT_TRUE(found) << "the synthesis's graph has the Conv1d node";
  }
}

}  // namespace
