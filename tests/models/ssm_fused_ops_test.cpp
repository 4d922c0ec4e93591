// The fused S5-block kernels (models/ssm/fused_ops.h): finite-difference gradients in double,
// the fused block against the op-by-op block, the hash dropout's mask, and BatchNorm running
// statistics against torch's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <vector>

#include "models/ssm/decoders.h"
#include "models/ssm/fused_ops.h"
#include "support/expect.h"
#include "util/torch_compat.h"

using namespace rt::ssm;

namespace {

auto f64() { return torch::TensorOptions().dtype(torch::kFloat64); }

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

using rt::testing::expect_gradients_match;

}  // namespace

TEST(SsmFusedOps, DropoutGradientMatchesFiniteDifferences) {
  torch::manual_seed(1);
  expect_gradients_match([](const std::vector<torch::Tensor>& in) { return fused::dropout(in[0], 0.3, 99); },
                         {torch::randn({7, 5}, f64())});
}

TEST(SsmFusedOps, BatchNormGradientMatchesFiniteDifferences) {
  torch::manual_seed(2);
  expect_gradients_match(
      [](const std::vector<torch::Tensor>& in) { return fused::batch_norm_rows(in[0], 1e-5); },
      {torch::randn({9, 4}, f64()) * 2 + 1});
}

TEST(SsmFusedOps, GeluDropoutGradientMatchesFiniteDifferences) {
  torch::manual_seed(3);
  expect_gradients_match(
      [](const std::vector<torch::Tensor>& in) { return fused::gelu_dropout(in[0], in[1], in[2], 0.25, 7); },
      {torch::randn({6, 5}, f64()) * 2, torch::randn({6, 5}, f64()), torch::randn({5}, f64())});
  expect_gradients_match(
      [](const std::vector<torch::Tensor>& in) { return fused::gelu_dropout(in[0], {}, {}, 0.0, 0); },
      {torch::randn({6, 5}, f64()) * 2});
}

TEST(SsmFusedOps, GluDropoutResidualGradientMatchesFiniteDifferences) {
  torch::manual_seed(4);
  expect_gradients_match(
      [](const std::vector<torch::Tensor>& in) { return fused::glu_dropout_residual(in[0], in[1], 0.2, 11); },
      {torch::randn({6, 8}, f64()) * 3, torch::randn({6, 4}, f64())});
}

TEST(SsmFusedOps, KernelsMatchTorchOpsInFloat) {
  torch::manual_seed(5);
  auto z = torch::randn({300, 16}) * 3, u = torch::randn({300, 16}), D = torch::randn({16});
  auto ref = torch::gelu(z + D * u, "tanh");
  EXPECT_LE(max_abs_diff(fused::gelu_dropout(z, u, D, 0.0, 0), ref), 2e-6);
  auto ab = torch::randn({300, 32}) * 8, res = torch::randn({300, 16});
  auto glu = res + ab.narrow(1, 0, 16) * torch::sigmoid(ab.narrow(1, 16, 16));
  EXPECT_LE(max_abs_diff(fused::glu_dropout_residual(ab, res, 0.0, 0), glu), 5e-6);
  auto x = torch::randn({300, 16}) * 4 + 2;
  auto bn = torch::batch_norm(x, {}, {}, {}, {}, true, 0.1, 1e-5, false);
  EXPECT_LE(max_abs_diff(fused::batch_norm_rows(x, 1e-5), bn), 1e-5);
}

TEST(SsmFusedOps, DropoutMaskStatisticsAndScale) {
  auto x = torch::ones({400, 250});
  for (double p : {0.05, 0.5}) {
    auto y = fused::dropout(x, p, 1234);
    const double keep = (y != 0).to(torch::kFloat64).mean().item<double>();
    EXPECT_NEAR(keep, 1 - p, 0.01) << "p = " << p;  // 1e5 draws: sd ≈ 0.0016
    auto kept = y.masked_select(y != 0);
    EXPECT_LE((kept - 1.0 / (1.0 - p)).abs().max().item<double>(), 1e-6);
    // Columns and rows are both mixed: no row or column keeps everything at p = 0.5.
    if (p == 0.5) {
      EXPECT_LT((y != 0).to(torch::kFloat64).mean(0).max().item<double>(), 0.7);
      EXPECT_LT((y != 0).to(torch::kFloat64).mean(1).max().item<double>(), 0.7);
    }
  }
  EXPECT_TRUE(fused::dropout(x, 0.0, 1).equal(x));
}

