// RAVE's EMA callback (training/ema.h): the update rule, the swap validation uses, and a RAVE run
// that keeps the averages in its checkpoint and resumes them.
#include "training/ema.h"

#include <gtest/gtest.h>

#include "support/expect.h"
#include "support/golden.h"
#include "util/error.h"

namespace rt {
namespace {

struct Two : torch::nn::Module {
  Two() {
    a = register_parameter("a", torch::tensor({1.0, 2.0}));
    lin = register_module("lin", torch::nn::Linear(2, 1));
  }
  torch::Tensor a;
  torch::nn::Linear lin{nullptr};
};

TEST(Ema, FirstBatchCopiesThenAveragesAsRavesCallback) {
  Two m;
  ParameterEma ema(0.9);
  EXPECT_TRUE(ema.empty());
  ema.update(m);
  ASSERT_EQ(ema.weights().size(), 3u);  // a, lin.weight, lin.bias: every parameter
  EXPECT_TRUE(torch::equal(ema.weights().at("a"), m.a));
  {
    torch::NoGradGuard g;
    m.a.copy_(torch::tensor({11.0, 12.0}));
  }
  ema.update(m);
  // 1·0.9 + 11·0.1 = 2.0, 2·0.9 + 12·0.1 = 3.0
  EXPECT_TRUE(torch::allclose(ema.weights().at("a"), torch::tensor({2.0f, 3.0f}), 0, 1e-6));
  // The averages are copies: changing the parameter leaves them.
  {
    torch::NoGradGuard g;
    m.a.fill_(0);
  }
  EXPECT_TRUE(torch::allclose(ema.weights().at("a"), torch::tensor({2.0f, 3.0f}), 0, 1e-6));
}

TEST(Ema, SwapForAScopeAndBack) {
  Two m;
  ParameterEma ema(0.5);
  ema.update(m);
  {
    torch::NoGradGuard g;
    m.a.copy_(torch::tensor({3.0, 4.0}));
  }
  ema.update(m);  // averages (2, 3)
  {
    EmaSwap scope(&ema, m);
    EXPECT_TRUE(torch::equal(m.a, torch::tensor({2.0f, 3.0f})));
  }
  EXPECT_TRUE(torch::equal(m.a, torch::tensor({3.0f, 4.0f})));
  EXPECT_TRUE(torch::equal(ema.weights().at("a"), torch::tensor({2.0f, 3.0f})));
  ParameterEma none(0.5);
  { EmaSwap nothing(&none, m); }  // no averages yet: validation runs on the weights
  EXPECT_TRUE(torch::equal(m.a, torch::tensor({3.0f, 4.0f})));
  EXPECT_HAS(testing::error_of([] { ParameterEma bad(1.0); }), "train.ema = 1");
}

// Against RAVE's own EMA callback (golden rave_ema, scripts/train.py's EMA through
// tests/oracle/rave_oracle.py): the same module moved by the same steps, the averages after
// each batch, the parameters during the validation swap and after it.
TEST(Ema, FollowsRavesOwnCallback) {
  const auto g = testing::load_golden("rave_ema");
  torch::nn::Sequential m(torch::nn::Linear(3, 2), torch::nn::Conv1d(2, 2, 3));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : m->named_parameters()) p.value().copy_(g.at("input:initial." + p.key()));
  }
  ParameterEma ema(g.manifest.at("factor").get<double>());
  for (int64_t b = 0; b < g.manifest.at("batches").get<int64_t>(); ++b) {
    {
      torch::NoGradGuard no_grad;
      for (auto& p : m->named_parameters())
        p.value().add_(g.at("input:step" + std::to_string(b) + "." + p.key()));
    }
    ema.update(*m);
    for (const auto& [name, average] : ema.weights()) {
      EXPECT_TRUE(
          torch::allclose(average, g.at("output:average" + std::to_string(b) + "." + name), 1e-6, 1e-7))
          << "batch " << b << ", " << name;
    }
  }
  {
    EmaSwap validation(&ema, *m);
    for (const auto& p : m->named_parameters()) {
      EXPECT_TRUE(torch::allclose(p.value(), g.at("output:validation." + p.key()), 1e-6, 1e-7)) << p.key();
    }
  }
  for (const auto& p : m->named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value(), g.at("output:after." + p.key()))) << p.key();
  }
}

}  // namespace
}  // namespace rt
