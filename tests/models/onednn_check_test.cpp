// The oneDNN convolution check (models/common/onednn_check.h): after it, float32 convolution
// gradients in the configurations LibTorch 2.6's oneDNN gets wrong match float64 ATen, and the
// measurement itself leaves no trace (oneDNN flag restored, no random numbers drawn).
#include "models/common/onednn_check.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <vector>

#include "models/common/conv.h"

namespace {

// max |float32 − float64| / max |float64| of the input and weight gradients of `conv`, on inputs
// drawn from a fixed seed.
double gradient_error(at::IntArrayRef x_shape, at::IntArrayRef w_shape,
                      const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& conv) {
  torch::manual_seed(11);
  const auto x0 = torch::randn(x_shape, torch::kFloat64);
  const auto w0 = torch::randn(w_shape, torch::kFloat64);
  std::vector<torch::Tensor> grads[2];
  int i = 0;
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    auto x = x0.to(dtype).clone().requires_grad_();
    auto w = w0.to(dtype).clone().requires_grad_();
    auto y = conv(x, w);
    y.backward(torch::linspace(-1, 1, y.numel(), dtype).reshape(y.sizes()));
    grads[i++] = {x.grad().to(torch::kFloat64), w.grad().to(torch::kFloat64)};
  }
  double worst = 0;
  for (int k = 0; k < 2; ++k) {
    const auto e = ((grads[0][k] - grads[1][k]).abs().max() / grads[1][k].abs().max()).item<double>();
    worst = std::isfinite(e) ? std::max(worst, e) : INFINITY;
  }
  return worst;
}

TEST(OneDnnCheck, ConvolutionGradientsMatchFloat64OnceAConvModuleExists) {
  rt::models::WNConv1d conv(rt::models::WNConv1dOptions(4, 8, 7));  // runs the check
  const auto& check = rt::models::ensure_correct_cpu_convolutions();
  RecordProperty("onednn_checked", check.ran ? "yes" : "no");
  RecordProperty("onednn_max_rel_error", std::to_string(check.max_rel_error));
  RecordProperty("onednn_disabled", check.disabled ? "yes" : "no");
  if (check.disabled) {
    EXPECT_FALSE(at::globalContext().userEnabledMkldnn());
  }
  // Shapes of RAVE's small configurations (capacity 4–8), where oneDNN 3.7.2 went wrong.
  EXPECT_LT(gradient_error({2, 4, 128}, {8, 4, 7},
                           [](const auto& x, const auto& w) { return torch::conv1d(x, w, {}, 1, 3); }),
            1e-4);
  EXPECT_LT(gradient_error({2, 8, 64}, {8, 8, 3},
                           [](const auto& x, const auto& w) { return torch::conv1d(x, w, {}, 1, 1); }),
            1e-4);
  EXPECT_LT(gradient_error({2, 4, 16, 16}, {8, 4, 3, 3},
                           [](const auto& x, const auto& w) { return torch::conv2d(x, w, {}, 1, 1); }),
            1e-4);
}

TEST(OneDnnCheck, MeasuringRestoresTheFlagAndDrawsNoRandomNumbers) {
  const bool before = at::globalContext().userEnabledMkldnn();
  torch::manual_seed(5);
  const auto expected = torch::randn({8});
  torch::manual_seed(5);
  const auto r = rt::models::measure_onednn_convolutions();
  EXPECT_TRUE(torch::equal(torch::randn({8}), expected));
  EXPECT_EQ(at::globalContext().userEnabledMkldnn(), before);
  if (r.ran) {
    EXPECT_FALSE(r.worst.empty());
    EXPECT_GE(r.max_rel_error, 0.0);
  } else {
    EXPECT_TRUE(!at::hasMKLDNN() || !before);
  }
}

}  // namespace
