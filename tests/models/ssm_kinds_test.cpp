// model.ssm = s4d | lru (models/ssm/diagonal_ssm.h): each layer against its paper's recurrence
// computed here element by element in std::complex<double>, its three scans (sequential,
// parallel, fused) against one another in value and gradient, its row form, its parameter count,
// and a decoder built with it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <complex>
#include <vector>

#include "models/ssm/decoders.h"
#include "models/ssm/diagonal_ssm.h"

namespace rt::ssm {
namespace {

using cplx = std::complex<double>;
constexpr int64_t kKindBatch = 2, kKindTime = 9, kKindWidth = 3;

S5LayerOptions kind_options(SsmKind kind, ScanKind scan = ScanKind::kSequential) {
  S5LayerOptions o;
  o.kind = kind;
  o.d_model = kKindWidth;
  o.state_dim = 4;
  o.scan = scan;
  return o;
}

std::shared_ptr<SsmLayerBase> double_layer(const S5LayerOptions& o, uint64_t seed = 5) {
  torch::manual_seed(seed);
  auto layer = make_ssm_layer(o);
  layer->to(torch::kFloat64);
  return layer;
}

torch::Tensor kind_input() {
  torch::manual_seed(11);
  return torch::randn({kKindBatch, kKindTime, kKindWidth}, torch::kFloat64);
}

double element(const torch::Tensor& t, std::vector<int64_t> index) {
  torch::Tensor x = t;
  for (int64_t i : index) x = x[i];
  return x.item<double>();
}

// y[b][t][h] by S4D's recurrence (ZOH or bilinear) from the layer's parameters.
std::vector<double> s4d_by_hand(const S4dLayerImpl& l, const torch::Tensor& u, bool zoh) {
  const int64_t N = l.options().state_dim / 2;
  std::vector<double> y;
  for (int64_t b = 0; b < kKindBatch; ++b) {
    std::vector<cplx> x(static_cast<size_t>(kKindWidth * N));
    for (int64_t t = 0; t < kKindTime; ++t) {
      for (int64_t h = 0; h < kKindWidth; ++h) {
        const double dt = std::exp(element(l.log_dt, {h})), uh = element(u, {b, t, h});
        double out = element(l.D, {h}) * uh;
        for (int64_t n = 0; n < N; ++n) {
          const cplx A(-std::exp(element(l.log_A_real, {h, n})), element(l.A_imag, {h, n}));
          const cplx a_bar = zoh ? std::exp(dt * A) : (1.0 + dt / 2.0 * A) / (1.0 - dt / 2.0 * A);
          const cplx b_bar = zoh ? (a_bar - 1.0) / A : dt / (1.0 - dt / 2.0 * A);
          cplx& s = x[static_cast<size_t>(h * N + n)];
          s = a_bar * s + b_bar * uh;
          out += 2.0 * (cplx(element(l.C, {h, n, 0}), element(l.C, {h, n, 1})) * s).real();
        }
        y.push_back(out);
      }
    }
  }
  return y;
}

// y[b][t][h] by the LRU's recurrence from the layer's parameters.
std::vector<double> lru_by_hand(const LruLayerImpl& l, const torch::Tensor& u) {
  const int64_t P = l.options().state_dim;
  std::vector<double> y;
  for (int64_t b = 0; b < kKindBatch; ++b) {
    std::vector<cplx> x(static_cast<size_t>(P));
    for (int64_t t = 0; t < kKindTime; ++t) {
      for (int64_t p = 0; p < P; ++p) {
        const cplx lambda =
            std::exp(cplx(-std::exp(element(l.nu_log, {p})), std::exp(element(l.theta_log, {p}))));
        const double gamma = std::sqrt(1.0 - std::norm(lambda));
        cplx bu = 0;
        for (int64_t h = 0; h < kKindWidth; ++h)
          bu += cplx(element(l.B, {p, h, 0}), element(l.B, {p, h, 1})) * element(u, {b, t, h});
        x[static_cast<size_t>(p)] = lambda * x[static_cast<size_t>(p)] + gamma * bu;
      }
      for (int64_t h = 0; h < kKindWidth; ++h) {
        double out = element(l.D, {h}) * element(u, {b, t, h});
        for (int64_t p = 0; p < P; ++p)
          out += (cplx(element(l.C, {h, p, 0}), element(l.C, {h, p, 1})) * x[static_cast<size_t>(p)]).real();
        y.push_back(out);
      }
    }
  }
  return y;
}

void expect_values(const torch::Tensor& y, const std::vector<double>& expected, double tol) {
  ASSERT_EQ(y.numel(), static_cast<int64_t>(expected.size()));
  auto flat = y.contiguous().view({-1});
  for (int64_t i = 0; i < y.numel(); ++i)
    EXPECT_NEAR(flat[i].item<double>(), expected[static_cast<size_t>(i)], tol) << i;
}

TEST(SsmKinds, S4dFollowsItsRecurrenceUnderBothDiscretisations) {
  for (auto d : {Discretization::kZoh, Discretization::kBilinear}) {
    auto o = kind_options(SsmKind::kS4d);
    o.discretization = d;
    auto layer = double_layer(o);
    auto* s4d = dynamic_cast<S4dLayerImpl*>(layer.get());
    ASSERT_NE(s4d, nullptr);
    const auto u = kind_input();
    expect_values(layer->forward(u), s4d_by_hand(*s4d, u, d == Discretization::kZoh), 1e-10);
  }
}

TEST(SsmKinds, LruFollowsItsRecurrence) {
  auto layer = double_layer(kind_options(SsmKind::kLru));
  auto* lru = dynamic_cast<LruLayerImpl*>(layer.get());
  ASSERT_NE(lru, nullptr);
  const auto u = kind_input();
  expect_values(layer->forward(u), lru_by_hand(*lru, u), 1e-10);
  // The ring initialisation keeps every |λ| below 1.
  EXPECT_LT(torch::abs(lru->lambda()).max().item<double>(), 1.0);
}

// The three scans compute one function: the same output, and the same gradients for the input
// and every parameter (the fused kernel has its own analytic backward).
TEST(SsmKinds, SequentialParallelAndFusedScansAgreeInValueAndGradient) {
  for (auto kind : {SsmKind::kS5, SsmKind::kS4d, SsmKind::kLru}) {
    std::vector<torch::Tensor> outputs, grads;
    for (auto scan : {ScanKind::kSequential, ScanKind::kParallel, ScanKind::kFused}) {
      auto layer = double_layer(kind_options(kind, scan));
      auto u = kind_input().requires_grad_(true);
      auto y = layer->forward(u);
      (y * y).sum().backward();
      outputs.push_back(y.detach());
      std::vector<torch::Tensor> g{u.grad().view({-1})};
      for (const auto& p : layer->parameters()) g.push_back(p.grad().view({-1}));
      grads.push_back(torch::cat(g));
    }
    for (size_t i = 1; i < outputs.size(); ++i) {
      EXPECT_TRUE(torch::allclose(outputs[i], outputs[0], 1e-10, 1e-10)) << enum_name(kind) << " scan " << i;
      EXPECT_TRUE(torch::allclose(grads[i], grads[0], 1e-8, 1e-10)) << enum_name(kind) << " scan " << i;
    }
  }
}

TEST(SsmKinds, TheRowFormPlusTheFeedThroughIsTheLayer) {
  for (auto kind : {SsmKind::kS4d, SsmKind::kLru}) {
    auto layer = double_layer(kind_options(kind));
    const auto u = kind_input();
    auto rows = layer->forward_fused_rows(u.reshape({kKindBatch * kKindTime, kKindWidth}), kKindBatch);
    auto y = (rows + layer->feedthrough() * u.reshape({kKindBatch * kKindTime, kKindWidth}))
                 .view({kKindBatch, kKindTime, kKindWidth});
    EXPECT_TRUE(torch::allclose(y, layer->forward(u), 1e-10, 1e-10)) << enum_name(kind);
  }
}

TEST(SsmKinds, ParameterCountsFollowTheEquations) {
  auto count = [](const S5LayerOptions& o) {
    int64_t n = 0;
    for (const auto& p : make_ssm_layer(o)->parameters()) n += p.numel();
    return n;
  };
  S5LayerOptions o;
  o.d_model = 64;
  o.state_dim = 64;
  // S4D: per channel 32 complex A (2 reals each), 32 complex C, Δ and D: 64·(4·32 + 2).
  o.kind = SsmKind::kS4d;
  EXPECT_EQ(count(o), 64 * (4 * 32 + 2));
  // LRU: 64 complex λ (ν, θ), B [64, 64] and C [64, 64] complex, D: 2·64 + 4·64·64 + 64.
  o.kind = SsmKind::kLru;
  EXPECT_EQ(count(o), 2 * 64 + 4 * 64 * 64 + 64);
}

TEST(SsmKinds, DecodersBuildEachKindAndItsAAndStepTrainWithoutWeightDecay) {
  for (auto [kind, a_name] : {std::pair{SsmKind::kS4d, "blocks.0.ssm.log_A_real"},
                              std::pair{SsmKind::kLru, "blocks.0.ssm.nu_log"}}) {
    SsmOptions o = SsmOptions::s5_maze();
    o.kind = kind;
    o.input_dim = 10;
    o.d_model = 8;
    o.state_dim = 8;
    o.scan = ScanKind::kFused;
    auto model = make_ssm_model(o);
    auto y = model->forward(torch::randn({2, 12, 10}), 0);
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 12, 2}));
    bool found = false;
    for (const auto& p : model->named_parameters()) found = found || p.key() == a_name;
    EXPECT_TRUE(found) << a_name;
    EXPECT_TRUE(is_ssm_parameter_name(a_name));
    auto [decay, no_decay] = split_weight_decay_parameters(*model);
    EXPECT_FALSE(no_decay.empty());
  }
  EXPECT_TRUE(is_ssm_parameter_name("blocks.0.ssm.log_dt"));
  EXPECT_TRUE(is_ssm_parameter_name("blocks.0.ssm.theta_log"));
  EXPECT_FALSE(is_ssm_parameter_name("blocks.0.ssm.C"));
}

}  // namespace
}  // namespace rt::ssm