TEST(SsmFusedOps, DropoutMaskIsTheSameInBackwardAndDependsOnTheSeedOnly) {
  auto x = torch::rand({50, 30}).add_(0.5).requires_grad_();
  auto y = fused::dropout(x, 0.3, 77);
  y.sum().backward();
  // d(sum y)/dx = mask / (1 − p), the same mask the forward applied.
  EXPECT_TRUE(x.grad().mul(x.detach()).allclose(y.detach(), 1e-6, 1e-7));
  for (int64_t r = 0; r < 50; r += 7) {
    for (int64_t c = 0; c < 30; ++c) {
      EXPECT_EQ(fused::dropout_keeps(77, r, c, 0.3), y[r][c].item<double>() != 0);
    }
  }
  auto other = fused::dropout(x.detach(), 0.3, 78);
  EXPECT_FALSE(other.equal(y.detach()));
  EXPECT_TRUE(fused::dropout(x.detach(), 0.3, 77).equal(y.detach()));
}

TEST(SsmFusedOps, ResultsDoNotDependOnTheThreadCount) {
  const int saved = torch::get_num_threads();
  auto run = [](int threads) {
    torch::set_num_threads(threads);
    torch::manual_seed(6);
    auto x = (torch::randn({2000, 24}) * 2).requires_grad_();
    auto u = torch::randn({2000, 24}).requires_grad_();
    auto D = torch::randn({24}).requires_grad_();
    auto n = fused::batch_norm_rows(x, 1e-5);
    auto h = fused::gelu_dropout(n, u, D, 0.1, 5);
    // (No matmul here: BLAS results may depend on its own threading.)
    auto out = fused::glu_dropout_residual(torch::cat({h, h * 0.5 + 0.1}, 1), x, 0.1, 6);
    out.pow(2).sum().backward();
    return std::vector<torch::Tensor>{out.detach(), x.grad(), u.grad(), D.grad()};
  };
  auto one = run(1), two = run(2);
  torch::set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(one[i].equal(two[i])) << "tensor " << i;
}

TEST(SsmFusedOps, BatchNormModuleRunningStatsMatchTorch) {
  for (bool cumulative : {false, true}) {
    auto opts = torch::nn::BatchNorm1dOptions(6).affine(false);
    if (cumulative) opts.momentum(rt::compat::nullopt);
    torch::nn::BatchNorm1d ours(opts), ref(opts);
    torch::manual_seed(7);
    for (int step = 0; step < 4; ++step) {
      auto x = torch::randn({40, 6}) * (1 + step) + step;
      auto y = fused::batch_norm_module(x, *ours);
      auto y_ref = ref(x);
      EXPECT_LE(max_abs_diff(y, y_ref), 1e-5);
    }
    EXPECT_LE(max_abs_diff(ours->running_mean, ref->running_mean), 1e-6) << "cumulative " << cumulative;
    EXPECT_LE(max_abs_diff(ours->running_var, ref->running_var), 1e-5) << "cumulative " << cumulative;
    EXPECT_EQ(ours->num_batches_tracked.item<int64_t>(), 4);
    EXPECT_GT(ours->running_var.min().item<double>(), 1.0);  // the updates happened
    ours->eval();
    ref->eval();
    auto x = torch::randn({10, 6});
    EXPECT_LE(max_abs_diff(fused::batch_norm_module(x, *ours), ref(x)), 1e-5);
  }
  // Without running statistics: batch statistics in eval, nothing to update.
  torch::nn::BatchNorm1d plain(torch::nn::BatchNorm1dOptions(3).affine(false).track_running_stats(false));
  plain->eval();
  auto x = torch::randn({20, 3}) * 3 + 1;
  EXPECT_LE(max_abs_diff(fused::batch_norm_module(x, *plain), plain(x)), 1e-5);
  plain->train();
  EXPECT_THROW(fused::batch_norm_module(torch::randn({1, 3}), *plain), c10::Error);
}

