// models/common/row_linear.h: the rows' Linear computes what aten's addmm computes, forward and
// backward, with or without oneDNN under it.
#include "models/common/row_linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/support/expect.h"

namespace rt::models {
namespace {

using rt::testing::max_rel_error;

struct Case {
  int64_t n, k, m;
  bool bias, x_grad, transposed_weight;
};

TEST(RowLinear, ForwardAndGradientsAreAddmmsOnTheShapesTheDecodersUse) {
  torch::manual_seed(3);
  // s5_maze's products (8960 rows: encoder 182 → 64, the SSM's 64 → 64, the GLU's 64 → 128,
  // the decoder's 64 → 2), a few rows, and a weight that is a transposed view.
  for (const Case& c : {Case{8960, 182, 64, true, false, false}, Case{8960, 64, 64, false, true, false},
                        Case{8960, 64, 128, true, true, false}, Case{8960, 64, 2, true, true, false},
                        Case{3, 5, 7, true, true, false}, Case{300, 40, 24, false, true, true}}) {
    auto x = torch::randn({c.n, c.k}).requires_grad_(c.x_grad);
    auto w = (c.transposed_weight ? torch::randn({c.k, c.m}).t() : torch::randn({c.m, c.k})).requires_grad_();
    auto b = c.bias ? torch::randn({c.m}).requires_grad_() : torch::Tensor();
    auto g = torch::randn({c.n, c.m});
    auto y = row_linear(x, w, b);
    y.backward(g);
    // The reference in float64, from the same float32 values.
    auto xd = x.detach().to(torch::kDouble).requires_grad_(c.x_grad);
    auto wd = w.detach().to(torch::kDouble).requires_grad_();
    auto bd = c.bias ? b.detach().to(torch::kDouble).requires_grad_() : torch::Tensor();
    auto yd = c.bias ? torch::addmm(bd, xd, wd.t()) : torch::mm(xd, wd.t());
    yd.backward(g.to(torch::kDouble));
    const std::string what = std::to_string(c.n) + "x" + std::to_string(c.k) + " -> " + std::to_string(c.m);
    ASSERT_EQ(y.sizes(), yd.sizes()) << what;
    EXPECT_LT(max_rel_error(y, yd), 1e-5) << what;
    EXPECT_LT(max_rel_error(w.grad(), wd.grad()), 1e-5) << what;
    if (c.x_grad) {
      EXPECT_LT(max_rel_error(x.grad(), xd.grad()), 1e-5) << what;
    } else {
      EXPECT_FALSE(x.grad().defined()) << what;
    }
    if (c.bias) {
      EXPECT_LT(max_rel_error(b.grad(), bd.grad()), 1e-5) << what;
    }
  }
}

TEST(RowLinear, DoubleAndReducedPrecisionTakeAtensOwnProducts) {
  torch::manual_seed(4);
  auto x = torch::randn({50, 9}, torch::kDouble).requires_grad_();
  auto w = torch::randn({4, 9}, torch::kDouble).requires_grad_();
  auto b = torch::randn({4}, torch::kDouble);
  auto y = row_linear(x, w, b);
  EXPECT_EQ(y.scalar_type(), torch::kDouble);
  EXPECT_TRUE(torch::allclose(y, torch::addmm(b, x, w.t())));
  y.sum().backward();
  auto xr = x.detach().clone().requires_grad_();
  torch::addmm(b, xr, w.detach().t()).sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad(), xr.grad()));
}

}  // namespace
}  // namespace rt::models
