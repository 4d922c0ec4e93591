// S5 layer: scans, HiPPO initialisation, discretisation and gradients.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <complex>

#include "models/ssm/s5.h"
#include "util/error.h"

namespace rt::ssm {
namespace {

using cd = std::complex<double>;

torch::Tensor complex_tensor(const std::vector<std::vector<cd>>& rows) {
  // rows[t][p] → [1, T, P] complex128
  const auto T = static_cast<int64_t>(rows.size()), P = static_cast<int64_t>(rows[0].size());
  auto re = torch::zeros({1, T, P}, torch::kFloat64), im = torch::zeros({1, T, P}, torch::kFloat64);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t p = 0; p < P; ++p) {
      re[0][t][p] = rows[t][p].real();
      im[0][t][p] = rows[t][p].imag();
    }
  }
  return torch::complex(re, im);
}

TEST(SsmScan, BothScansMatchAHandComputedRecurrence) {
  // Two states, a = (0.5, 0.5i), four steps. By hand:
  //   state 0: x = 1, 0.5·1 + 0 = 0.5, 0.5·0.5 + 2 = 2.25, 0.5·2.25 + 0 = 1.125
  //   state 1: x = 1, 0.5i·1 + i = 1.5i, 0.5i·1.5i + 0 = −0.75, 0.5i·(−0.75) + 0 = −0.375i
  auto b = complex_tensor({{1.0, 1.0}, {0.0, cd(0, 1)}, {2.0, 0.0}, {0.0, 0.0}});
  auto a = complex_tensor({{0.5, cd(0, 0.5)}}).squeeze(0).expand({4, 2});
  auto expected = complex_tensor({{1.0, 1.0}, {0.5, cd(0, 1.5)}, {2.25, -0.75}, {1.125, cd(0, -0.375)}});
  for (auto* scan : {&scan_sequential, &scan_parallel}) {
    auto x = (*scan)(a, b);
    ASSERT_EQ(x.sizes(), b.sizes());
    EXPECT_TRUE(torch::allclose(x, expected, 0, 1e-12)) << x;
  }
}

TEST(SsmScan, ParallelAgreesWithSequentialOnLongRandomSequences) {
  torch::manual_seed(3);
  for (int64_t T : {1, 2, 7, 64, 140}) {
    auto mag = torch::rand({T, 8}) * 0.3 + 0.69;
    auto phase = torch::rand({T, 8}) * 6.28;
    auto a = torch::polar(mag, phase);  // time-varying here, to exercise the general operator
    auto b = torch::complex(torch::randn({3, T, 8}), torch::randn({3, T, 8}));
    auto seq = scan_sequential(a, b);
    auto par = scan_parallel(a, b);
    EXPECT_LE((seq - par).abs().max().item<double>(), 1e-5) << "T=" << T;
    // Batched a [B, T, P] too.
    auto a3 = a.unsqueeze(0).expand({3, T, 8});
    EXPECT_LE((scan_parallel(a3, b) - seq).abs().max().item<double>(), 1e-5);
  }
}

TEST(SsmHippo, EigenvaluesHaveNegativeRealPartsAndComeInConjugatePairs) {
  const int64_t n = 16;
  auto h = make_dplr_hippo(n);
  ASSERT_EQ(h.lambda.sizes(), torch::IntArrayRef({n}));
  EXPECT_TRUE((torch::real(h.lambda) < 0).all().item<bool>());
  EXPECT_NEAR(torch::real(h.lambda).mean().item<double>(), -0.5, 1e-12);
  // Ascending ω: λ_k and λ_{n−1−k} are conjugates.
  auto flipped = h.lambda.flip(0).conj();
  EXPECT_TRUE(torch::allclose(h.lambda, flipped.resolve_conj(), 1e-9, 1e-9));
  EXPECT_GT(torch::imag(h.lambda).abs().min().item<double>(), 1e-3);
  // V diagonalises the normal HiPPO matrix: S = V Λ Vᴴ.
  auto k = torch::arange(n, torch::kFloat64);
  auto q = torch::sqrt(1 + 2 * k);
  auto A = -(torch::tril(q.unsqueeze(1) * q.unsqueeze(0)) - torch::diag(k));
  auto p = torch::sqrt(k + 0.5);
  auto S = (A + p.unsqueeze(1) * p.unsqueeze(0)).to(torch::kComplexDouble);
  auto rebuilt = torch::matmul(h.V * h.lambda.unsqueeze(0), h.V.conj().t());
  EXPECT_LE((rebuilt - S).abs().max().item<double>(), 1e-9);
}