namespace {

// Two identical s5_maze-style blocks (d_model 8, state 8) on the fused scan, one on each path.
struct BlockPair {
  S5Block fused{nullptr}, plain{nullptr};
  explicit BlockPair(double dropout, torch::Dtype dtype = torch::kFloat32) {
    S5LayerOptions o;
    o.d_model = 8;
    o.state_dim = 8;
    o.scan = ScanKind::kFused;
    torch::manual_seed(8);
    fused = S5Block(o, dropout);
    plain = S5Block(o, dropout);
    fused->to(dtype);
    plain->to(dtype);
    torch::NoGradGuard ng;
    auto src = fused->named_parameters();
    for (auto& p : plain->named_parameters()) p.value().copy_(src[p.key()]);
    plain->fused_kernels = false;
  }
};

}  // namespace

TEST(SsmFusedOps, FusedBlockMatchesUnfusedBlockValuesAndGradients) {
  BlockPair pair(0.0);
  ASSERT_TRUE(pair.fused->uses_fused_kernels(torch::zeros({1, 1, 8})));
  ASSERT_FALSE(pair.plain->uses_fused_kernels(torch::zeros({1, 1, 8})));
  torch::manual_seed(9);
  auto x = torch::randn({4, 25, 8}) * 2 + 0.5;
  auto w = torch::randn({4, 25, 8});
  auto xa = x.clone().requires_grad_(), xb = x.clone().requires_grad_();
  auto ya = pair.fused(xa), yb = pair.plain(xb);
  EXPECT_LE(max_abs_diff(ya, yb), 1e-5);
  (ya * w).sum().backward();
  (yb * w).sum().backward();
  EXPECT_LE(max_abs_diff(xa.grad(), xb.grad()), 1e-5);
  auto grads_b = pair.plain->named_parameters();
  for (auto& p : pair.fused->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    const double scale = std::max(1.0, grads_b[p.key()].grad().abs().max().item<double>());
    EXPECT_LE(max_abs_diff(p.value().grad(), grads_b[p.key()].grad()) / scale, 1e-5) << p.key();
  }
  EXPECT_LE(max_abs_diff(pair.fused->norm->running_mean, pair.plain->norm->running_mean), 1e-6);
  EXPECT_LE(max_abs_diff(pair.fused->norm->running_var, pair.plain->norm->running_var), 1e-5);
  EXPECT_EQ(pair.fused->norm->num_batches_tracked.item<int64_t>(), 1);
  // Eval: running statistics on both paths.
  pair.fused->eval();
  pair.plain->eval();
  torch::NoGradGuard ng;
  EXPECT_LE(max_abs_diff(pair.fused(x), pair.plain(x)), 1e-5);
}

TEST(SsmFusedOps, FusedBlockDropoutFollowsManualSeedAndIsOffInEval) {
  BlockPair pair(0.3);
  auto x = torch::randn({2, 10, 8});
  torch::NoGradGuard ng;
  torch::manual_seed(10);
  auto a = pair.fused(x);
  torch::manual_seed(10);
  auto b = pair.fused(x);
  torch::manual_seed(11);
  auto c = pair.fused(x);
  EXPECT_TRUE(a.equal(b));
  EXPECT_FALSE(a.equal(c));
  pair.fused->eval();
  pair.plain->eval();
  auto bufs = pair.fused->named_buffers();
  for (auto& b : pair.plain->named_buffers()) b.value().copy_(bufs[b.key()]);  // running stats
  torch::manual_seed(12);
  auto e1 = pair.fused(x);
  torch::manual_seed(13);
  EXPECT_TRUE(e1.equal(pair.fused(x)));
  EXPECT_LE(max_abs_diff(pair.fused(x), pair.plain(x)), 1e-5);
}

TEST(SsmFusedOps, S5MazeDecoderWithFusedBlocksTrains) {
  SsmOptions o = SsmOptions::s5_maze();
  o.input_dim = 12;
  o.d_model = 16;
  o.state_dim = 16;
  o.scan = ScanKind::kFused;
  torch::manual_seed(12);
  auto model = make_ssm_model(o);
  ASSERT_TRUE(model->blocks.front()->uses_fused_kernels(torch::zeros({1, 1, 16})));
  auto x = torch::rand({8, 30, 12});
  auto y = torch::sin(x.cumsum(1).narrow(2, 0, 2) * 0.3);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-2));
  double first = 0, last = 0;
  for (int i = 0; i < 40; ++i) {
    opt.zero_grad();
    auto loss = torch::mse_loss(model->forward(x, 0), y);
    loss.backward();
    opt.step();
    (i == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.5 * first);
}
