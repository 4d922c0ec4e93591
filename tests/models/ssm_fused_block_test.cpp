// fused::ssm_block (models/ssm/fused_ops.h), the S5 block's body as one node computed a few
// sequences at a time: against the chain of single kernels it replaces (same masks, values and
// gradients, over several tiles), against finite differences in double, and at 1 and 2 threads.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/common/row_linear.h"
#include "models/ssm/decoders.h"
#include "models/ssm/fused_ops.h"
#include "support/expect.h"

using namespace rt::ssm;

namespace {

double max_rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / (b.abs().max() + 1e-12)).item<double>();
}

S5Block make_block(SsmKind kind, double dropout, int64_t H) {
  S5LayerOptions o;
  o.kind = kind;
  o.d_model = H;
  o.state_dim = H;
  o.scan = ScanKind::kFused;
  return S5Block(o, dropout);
}

// The block's body as the single kernels compute it (what S5BlockImpl::forward_fused ran before
// the tiled node), drawing the two dropout seeds in the same order.
torch::Tensor kernel_chain(S5BlockImpl& b, const torch::Tensor& x2, int64_t batch) {
  const double p = b.drop->is_training() ? b.drop->options.p() : 0.0;
  auto u = fused::batch_norm_module(x2, *b.norm);
  auto z = b.ssm->forward_fused_rows(u, batch);
  auto h = fused::gelu_dropout(z, u, b.ssm->feedthrough(), p, p > 0 ? fused::draw_dropout_seed() : 0);
  auto ab = rt::models::row_linear(h, torch::cat({b.glu_w1->weight, b.glu_w2->weight}, 0),
                                   torch::cat({b.glu_w1->bias, b.glu_w2->bias}, 0));
  return fused::glu_dropout_residual(ab, x2, p, p > 0 ? fused::draw_dropout_seed() : 0);
}

}  // namespace

TEST(SsmFusedBlock, EqualsTheKernelChainAcrossTilesWithDropout) {
  // 45 sequences of 25 steps: 20 sequences a tile, so three tiles, the last one short.
  const int64_t B = 45, T = 25, H = 16;
  for (SsmKind kind : {SsmKind::kS5, SsmKind::kLru}) {
    const std::string what = kind == SsmKind::kS5 ? "s5" : "lru";
    torch::manual_seed(21);
    auto tiled = make_block(kind, 0.2, H), chain = make_block(kind, 0.2, H);
    {
      torch::NoGradGuard ng;
      auto src = tiled->named_parameters();
      for (auto& p : chain->named_parameters()) p.value().copy_(src[p.key()]);
    }
    auto x = torch::randn({B, T, H}) * 1.5 + 0.3;
    auto w = torch::randn({B * T, H});
    auto xa = x.clone().requires_grad_(), xb = x.clone().requires_grad_();
    torch::manual_seed(5);
    auto ya = tiled->forward_fused(xa).reshape({B * T, H});
    torch::manual_seed(5);
    auto yb = kernel_chain(*chain, xb.reshape({B * T, H}), B);
    EXPECT_LE(max_rel_diff(ya, yb), 1e-5) << what;
    // The same masks: the dropped elements' contributions agree exactly where both are zero.
    EXPECT_TRUE(
        ((ya - xa.reshape({B * T, H})).abs() < 1e-30).equal((yb - xb.reshape({B * T, H})).abs() < 1e-30))
        << what;
    (ya * w).sum().backward();
    (yb * w).sum().backward();
    EXPECT_LE(max_rel_diff(xa.grad(), xb.grad()), 1e-5) << what;
    auto grads_b = chain->named_parameters();
    for (auto& p : tiled->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << what << " " << p.key();
      EXPECT_LE(max_rel_diff(p.value().grad(), grads_b[p.key()].grad()), 1e-4) << what << " " << p.key();
    }
    EXPECT_TRUE(tiled->norm->running_mean.allclose(chain->norm->running_mean, 1e-6, 1e-7)) << what;
    EXPECT_TRUE(tiled->norm->running_var.allclose(chain->norm->running_var, 1e-5, 1e-6)) << what;
    // Eval: running statistics, no dropout.
    tiled->eval();
    chain->eval();
    torch::NoGradGuard ng;
    EXPECT_LE(max_rel_diff(tiled->forward_fused(x).reshape({B * T, H}),
                           kernel_chain(*chain, x.reshape({B * T, H}), B)),
              1e-5)
        << what;
  }
}

// Under NoGradGuard the node keeps nothing for a backward (h, the GELU's derivative and the
// GLU's factors stay in the tile): the training forward must not change.
TEST(SsmFusedBlock, TrainingForwardWithoutGradientsIsTheSame) {
  const int64_t B = 9, T = 60, H = 16;  // 8 sequences a tile: two tiles
  torch::manual_seed(3);
  auto block = make_block(SsmKind::kS5, 0.2, H);
  auto x = torch::randn({B, T, H});
  torch::manual_seed(8);
  auto with_grad = block->forward_fused(x.clone().requires_grad_());
  ASSERT_TRUE(with_grad.requires_grad());
  torch::Tensor without;
  {
    torch::NoGradGuard ng;
    torch::manual_seed(8);
    without = block->forward_fused(x);
  }
  EXPECT_FALSE(without.requires_grad());
  EXPECT_TRUE(with_grad.detach().equal(without));
}

TEST(SsmFusedBlock, GradientsMatchFiniteDifferencesInDouble) {
  const int64_t B = 3, T = 5, H = 3, P = 2;
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  for (bool training : {true, false}) {
    torch::nn::BatchNorm1d norm(torch::nn::BatchNorm1dOptions(H).affine(false));
    norm->to(torch::kFloat64);
    if (!training) {
      torch::NoGradGuard ng;
      norm->running_mean.copy_(torch::randn({H}, f64));
      norm->running_var.copy_(torch::rand({H}, f64) + 0.5);
      norm->eval();
    }
    torch::manual_seed(31);
    std::vector<torch::Tensor> in = {torch::randn({B * T, H}, f64) * 2 + 0.5,  // x
                                     torch::randn({2 * P, H}, f64),            // w_in
                                     torch::rand({P}, f64) * 0.6 - 0.3,        // a_re
                                     torch::rand({P}, f64) * 0.6 - 0.3,        // a_im
                                     torch::randn({H, 2 * P}, f64),            // w_out
                                     torch::randn({H}, f64),                   // D
                                     torch::randn({2 * H, H}, f64),            // w_glu
                                     torch::randn({2 * H}, f64)};              // b_glu
    auto f = [&](const std::vector<torch::Tensor>& v) {
      fused::BlockWeights w{v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
      return fused::ssm_block(v[0], B, *norm, nullptr, w, training ? 0.3 : 0.0, 11, 12);
    };
    SCOPED_TRACE(training ? "training" : "eval");
    rt::testing::expect_gradients_match(f, in, 1e-6, /*relative=*/true);
  }
}

TEST(SsmFusedBlock, ResultsDoNotDependOnTheThreadCount) {
  const int saved = torch::get_num_threads();
  auto run = [](int threads) {
    torch::set_num_threads(threads);
    torch::manual_seed(41);
    auto block = make_block(SsmKind::kS5, 0.1, 16);
    auto x = (torch::randn({45, 25, 16}) * 2).requires_grad_();
    block->forward_fused(x).pow(2).sum().backward();
    std::vector<torch::Tensor> out = {x.grad()};
    for (auto& p : block->parameters()) out.push_back(p.grad());
    return out;
  };
  auto one = run(1), two = run(2);
  torch::set_num_threads(saved);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(one[i].equal(two[i])) << "gradient " << i;
}
