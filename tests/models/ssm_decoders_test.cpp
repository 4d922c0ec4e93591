// SSM decoders: shapes, groups, weight-decay split, R², and a short training sanity run.
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <set>
#include <string_view>

#include "models/ssm/decoders.h"
#include "util/error.h"

namespace rt::ssm {
namespace {

int64_t count_parameters(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

TEST(SsmDecoders, S5MazeMapsSpikesToVelocity) {
  torch::manual_seed(0);
  auto opts = SsmOptions::s5_maze();
  S5Decoder model(opts);
  auto y = model->forward(torch::randn({2, 140, 182}), 0);
  EXPECT_EQ(y.sizes(), torch::IntArrayRef({2, 140, 2}));
  // encoder 182·64+64, decoder 64·2+2, one block: GLU 2·(64·64+64), S5: Λ 2·32, B 32·64·2,
  // C 64·32·2, D 64, log_step 32 (BatchNorm has no affine parameters).
  const int64_t expected =
      (182 * 64 + 64) + (64 * 2 + 2) + 2 * (64 * 64 + 64) + 2 * 32 + 32 * 64 * 2 + 64 * 32 * 2 + 64 + 32;
  EXPECT_EQ(count_parameters(*model), expected);
  std::set<std::string> names;
  for (const auto& p : model->named_parameters()) names.insert(p.key());
  EXPECT_TRUE(names.count("blocks.0.ssm.Lambda_re"));
  EXPECT_TRUE(names.count("encoder.weight"));
  EXPECT_TRUE(names.count("decoder.bias"));
}

std::atomic<int> g_host_reads{0};

std::unique_ptr<at::ObserverContext> count_host_read(const at::RecordFunction& fn) {
  const std::string_view name = fn.name();
  if (name == "aten::item" || name == "aten::_local_scalar_dense") g_host_reads.fetch_add(1);
  return nullptr;
}

// The loop's promise (0 host synchronisations between log steps) starts here: a training forward
// and backward of one process reads no value back to the host, fused block or op-by-op.
TEST(SsmDecoders, ATrainingStepReadsNothingBackToTheHost) {
  for (const bool fused : {true, false}) {
    torch::manual_seed(0);
    auto opts = SsmOptions::s5_maze();
    opts.scan = ScanKind::kFused;
    S5Decoder model(opts);
    model->set_fused_kernels(fused);
    model->train();
    const auto x = torch::randn({2, 20, 182});
    model->forward(x, 0).square().mean().backward();  // first step: lazy initialisation may read
    g_host_reads = 0;
    auto handle =
        at::addGlobalCallback(at::RecordFunctionCallback(&count_host_read)
                                  .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    model->forward(x, 0).square().mean().backward();
    at::removeCallback(handle);
    EXPECT_EQ(g_host_reads.load(), 0) << (fused ? "fused block" : "op-by-op block");
  }
}

TEST(SsmDecoders, FoundationalUsesOneEncoderPerGroupAndPadsInputs) {
  torch::manual_seed(1);
  auto opts = SsmOptions::foundational();
  opts.input_dim = 40;
  opts.d_model = 32;
  opts.state_dim = 16;
  opts.n_layers = 2;
  opts.dropout = 0.0;
  FoundationalDecoder model(opts, 3);
  model->eval();
  EXPECT_EQ(model->encoders.size(), 3u);
  EXPECT_EQ(model->encoders[0]->weight.sizes(), torch::IntArrayRef({32 - 8, 40}));
  EXPECT_EQ(model->context->weight.sizes(), torch::IntArrayRef({3, 8}));
  auto x = torch::randn({2, 20, 25});  // a narrower group: zero-padded to 40 inside
  auto y0 = model->forward(x, 0);
  EXPECT_EQ(y0.sizes(), torch::IntArrayRef({2, 20, 2}));
  auto padded = torch::constant_pad_nd(x, {0, 15});
  EXPECT_TRUE(torch::allclose(model->forward(padded, 0), y0, 1e-6, 1e-6));
  EXPECT_FALSE(torch::allclose(model->forward(x, 1), y0, 1e-3, 1e-3));
  EXPECT_THROW(model->forward(x, 3), c10::Error);
  // One shared readout.
  std::set<std::string> names;
  for (const auto& p : model->named_parameters()) names.insert(p.key());
  EXPECT_TRUE(names.count("encoders.2.weight"));
  EXPECT_TRUE(names.count("decoder.weight"));
  EXPECT_TRUE(names.count("blocks.1.ssm.log_step"));

  auto built = make_ssm_model(opts, 2);
  EXPECT_NE(dynamic_cast<FoundationalDecoderImpl*>(built.get()), nullptr);
}

TEST(SsmDecoders, ScanChoiceDoesNotChangeTheOutput) {
  torch::manual_seed(2);
  auto opts = SsmOptions::s5_maze();
  opts.input_dim = 10;
  opts.d_model = 16;
  opts.state_dim = 16;
  opts.n_layers = 2;
  auto model = make_ssm_model(opts);
  model->eval();
  auto x = torch::randn({3, 140, 10});
  auto par = model->forward(x, 0);
  model->set_scan(ScanKind::kSequential);
  auto seq = model->forward(x, 0);
  EXPECT_LE((par - seq).abs().max().item<double>(), 1e-5);
}

TEST(SsmDecoders, SsmParametersAreSplitFromWeightDecay) {
  auto opts = SsmOptions::s5_maze();
  opts.n_layers = 2;
  S5Decoder model(opts);
  auto [decay, no_decay] = split_weight_decay_parameters(*model);
  EXPECT_EQ(no_decay.size(), 6u);  // Lambda_re, Lambda_im, log_step per layer
  EXPECT_EQ(decay.size() + no_decay.size(), model->parameters().size());
  for (const auto& p : no_decay) EXPECT_EQ(p.dim(), 1);
}

TEST(SsmDecoders, OptionErrorsNameKeyAndValue) {
  try {
    parse_enum<SsmVariant>("s4", "model.variant");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "model.variant = \"s4\" is not allowed; expected one of s5_maze, foundational"),
              std::string::npos)
        << e.what();
  }
  auto opts = SsmOptions::foundational();
  opts.context_dim = 128;
  try {
    opts.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.context_dim = 128 must be < model.d_model = 128"),
              std::string::npos)
        << e.what();
  }
  opts = SsmOptions::s5_maze();
  opts.ssm_blocks = 3;
  EXPECT_THROW(opts.validate(), Error);  // state_dim 64 is not divisible into 3 HiPPO blocks
  EXPECT_EQ(parse_enum<Discretization>("bilinear", "model.discretization"), Discretization::kBilinear);
  EXPECT_THROW(parse_enum<Discretization>("euler", "model.discretization"), Error);
}

TEST(SsmDecoders, R2IsOneForPerfectAndZeroForMeanPrediction) {
  auto t = torch::randn({4, 30, 2});
  EXPECT_NEAR(r2_score(t, t).item<double>(), 1.0, 1e-9);
  auto mean = t.reshape({-1, 2}).mean(0).expand({4, 30, 2});
  EXPECT_NEAR(r2_score(mean, t).item<double>(), 0.0, 1e-6);
  // Averaged per dim: one perfect dim and one mean-predicted dim give 0.5.
  auto half = torch::stack({t.select(2, 0), mean.select(2, 1)}, 2);
  EXPECT_NEAR(r2_score(half, t).item<double>(), 0.5, 1e-6);
}

// Tiny reaching-like data: rotational latent dynamics → Poisson spikes → Gaussian-smoothed
// inputs; the target (velocity) is a linear readout of the latent.
std::pair<torch::Tensor, torch::Tensor> tiny_reaching(int64_t trials, int64_t T, int64_t units) {
  torch::manual_seed(7);
  auto theta = torch::rand({trials}) * 2 * M_PI;
  auto z = torch::stack(
      {torch::cos(theta), torch::sin(theta), 0.5 * torch::cos(theta), -0.5 * torch::sin(theta)}, 1);
  auto rot = [](double w) {
    return torch::tensor({{std::cos(w), -std::sin(w)}, {std::sin(w), std::cos(w)}}) * 0.995;
  };
  auto R = torch::zeros({4, 4});
  R.slice(0, 0, 2).slice(1, 0, 2).copy_(rot(2 * M_PI / 60));
  R.slice(0, 2, 4).slice(1, 2, 4).copy_(rot(2 * M_PI / 25));
  std::vector<torch::Tensor> zs;
  for (int64_t t = 0; t < T; ++t) {
    zs.push_back(z);
    z = torch::matmul(z, R.t());
  }
  auto Z = torch::stack(zs, 1);  // [N, T, 4]
  auto W = torch::randn({units, 4}) * 0.8;
  auto rates = torch::exp(std::log(0.4) + torch::matmul(Z, W.t()));
  auto spikes = torch::poisson(rates);
  // Gaussian smoothing along time, σ = 4 bins.
  auto k = torch::arange(-12, 13, torch::kFloat32);
  auto kern = torch::exp(-0.5 * (k / 4).pow(2));
  kern = (kern / kern.sum()).view({1, 1, -1}).repeat({units, 1, 1});
  auto smoothed = torch::conv1d(spikes.transpose(1, 2), kern, {}, 1, 12, 1, units).transpose(1, 2);
  auto M = torch::randn({2, 4});
  auto vel = torch::matmul(Z, M.t());
  return {smoothed.contiguous(), vel.contiguous()};
}

TEST(SsmTraining, TinyS5FitsSyntheticReachingData) {
  torch::set_num_threads(1);
  auto [x, y] = tiny_reaching(32, 80, 24);
  torch::manual_seed(11);
  auto opts = SsmOptions::s5_maze();
  opts.input_dim = 24;
  opts.d_model = 16;
  opts.state_dim = 16;
  opts.dropout = 0.0;
  S5Decoder model(opts);
  auto [decay, no_decay] = split_weight_decay_parameters(*model);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(3e-3).weight_decay(0.01)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(3e-3).weight_decay(0.0)));
  torch::optim::AdamW opt(groups, torch::optim::AdamWOptions(3e-3));
  model->eval();
  const double r2_before = r2_score(model->forward(x, 0).detach(), y).item<double>();
  model->train();
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    auto loss = torch::mse_loss(model->forward(x, 0), y);
    loss.backward();
    opt.step();
  }
  model->eval();
  torch::NoGradGuard ng;
  const double r2 = r2_score(model->forward(x, 0), y).item<double>();
  EXPECT_GT(r2, 0.5);
  EXPECT_LT(r2_before, 0.5);
}

}  // namespace
}  // namespace rt::ssm