TEST(SsmLayer, InitialisationFollowsS5) {
  torch::manual_seed(0);
  S5LayerOptions o;
  o.d_model = 8;
  o.state_dim = 16;
  o.ssm_blocks = 2;
  S5Layer layer(o);
  EXPECT_EQ(layer->stored_states(), 8);  // conjugate symmetry halves the states
  EXPECT_EQ(layer->B.sizes(), torch::IntArrayRef({8, 8, 2}));
  EXPECT_EQ(layer->C.sizes(), torch::IntArrayRef({8, 8, 2}));
  EXPECT_EQ(layer->D.sizes(), torch::IntArrayRef({8}));
  EXPECT_EQ(layer->Lambda_re.scalar_type(), torch::kFloat32);
  // Two blocks of the 8-state HiPPO: the first half of the eigenvalues repeats.
  EXPECT_TRUE(torch::equal(layer->Lambda_im.narrow(0, 0, 4), layer->Lambda_im.narrow(0, 4, 4)));
  EXPECT_TRUE((layer->Lambda_im < 0).all().item<bool>());  // one of each conjugate pair
  auto step = torch::exp(layer->log_step);
  EXPECT_GE(step.min().item<double>(), 1e-3 - 1e-9);
  EXPECT_LE(step.max().item<double>(), 1e-1 + 1e-9);
  // All discrete eigenvalues inside the unit circle.
  EXPECT_LT(layer->discretize().first.abs().max().item<double>(), 1.0);

  S5LayerOptions full = o;
  full.conj_sym = false;
  EXPECT_EQ(S5Layer(full)->stored_states(), 16);
}

TEST(SsmLayer, RealPartOfLambdaIsClipped) {
  S5Layer layer(S5LayerOptions{});
  {
    torch::NoGradGuard g;
    layer->Lambda_re.fill_(0.3);
  }
  EXPECT_NEAR(torch::real(layer->lambda()).max().item<double>(), -1e-4, 1e-9);
}

TEST(SsmLayer, DiscretisationMatchesClosedForms) {
  torch::manual_seed(1);
  S5LayerOptions o;
  o.d_model = 2;
  o.state_dim = 4;
  S5Layer layer(o);
  layer->to(torch::kFloat64);
  const cd lam(-0.7, 2.0);
  const double dt = 0.05;
  {
    torch::NoGradGuard g;
    layer->Lambda_re.fill_(lam.real());
    layer->Lambda_im.fill_(lam.imag());
    layer->log_step.fill_(std::log(dt));
  }
  const cd b0(layer->B[0][0][0].item<double>(), layer->B[0][0][1].item<double>());
  auto check = [&](Discretization d, cd lambda_bar, cd b_bar) {
    layer->set_discretization(d);
    auto [Lb, Bb] = layer->discretize();
    EXPECT_NEAR(torch::real(Lb[0]).item<double>(), lambda_bar.real(), 1e-12);
    EXPECT_NEAR(torch::imag(Lb[0]).item<double>(), lambda_bar.imag(), 1e-12);
    EXPECT_NEAR(torch::real(Bb[0][0]).item<double>(), b_bar.real(), 1e-12);
    EXPECT_NEAR(torch::imag(Bb[0][0]).item<double>(), b_bar.imag(), 1e-12);
  };
  const cd zoh = std::exp(lam * dt);
  check(Discretization::kZoh, zoh, (zoh - 1.0) / lam * b0);
  const cd bl = 1.0 / (1.0 - dt / 2 * lam);
  check(Discretization::kBilinear, bl * (1.0 + dt / 2 * lam), bl * dt * b0);
}

