// The fused CPU recurrence (complex_recurrence) and the S5 layer's "fused" scan against the
// complex scans: values and gradients.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/ssm/decoders.h"
#include "models/ssm/s5.h"

using namespace rt::ssm;

TEST(SsmFusedScan, MatchesSequentialComplexScanAndItsGradients) {
  torch::manual_seed(3);
  const int64_t B = 3, T = 37, P = 5;
  auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  auto mag = torch::rand({P}, opt) * 0.5 + 0.45;
  auto ang = torch::rand({P}, opt) * 3.0;
  auto a_re = (mag * torch::cos(ang)).requires_grad_();
  auto a_im = (mag * torch::sin(ang)).requires_grad_();
  auto bu = torch::randn({B, T, 2 * P}, opt).requires_grad_();
  auto w = torch::randn({B, T, 2 * P}, opt);  // a random linear functional of x

  auto x = complex_recurrence(a_re, a_im, bu);
  (x * w).sum().backward();
  auto g_are = a_re.grad().clone(), g_aim = a_im.grad().clone(), g_bu = bu.grad().clone();
  a_re.grad().zero_();
  a_im.grad().zero_();
  bu.grad().zero_();

  auto a = torch::complex(a_re, a_im).unsqueeze(0).expand({T, P});
  auto ref = scan_sequential(a, torch::complex(bu.narrow(2, 0, P), bu.narrow(2, P, P)));
  auto ref_x = torch::cat({torch::real(ref), torch::imag(ref)}, 2);
  EXPECT_LE((x - ref_x).abs().max().item<double>(), 1e-10);
  (ref_x * w).sum().backward();
  EXPECT_LE((g_bu - bu.grad()).abs().max().item<double>(), 1e-10);
  EXPECT_LE((g_are - a_re.grad()).abs().max().item<double>(), 1e-9);
  EXPECT_LE((g_aim - a_im.grad()).abs().max().item<double>(), 1e-9);
  EXPECT_GT(g_are.abs().max().item<double>(), 1e-3);  // the comparison is not between zeros
}

TEST(SsmFusedScan, GradcheckInDouble) {
  torch::manual_seed(4);
  auto opt = torch::TensorOptions().dtype(torch::kFloat64);
  auto a_re = (torch::rand({3}, opt) * 0.6).requires_grad_();
  auto a_im = (torch::rand({3}, opt) * 0.6).requires_grad_();
  auto bu = torch::randn({2, 6, 6}, opt).requires_grad_();
  // Central differences of a scalar functional against the analytic gradient.
  auto w = torch::randn({2, 6, 6}, opt);
  auto f = [&](const torch::Tensor& ar, const torch::Tensor& ai, const torch::Tensor& b) {
    return (complex_recurrence(ar, ai, b) * w).sum();
  };
  f(a_re, a_im, bu).backward();
  const double eps = 1e-6;
  for (int64_t p = 0; p < 3; ++p) {
    torch::NoGradGuard ng;
    auto plus = a_re.detach().clone(), minus = a_re.detach().clone();
    plus[p] += eps;
    minus[p] -= eps;
    const double num =
        (f(plus, a_im.detach(), bu.detach()) - f(minus, a_im.detach(), bu.detach())).item<double>() /
        (2 * eps);
    EXPECT_NEAR(a_re.grad()[p].item<double>(), num, 1e-6);
    auto iplus = a_im.detach().clone(), iminus = a_im.detach().clone();
    iplus[p] += eps;
    iminus[p] -= eps;
    const double inum =
        (f(a_re.detach(), iplus, bu.detach()) - f(a_re.detach(), iminus, bu.detach())).item<double>() /
        (2 * eps);
    EXPECT_NEAR(a_im.grad()[p].item<double>(), inum, 1e-6);
  }
}

TEST(SsmFusedScan, S5LayerFusedEqualsParallelInValueAndGradient) {
  for (auto disc : {Discretization::kZoh, Discretization::kBilinear}) {
    torch::manual_seed(5);
    S5LayerOptions o;
    o.d_model = 8;
    o.state_dim = 12;
    o.discretization = disc;
    S5Layer layer(o);
    auto u = torch::randn({4, 29, 8});
    auto w = torch::randn({4, 29, 8});
    std::vector<torch::Tensor> grads[2];
    torch::Tensor outs[2];
    int i = 0;
    for (auto scan : {ScanKind::kParallel, ScanKind::kFused}) {
      layer->set_scan(scan);
      layer->zero_grad();
      outs[i] = layer(u);
      (outs[i] * w).sum().backward();
      for (const auto& p : layer->parameters()) grads[i].push_back(p.grad().clone());
      ++i;
    }
    EXPECT_LE((outs[0] - outs[1]).abs().max().item<double>(), 1e-4);
    for (size_t k = 0; k < grads[0].size(); ++k) {
      const double scale = std::max(1.0, grads[0][k].abs().max().item<double>());
      EXPECT_LE((grads[0][k] - grads[1][k]).abs().max().item<double>() / scale, 1e-3) << "parameter " << k;
    }
  }
  EXPECT_EQ(rt::parse_enum<ScanKind>("fused", "model.scan"), ScanKind::kFused);
  EXPECT_STREQ(rt::enum_name(ScanKind::kFused), "fused");
}
