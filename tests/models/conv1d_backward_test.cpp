// models/common/conv1d_backward.h: the Conv1d node has aten's forward values and aten's gradients
// (input, weight, bias), on both paths (long outputs, and the unfolded short ones that every
// stride > 1 takes), at RAVE's paddings, dilations and strides, and WNConv1d takes it only
// where it applies; the same for the transposed convolution's node and WNConvTranspose1d.
#include "models/common/conv1d_backward.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "models/common/conv.h"
#include "tests/support/expect.h"

namespace rt::models {
namespace {

using rt::testing::max_rel_error;

// A module's forward with set_conv1d_backward_gemm on and off: the node `node` in the graph only
// when on, the same output and the same gradients of x and of every parameter (double: within
// 1e-12); without gradients, no graph and aten's own output.
void expect_switch_changes_only_the_node(torch::nn::Module& m, const std::function<torch::Tensor()>& forward,
                                         torch::Tensor& x, const std::string& node) {
  std::vector<torch::Tensor> grads[2];
  torch::Tensor outs[2];
  for (bool on : {true, false}) {
    set_conv1d_backward_gemm(on);
    m.zero_grad();
    x.mutable_grad() = torch::Tensor();
    auto y = forward();
    const std::string name = y.grad_fn()->name();
    EXPECT_EQ(name.find(node) != std::string::npos, on) << name;
    y.backward(torch::ones_like(y));
    outs[on] = y.detach();
    grads[on] = {x.grad().clone()};
    for (const auto& p : m.parameters()) grads[on].push_back(p.grad().clone());
  }
  set_conv1d_backward_gemm(true);
  EXPECT_LT(max_rel_error(outs[1], outs[0]), 1e-12);
  for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_LT(max_rel_error(grads[1][i], grads[0][i]), 1e-12) << i;
  torch::NoGradGuard ng;
  auto y = forward();
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(torch::equal(y, outs[0]));
}

using ConvFn = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>;

// create_graph (a gradient penalty): the node's backward must itself be differentiable, with
// aten's second derivatives: ∂/∂(x, w, b) of ‖∂‖y‖²/∂x‖² through `node` and through `aten`.
void expect_second_derivatives_are_atens(const ConvFn& node, const ConvFn& aten, const torch::Tensor& x0,
                                         const torch::Tensor& w0, const torch::Tensor& b0) {
  std::vector<torch::Tensor> second[2];
  for (bool mine : {true, false}) {
    auto x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    auto y = mine ? node(x, w, b) : aten(x, w, b);
    auto gx =
        torch::autograd::grad({y.pow(2).sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
    second[mine] = torch::autograd::grad({gx.pow(2).sum()}, {x, w, b});
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_LT(max_rel_error(second[1][i], second[0][i]), 1e-12) << i;
}

struct ConvCase {
  int64_t batch, c_in, c_out, steps, kernel, dilation, padding;
  bool bias;
  int64_t stride = 1;
};

std::string conv_case_name(const ConvCase& c, int64_t fold_below) {
  return std::to_string(c.batch) + "x" + std::to_string(c.c_in) + "x" + std::to_string(c.steps) + " -> " +
         std::to_string(c.c_out) + ", k " + std::to_string(c.kernel) + ", d " + std::to_string(c.dilation) +
         ", p " + std::to_string(c.padding) + ", s " + std::to_string(c.stride) + (c.bias ? ", bias" : "") +
         ", fold below " + std::to_string(fold_below);
}

// RAVE's paddings (centered: (k−1)·d/2 both sides; a causal or asymmetric conv is padded by
// WNConv1d first and comes here with padding 0), kernels 3 and 7, dilations up to 9, a
// one-example batch, a tap that reads only padding (steps ≤ d), odd channel counts; the
// encoder's downsampling (kernel 2s, stride s: 4 and 8 at 2 and 4) and strides that leave input
// steps unread, with padding and dilation, 1×1 kernels at strides 1 and 2, and an output longer
// than one of the long path's blocks of steps.
const ConvCase kConvCases[] = {
    {4, 6, 5, 40, 3, 1, 1, true},     {3, 4, 7, 33, 3, 9, 9, false},    {2, 5, 5, 21, 7, 1, 3, true},
    {1, 3, 4, 16, 3, 3, 0, true},     {2, 4, 3, 6, 3, 9, 9, false},     {2, 3, 2, 12, 5, 2, 8, true},
    {2, 4, 6, 39, 8, 1, 0, true, 4},  {3, 5, 4, 35, 4, 1, 0, false, 2}, {2, 3, 4, 29, 3, 2, 2, true, 3},
    {2, 4, 3, 17, 1, 1, 0, false, 2}, {1, 2, 3, 10, 5, 1, 6, true, 4},  {3, 5, 4, 300, 1, 1, 0, true},
    {2, 6, 3, 20, 1, 1, 0, false},    {2, 3, 4, 1100, 3, 9, 9, true},
};

TEST(Conv1dGemm, ForwardAndGradientsAreAtensInDouble) {
  torch::manual_seed(11);
  for (const ConvCase& c : kConvCases) {
    for (int64_t fold_below : {int64_t{0}, int64_t{1} << 30}) {
      const std::string what = conv_case_name(c, fold_below);
      auto opts = torch::TensorOptions().dtype(torch::kDouble);
      auto x = torch::randn({c.batch, c.c_in, c.steps}, opts).requires_grad_();
      auto w = torch::randn({c.c_out, c.c_in, c.kernel}, opts).requires_grad_();
      auto b = c.bias ? torch::randn({c.c_out}, opts).requires_grad_() : torch::Tensor();
      ASSERT_TRUE(conv1d_gemm_applies(x, w, c.stride, c.padding, c.dilation)) << what;
      auto y = conv1d_gemm(x, w, b, c.stride, c.padding, c.dilation);
      auto y_path = conv1d_gemm_output(x.detach(), w.detach(), c.bias ? b.detach() : torch::Tensor(),
                                       c.stride, c.padding, c.dilation, fold_below);
      auto g = torch::randn(y.sizes(), opts);
      auto gb = c.bias ? torch::autograd::grad({y}, {b}, {g}, true)[0] : torch::Tensor();
      auto [gx, gw] =
          conv1d_gemm_grads(x.detach(), w.detach(), g, c.stride, c.padding, c.dilation, fold_below);

      auto xr = x.detach().clone().requires_grad_();
      auto wr = w.detach().clone().requires_grad_();
      auto br = c.bias ? b.detach().clone().requires_grad_() : torch::Tensor();
      auto yr = torch::conv1d(xr, wr, br, c.stride, c.padding, c.dilation);
      yr.backward(g);
      ASSERT_EQ(y.sizes(), yr.sizes()) << what;
      EXPECT_LT(max_rel_error(y, yr), 1e-12) << what << ": the node's forward";
      ASSERT_EQ(y_path.sizes(), yr.sizes()) << what;
      EXPECT_LT(max_rel_error(y_path, yr), 1e-12) << what << ": the forward's path";
      EXPECT_LT(max_rel_error(gx, xr.grad()), 1e-12) << what;
      EXPECT_LT(max_rel_error(gw, wr.grad()), 1e-12) << what;
      if (c.bias) {
        EXPECT_LT(max_rel_error(gb, br.grad()), 1e-12) << what;
      }
    }
  }
}

TEST(Conv1dGemm, TheNodeTakesTheShortOrTheLongPathByLength) {
  // Through backward(): both sides of kFoldBelowSteps, input and weight gradients equal aten's.
  torch::manual_seed(12);
  for (int64_t steps : {kFoldBelowSteps - 1, kFoldBelowSteps + 40}) {
    auto x = torch::randn({3, 8, steps}, torch::kDouble).requires_grad_();
    auto w = torch::randn({6, 8, 3}, torch::kDouble).requires_grad_();
    auto y = conv1d_gemm(x, w, {}, 1, 3, 3);
    auto g = torch::randn(y.sizes(), torch::kDouble);
    y.backward(g);
    auto xr = x.detach().clone().requires_grad_();
    auto wr = w.detach().clone().requires_grad_();
    torch::conv1d(xr, wr, {}, 1, 3, 3).backward(g);
    EXPECT_LT(max_rel_error(x.grad(), xr.grad()), 1e-12) << steps << " steps";
    EXPECT_LT(max_rel_error(w.grad(), wr.grad()), 1e-12) << steps << " steps";
  }
}

TEST(Conv1dGemm, TheLongPathDoesNotDependOnTheThreadCount) {
  // Each example's weight-gradient products run on one thread (chunks of 256 steps, the last
  // short) and are summed in example order; each block of the forward's and the input
  // gradient's outputs is one thread's (1500 steps: two blocks, the second short).
  torch::manual_seed(16);
  auto x = torch::randn({3, 16, 1500});
  auto w = torch::randn({12, 16, 3});
  auto b = torch::randn({12});
  auto g = torch::randn({3, 12, 1500});
  const int threads = at::get_num_threads();
  std::vector<torch::Tensor> runs[2];
  for (int n : {1, 2}) {
    at::set_num_threads(n);
    auto [gx, gw] = conv1d_gemm_grads(x, w, g, 1, 3, 3, 0);
    runs[n - 1] = {conv1d_gemm_output(x, w, b, 1, 3, 3, 0), gx, gw};
  }
  at::set_num_threads(threads);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(runs[0][i], runs[1][i])) << i;
}

TEST(Conv1dGemm, TheForwardSwitchGivesBackAtensOwnConvolution) {
  // set_conv1d_forward_gemm(false): the node's forward is aten's convolution, bit for bit, and
  // its gradients the same as with the products (the input gradient then aten's convolution too).
  torch::manual_seed(17);
  auto x = torch::randn({2, 8, 300}, torch::kDouble).requires_grad_();
  auto w = torch::randn({6, 8, 3}, torch::kDouble).requires_grad_();
  auto g = torch::randn({2, 6, 300}, torch::kDouble);
  torch::Tensor out[2], grads[2];
  for (bool on : {false, true}) {
    set_conv1d_forward_gemm(on);
    x.mutable_grad() = torch::Tensor();
    out[on] = conv1d_gemm(x, w, {}, 1, 3, 3);
    out[on].backward(g);
    grads[on] = x.grad().clone();
  }
  set_conv1d_forward_gemm(true);
  EXPECT_TRUE(conv1d_forward_gemm());
  EXPECT_TRUE(torch::equal(out[0], torch::conv1d(x.detach(), w.detach(), {}, 1, 3, 3)));
  EXPECT_LT(max_rel_error(out[1], out[0]), 1e-12);
  EXPECT_LT(max_rel_error(grads[1], grads[0]), 1e-12);
}

TEST(Conv1dGemm, FloatOutputAndGradientsAreWithinRoundingOfTheDoubleOnes) {
  // At RAVE v2's shapes (batch 2 here): 96 channels × 2048 steps at dilation 9 and 768 × 32.
  torch::manual_seed(13);
  for (const ConvCase& c :
       {ConvCase{2, 96, 96, 2048, 3, 9, 9, true}, ConvCase{2, 768, 768, 32, 3, 1, 1, false}}) {
    const std::string what = conv_case_name(c, kFoldBelowSteps);
    auto x = torch::randn({c.batch, c.c_in, c.steps}).requires_grad_();
    auto w = (torch::randn({c.c_out, c.c_in, c.kernel}) * 0.05).requires_grad_();
    auto b = c.bias ? torch::randn({c.c_out}).requires_grad_() : torch::Tensor();
    auto y = conv1d_gemm(x, w, b, c.stride, c.padding, c.dilation);
    auto g = torch::randn(y.sizes());
    y.backward(g);
    auto xd = x.detach().to(torch::kDouble).requires_grad_();
    auto wd = w.detach().to(torch::kDouble).requires_grad_();
    auto bd = c.bias ? b.detach().to(torch::kDouble).requires_grad_() : torch::Tensor();
    auto yd = torch::conv1d(xd, wd, bd, c.stride, c.padding, c.dilation);
    yd.backward(g.to(torch::kDouble));
    EXPECT_LT(max_rel_error(y, yd), 1e-5) << what;
    EXPECT_LT(max_rel_error(x.grad(), xd.grad()), 1e-5) << what;
    EXPECT_LT(max_rel_error(w.grad(), wd.grad()), 1e-5) << what;
    if (c.bias) {
      EXPECT_LT(max_rel_error(b.grad(), bd.grad()), 1e-5) << what;
    }
  }
}

TEST(Conv1dGemm, GradientsOfGradientsGoThroughAtensBackward) {
  torch::manual_seed(14);
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  expect_second_derivatives_are_atens(
      [](const auto& x, const auto& w, const auto& b) { return conv1d_gemm(x, w, b, 1, 2, 2); },
      [](const auto& x, const auto& w, const auto& b) { return torch::conv1d(x, w, b, 1, 2, 2); },
      torch::randn({2, 3, 9}, opts), torch::randn({4, 3, 3}, opts), torch::randn({4}, opts));
}

TEST(Conv1dGemm, ItTakesOnlyWhatItCanCompute) {
  auto x = torch::randn({2, 4, 16});
  auto w3 = torch::randn({5, 4, 3});
  EXPECT_TRUE(conv1d_gemm_applies(x, w3, 1, 1, 1));
  EXPECT_TRUE(conv1d_gemm_applies(x, w3, 1, 0, 1));
  EXPECT_FALSE(conv1d_gemm_applies(x, w3, 1, 3, 1)) << "padding beyond (k−1)·d at stride 1";
  EXPECT_TRUE(conv1d_gemm_applies(x, w3, 2, 3, 1)) << "any padding at longer strides";
  EXPECT_TRUE(conv1d_gemm_applies(x, torch::randn({5, 4, 1}), 1, 0, 1)) << "1×1";
  EXPECT_FALSE(conv1d_gemm_applies(x, torch::randn({5, 4, 1}), 1, 1, 1)) << "1×1 with padding";
  EXPECT_TRUE(conv1d_gemm_applies(x, torch::randn({5, 4, 1}), 2, 0, 1)) << "1×1 at stride 2";
  EXPECT_FALSE(conv1d_gemm_applies(x, torch::randn({5, 4, 40}), 2, 0, 1)) << "no output step";
  EXPECT_FALSE(conv1d_gemm_applies(x, torch::randn({5, 2, 3}), 1, 1, 1)) << "groups";
  EXPECT_FALSE(conv1d_gemm_applies(x.to(torch::kHalf), w3.to(torch::kHalf), 1, 1, 1)) << "half";
  EXPECT_FALSE(conv1d_gemm_applies(x, w3.to(torch::kDouble), 1, 1, 1)) << "mixed types";
  EXPECT_THROW(conv1d_gemm(x, w3, {}, 1, 3, 1), c10::Error);
  EXPECT_THROW(conv1d_gemm_output(x, torch::randn({5, 3, 3}), {}, 1, 1, 1), c10::Error) << "channels";
}

TEST(Conv1dGemm, WNConv1dUsesItWhenTrainingAndNotOtherwise) {
  // Weight-normed, centered and causal: the same outputs and gradients with the switch on and off,
  // and the node appears in the graph only when on and something requires grad.
  torch::manual_seed(15);
  for (bool causal : {false, true}) {
    auto [pl, pr] = get_padding(3, 3, causal ? PaddingMode::kCausal : PaddingMode::kCentered);
    WNConv1d conv(WNConv1dOptions(6, 5, 3).dilation(3).bias(true).pad_left(pl).pad_right(pr));
    conv->to(torch::kDouble);
    auto x = torch::randn({2, 6, 30}, torch::kDouble).requires_grad_();
    expect_switch_changes_only_the_node(
        *conv, [&] { return conv->forward(x); }, x, "Conv1dGemm");
  }
  WNConv1d pointwise(WNConv1dOptions(4, 4, 1));
  auto y = pointwise->forward(torch::randn({1, 4, 16}));
  EXPECT_NE(std::string(y.grad_fn()->name()).find("Conv1dGemm"), std::string::npos) << "1×1 at stride 1";
  WNConv1d strided(WNConv1dOptions(4, 4, 4).stride(2).pad_left(1).pad_right(1));
  y = strided->forward(torch::randn({1, 4, 16}));
  EXPECT_NE(std::string(y.grad_fn()->name()).find("Conv1dGemm"), std::string::npos) << "downsampling";
}

// The weight-normed node: y = conv1d(x, g·v/‖v‖, b) and the gradients of x, v, g and b as aten's
// _weight_norm followed by aten's convolution gives them.
struct WnResult {
  torch::Tensor y, gx, gv, gg, gb;
};
WnResult wn_run(bool node, const ConvCase& c, const torch::Tensor& x0, const torch::Tensor& v0,
                const torch::Tensor& g0, const torch::Tensor& b0, const torch::Tensor& go) {
  auto x = x0.clone().requires_grad_(), v = v0.clone().requires_grad_(), g = g0.clone().requires_grad_();
  auto b = b0.defined() ? b0.clone().requires_grad_() : torch::Tensor();
  auto y = node ? wn_conv1d_gemm(x, v, g, b, c.stride, c.padding, c.dilation)
                : torch::conv1d(x, torch::_weight_norm(v, g, 0), b, c.stride, c.padding, c.dilation);
  y.backward(go);
  return {y.detach(), x.grad(), v.grad(), g.grad(), b.defined() ? b.grad() : torch::Tensor()};
}

TEST(WnConv1dGemm, ValuesAndGradientsAreAtensWeightNormAndConvolutionInDouble) {
  // Every case of kConvCases (short and strided ones, and at stride 1 outputs long enough for the
  // long path: a 300- and a 1100-step case), and a 300-step dilated kernel 3.
  torch::manual_seed(41);
  std::vector<ConvCase> cases(std::begin(kConvCases), std::end(kConvCases));
  cases.push_back({2, 5, 4, 300, 3, 3, 3, true});
  for (const ConvCase& c : cases) {
    const std::string what = conv_case_name(c, kFoldBelowSteps);
    auto opts = torch::TensorOptions().dtype(torch::kDouble);
    auto x = torch::randn({c.batch, c.c_in, c.steps}, opts);
    auto v = torch::randn({c.c_out, c.c_in, c.kernel}, opts);
    auto g = torch::rand({c.c_out, 1, 1}, opts) + 0.5;
    auto b = c.bias ? torch::randn({c.c_out}, opts) : torch::Tensor();
    const int64_t out_steps = (c.steps + 2 * c.padding - c.dilation * (c.kernel - 1) - 1) / c.stride + 1;
    auto go = torch::randn({c.batch, c.c_out, out_steps}, opts);
    const WnResult mine = wn_run(true, c, x, v, g, b, go), ref = wn_run(false, c, x, v, g, b, go);
    ASSERT_EQ(mine.y.sizes(), ref.y.sizes()) << what;
    EXPECT_LT(max_rel_error(mine.y, ref.y), 1e-12) << what;
    EXPECT_LT(max_rel_error(mine.gx, ref.gx), 1e-12) << what;
    EXPECT_LT(max_rel_error(mine.gv, ref.gv), 1e-12) << what;
    EXPECT_LT(max_rel_error(mine.gg, ref.gg), 1e-12) << what;
    EXPECT_EQ(mine.gg.sizes(), g.sizes()) << what;
    if (c.bias) {
      EXPECT_LT(max_rel_error(mine.gb, ref.gb), 1e-12) << what;
    }
  }
}

TEST(WnConv1dGemm, FloatIsWithinRoundingOfTheDoubleReferenceAtRavesShapes) {
  torch::manual_seed(42);
  for (const ConvCase& c :
       {ConvCase{2, 96, 96, 2048, 3, 9, 9, true}, ConvCase{2, 768, 768, 32, 3, 1, 1, true},
        ConvCase{2, 96, 192, 2048, 8, 1, 2, true, 4}}) {
    const std::string what = conv_case_name(c, kFoldBelowSteps);
    auto x = torch::randn({c.batch, c.c_in, c.steps});
    auto v = torch::randn({c.c_out, c.c_in, c.kernel}) * 0.05;
    auto g = torch::rand({c.c_out, 1, 1}) + 0.5;
    auto b = torch::randn({c.c_out});
    const int64_t out_steps = (c.steps + 2 * c.padding - c.dilation * (c.kernel - 1) - 1) / c.stride + 1;
    auto go = torch::randn({c.batch, c.c_out, out_steps});
    const WnResult mine = wn_run(true, c, x, v, g, b, go);
    auto d = [](const torch::Tensor& t) { return t.to(torch::kDouble); };
    const WnResult ref = wn_run(false, c, d(x), d(v), d(g), d(b), d(go));
    EXPECT_LT(max_rel_error(mine.y, ref.y), 1e-5) << what;
    EXPECT_LT(max_rel_error(mine.gx, ref.gx), 1e-5) << what;
    EXPECT_LT(max_rel_error(mine.gv, ref.gv), 1e-4) << what;
    EXPECT_LT(max_rel_error(mine.gg, ref.gg), 1e-4) << what;
    EXPECT_LT(max_rel_error(mine.gb, ref.gb), 1e-5) << what;
  }
}

TEST(WnConv1dGemm, GradientsOfGradientsAreAtens) {
  // create_graph (a gradient penalty): ∂/∂(x, v, g, b) of ‖∂‖y‖²/∂x‖², through the node and
  // through aten's weight norm and convolution, both paths of the node.
  torch::manual_seed(43);
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  for (int64_t steps : {int64_t{9}, kFoldBelowSteps + 10}) {
    auto x0 = torch::randn({2, 3, steps}, opts), v0 = torch::randn({4, 3, 3}, opts);
    auto g0 = torch::rand({4, 1, 1}, opts) + 0.5, b0 = torch::randn({4}, opts);
    std::vector<torch::Tensor> second[2];
    for (bool node : {false, true}) {
      auto x = x0.clone().requires_grad_(), v = v0.clone().requires_grad_();
      auto g = g0.clone().requires_grad_(), b = b0.clone().requires_grad_();
      auto y = node ? wn_conv1d_gemm(x, v, g, b, 1, 2, 2)
                    : torch::conv1d(x, torch::_weight_norm(v, g, 0), b, 1, 2, 2);
      auto gx = torch::autograd::grad({y.pow(2).sum()}, {x}, {}, true, true)[0];
      second[node] = torch::autograd::grad({gx.pow(2).sum()}, {x, v, g, b}, {}, false, false, true);
    }
    for (size_t i = 0; i < 3; ++i)
      EXPECT_LT(max_rel_error(second[1][i], second[0][i]), 1e-10) << steps << " " << i;
  }
}

TEST(WnConv1dGemm, WNConv1dTakesItForFloatTrainingOnly) {
  torch::manual_seed(44);
  WNConv1d conv(WNConv1dOptions(6, 5, 3).dilation(3).bias(true).pad_left(3).pad_right(3));
  auto node_of = [&](const torch::Tensor& x) {
    auto y = conv->forward(x);
    return y.grad_fn() ? std::string(y.grad_fn()->name()) : std::string("none");
  };
  auto x = torch::randn({2, 6, 300}).requires_grad_();
  EXPECT_NE(node_of(x).find("WnConv1dGemm"), std::string::npos) << node_of(x);
  set_conv1d_weight_norm_fused(false);
  EXPECT_EQ(node_of(x).find("WnConv1dGemm"), std::string::npos) << "switched off: " << node_of(x);
  EXPECT_NE(node_of(x).find("Conv1dGemm"), std::string::npos) << node_of(x);
  set_conv1d_weight_norm_fused(true);
  EXPECT_TRUE(conv1d_weight_norm_fused());
  {
    torch::NoGradGuard ng;
    EXPECT_EQ(node_of(x), "none");
  }
  conv->to(torch::kDouble);
  EXPECT_EQ(node_of(x.detach().to(torch::kDouble).requires_grad_()).find("WnConv1dGemm"), std::string::npos)
      << "float64 keeps aten's weight norm";
}

// Transposed: RAVE's upsampling (kernel 2r, stride r, padding r/2: r = 2, 4, 8, and an odd r),
// a one-example batch, padding beyond the kernel's reach, stride 1, a single input step.
struct TransposedCase {
  int64_t batch, c_in, c_out, steps, kernel, stride, padding;
  bool bias;
};
const TransposedCase kTransposedCases[] = {
    {4, 6, 5, 9, 4, 2, 1, true},  {3, 4, 7, 8, 8, 4, 2, false}, {1, 3, 4, 5, 16, 8, 4, true},
    {2, 5, 3, 7, 6, 3, 1, true},  {2, 3, 2, 6, 3, 1, 1, false}, {2, 4, 3, 4, 4, 2, 3, true},
    {2, 3, 3, 1, 4, 2, 1, false},
};

TEST(ConvTranspose1dGemm, ForwardAndGradientsAreAtensInDouble) {
  torch::manual_seed(21);
  for (const TransposedCase& c : kTransposedCases) {
    const std::string what = std::to_string(c.batch) + "x" + std::to_string(c.c_in) + "x" +
                             std::to_string(c.steps) + " -> " + std::to_string(c.c_out) + ", k " +
                             std::to_string(c.kernel) + ", s " + std::to_string(c.stride) + ", p " +
                             std::to_string(c.padding);
    auto opts = torch::TensorOptions().dtype(torch::kDouble);
    auto x = torch::randn({c.batch, c.c_in, c.steps}, opts).requires_grad_();
    auto w = torch::randn({c.c_in, c.c_out, c.kernel}, opts).requires_grad_();
    auto b = c.bias ? torch::randn({c.c_out}, opts).requires_grad_() : torch::Tensor();
    ASSERT_TRUE(conv_transpose1d_gemm_applies(x, w, c.stride, c.padding)) << what;
    auto y = conv_transpose1d_gemm(x, w, b, c.stride, c.padding);
    auto g = torch::randn(y.sizes(), opts);
    y.backward(g);

    auto xr = x.detach().clone().requires_grad_();
    auto wr = w.detach().clone().requires_grad_();
    auto br = c.bias ? b.detach().clone().requires_grad_() : torch::Tensor();
    auto yr = torch::conv_transpose1d(xr, wr, br, c.stride, c.padding);
    yr.backward(g);
    ASSERT_EQ(y.sizes(), yr.sizes()) << what;
    EXPECT_LT(max_rel_error(y, yr), 1e-12) << what << ": the forward (a GEMM and a fold)";
    EXPECT_LT(max_rel_error(x.grad(), xr.grad()), 1e-12) << what;
    EXPECT_LT(max_rel_error(w.grad(), wr.grad()), 1e-12) << what;
    if (c.bias) {
      EXPECT_LT(max_rel_error(b.grad(), br.grad()), 1e-12) << what;
    }
    auto [gx_only, no_w] =
        conv_transpose1d_gemm_grads(x.detach(), w.detach(), g, c.stride, c.padding, true, false);
    EXPECT_FALSE(no_w.defined()) << what;
    EXPECT_LT(max_rel_error(gx_only, xr.grad()), 1e-12) << what;
  }
}

TEST(ConvTranspose1dGemm, FloatOutputAndGradientsAreWithinRoundingOfTheDoubleOnes) {
  // RAVE v2's first and last upsampling layers (batch 2): 1536 → 768 × 2 and 192 → 96 × 4.
  torch::manual_seed(22);
  for (const TransposedCase& c :
       {TransposedCase{2, 1536, 768, 16, 4, 2, 1, false}, TransposedCase{2, 192, 96, 512, 8, 4, 2, false}}) {
    auto x = torch::randn({c.batch, c.c_in, c.steps}).requires_grad_();
    auto w = (torch::randn({c.c_in, c.c_out, c.kernel}) * 0.05).requires_grad_();
    auto y = conv_transpose1d_gemm(x, w, {}, c.stride, c.padding);
    auto g = torch::randn(y.sizes());
    y.backward(g);
    auto xd = x.detach().to(torch::kDouble).requires_grad_();
    auto wd = w.detach().to(torch::kDouble).requires_grad_();
    auto yd = torch::conv_transpose1d(xd, wd, {}, c.stride, c.padding);
    yd.backward(g.to(torch::kDouble));
    EXPECT_LT(max_rel_error(y, yd), 1e-5) << c.c_in;
    EXPECT_LT(max_rel_error(x.grad(), xd.grad()), 1e-5) << c.c_in;
    EXPECT_LT(max_rel_error(w.grad(), wd.grad()), 1e-5) << c.c_in;
  }
}

TEST(ConvTranspose1dGemm, GradientsOfGradientsGoThroughAtensBackward) {
  torch::manual_seed(23);
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  expect_second_derivatives_are_atens(
      [](const auto& x, const auto& w, const auto& b) { return conv_transpose1d_gemm(x, w, b, 2, 1); },
      [](const auto& x, const auto& w, const auto& b) { return torch::conv_transpose1d(x, w, b, 2, 1); },
      torch::randn({2, 3, 5}, opts), torch::randn({3, 4, 4}, opts), torch::randn({4}, opts));
}

TEST(ConvTranspose1dGemm, ItTakesOnlyWhatItCanComputeAndWNConvTranspose1dUsesIt) {
  auto x = torch::randn({2, 4, 8});
  EXPECT_TRUE(conv_transpose1d_gemm_applies(x, torch::randn({4, 3, 4}), 2, 1));
  EXPECT_FALSE(conv_transpose1d_gemm_applies(x, torch::randn({3, 3, 4}), 2, 1)) << "channels";
  EXPECT_FALSE(conv_transpose1d_gemm_applies(x, torch::randn({4, 3, 2}), 1, 5)) << "no output step";
  EXPECT_FALSE(
      conv_transpose1d_gemm_applies(x.to(torch::kHalf), torch::randn({4, 3, 4}).to(torch::kHalf), 2, 1))
      << "half";
  EXPECT_THROW(conv_transpose1d_gemm(x, torch::randn({3, 3, 4}), {}, 2, 1), c10::Error);

  torch::manual_seed(24);
  WNConvTranspose1d up(WNConvTranspose1dOptions(6, 5, 8).stride(4).padding(2).bias(true));
  up->to(torch::kDouble);
  auto xd = torch::randn({2, 6, 7}, torch::kDouble).requires_grad_();
  expect_switch_changes_only_the_node(
      *up, [&] { return up->forward(xd); }, xd, "ConvTranspose1dGemm");
}

}  // namespace
}  // namespace rt::models