TEST(SsmLayer, ForwardMatchesAnExplicitComplexRecurrence) {
  torch::manual_seed(2);
  S5LayerOptions o;
  o.d_model = 3;
  o.state_dim = 4;
  S5Layer layer(o);
  layer->to(torch::kFloat64);
  auto u = torch::randn({1, 6, 3}, torch::kFloat64);
  auto y = layer->forward(u);
  torch::NoGradGuard g;
  auto [Lb, Bb] = layer->discretize();
  auto Ct = torch::view_as_complex(layer->C);
  auto x = torch::zeros({2}, torch::kComplexDouble);
  for (int64_t t = 0; t < 6; ++t) {
    auto ut = u[0][t].to(torch::kComplexDouble);
    x = Lb * x + torch::matmul(Bb, ut);
    auto yt = 2.0 * torch::real(torch::matmul(Ct, x)) + layer->D * u[0][t];
    EXPECT_TRUE(torch::allclose(y[0][t], yt, 1e-10, 1e-10)) << "t=" << t;
  }
}

// Central finite differences in double precision against autograd, for every parameter and
// the input, both scans and both discretisations.
TEST(SsmLayer, GradientsMatchFiniteDifferences) {
  for (auto disc : {Discretization::kZoh, Discretization::kBilinear}) {
    for (auto scan : {ScanKind::kParallel, ScanKind::kSequential}) {
      torch::manual_seed(4);
      S5LayerOptions o;
      o.d_model = 3;
      o.state_dim = 4;
      o.discretization = disc;
      o.scan = scan;
      S5Layer layer(o);
      layer->to(torch::kFloat64);
      {
        torch::NoGradGuard g;  // larger steps make the test sensitive to the discretisation
        layer->log_step.fill_(std::log(0.3));
      }
      auto u = torch::randn({2, 5, 3}, torch::kFloat64).requires_grad_(true);
      auto w = torch::randn({2, 5, 3}, torch::kFloat64);
      auto loss_fn = [&] { return (layer->forward(u) * w).sum(); };
      auto loss = loss_fn();
      std::vector<torch::Tensor> inputs;
      for (auto& p : layer->parameters()) inputs.push_back(p);
      inputs.push_back(u);
      auto grads = torch::autograd::grad({loss}, inputs);
      const double eps = 1e-6;
      for (size_t i = 0; i < inputs.size(); ++i) {
        auto flat = inputs[i].detach().view(-1);
        auto g = grads[i].view(-1);
        for (int64_t k = 0; k < flat.numel(); ++k) {
          torch::NoGradGuard ng;
          const double orig = flat[k].item<double>();
          flat[k] = orig + eps;
          const double up = loss_fn().item<double>();
          flat[k] = orig - eps;
          const double down = loss_fn().item<double>();
          flat[k] = orig;
          const double numeric = (up - down) / (2 * eps);
          EXPECT_NEAR(g[k].item<double>(), numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
              << "input " << i << " element " << k << " disc " << enum_name(disc) << " scan "
              << enum_name(scan);
        }
      }
    }
  }
}

TEST(SsmLayer, OptionErrorsNameTheKey) {
  S5LayerOptions o;
  o.state_dim = 64;
  o.ssm_blocks = 3;
  try {
    S5Layer layer(o);
    FAIL() << "expected rt::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.ssm_blocks"), std::string::npos) << e.what();
  }
  try {
    parse_enum<ScanKind>("fast", "model.scan");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.scan = \"fast\""), std::string::npos) << e.what();
  }
  EXPECT_TRUE(is_ssm_parameter_name("blocks.0.ssm.Lambda_re"));
  EXPECT_TRUE(is_ssm_parameter_name("log_step"));
  EXPECT_FALSE(is_ssm_parameter_name("blocks.0.ssm.B"));
  EXPECT_FALSE(is_ssm_parameter_name("my_log_step"));
}

}  // namespace
}  // namespace rt::ssm
