// The residual vector quantiser against the real RAVE's (rave/quantization.py): golden
// rave_rvq, written by tests/oracle/rave_oracle.py in float64 with every random index RAVE drew
// (its randint/randperm calls) on a tape, which is replayed here in order. Two training calls:
// k-means initialisation, lookup, dead-code replacement and EMA, then the same on the moved
// codes; outputs, indices, commitment losses, gradients and every buffer must match. Then eval
// mode's encode and decode.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <deque>
#include <string>

#include "models/rave/quantization.h"
#include "support/golden.h"

namespace {

using rt::testing::Golden;
using rt::testing::load_golden;
using rt::testing::relative_to_max;

constexpr double kRel = 1e-12;

// RAVE's draws, handed back in the order it made them.
rt::rave::IndexSource replay(const Golden& g, std::deque<torch::Tensor>& draws, int64_t& used) {
  const auto n = g.manifest.at("draw_kinds").size();
  for (size_t i = 0; i < n; ++i) draws.push_back(g.at("input:draw." + std::to_string(i)).to(torch::kLong));
  return [&draws, &used](int64_t n_frames, int64_t count) {
    EXPECT_FALSE(draws.empty()) << "the quantiser draws more indices than RAVE's did";
    if (draws.empty()) return rt::rave::rave_sample_indices(n_frames, count);
    auto d = draws.front();
    draws.pop_front();
    ++used;
    // randperm(n)[:count] or randint(0, n, (count,)), as sample_vectors chooses.
    EXPECT_EQ(d.size(0), n_frames >= count ? n_frames : count);
    return n_frames >= count ? d.narrow(0, 0, count) : d;
  };
}

void expect_matches_golden(const torch::Tensor& ours, const torch::Tensor& ref, const std::string& what) {
  ASSERT_EQ(ours.sizes(), ref.sizes()) << what;
  EXPECT_LE(relative_to_max(ours.detach().to(torch::kFloat64), ref), kRel) << what;
}

rt::rave::ResidualVectorQuantization make(const Golden& g) {
  rt::rave::ResidualVectorQuantization rvq(g.manifest.at("num_quantizers").get<int64_t>(),
                                           g.manifest.at("dim").get<int64_t>(),
                                           g.manifest.at("codebook_size").get<int64_t>());
  rvq->to(torch::kFloat64);
  return rvq;
}

TEST(RaveQuantization, TrainingCallsMatchTheRealRavesQuantiser) {
  const auto g = load_golden("rave_rvq");
  auto rvq = make(g);
  rvq->train();
  std::deque<torch::Tensor> draws;
  int64_t used = 0;
  rvq->set_sample_indices(replay(g, draws, used));
  // Before the first call every codebook waits for k-means (RAVE's kmeans_init).
  for (const auto& b : rvq->named_buffers()) {
    if (b.key().find("inited") != std::string::npos) {
      EXPECT_EQ(b.value().item<double>(), 0.0) << b.key();
    }
  }
  for (int call = 0; call < 2; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    const std::string c = "call" + std::to_string(call);
    const auto z = g.at("input:" + c + ".z").clone().requires_grad_(true);
    auto [q, loss, indices] = rvq->forward(z);
    EXPECT_TRUE(torch::equal(indices, g.at("output:" + c + ".indices").to(torch::kLong))) << "indices";
    expect_matches_golden(q, g.at("output:" + c + ".quantized"), "quantized");
    const double ref_loss = g.manifest.at("calls").at(call).at("loss").get<double>();
    EXPECT_NEAR(loss.item<double>(), ref_loss, 1e-12 * std::max(1.0, std::abs(ref_loss)));
    ((q * g.at("input:" + c + ".probe")).sum() + loss).backward();
    expect_matches_golden(z.grad(), g.at("grad:" + c + ".z"), "gradient");
    for (const auto& b : rvq->named_buffers()) {
      expect_matches_golden(b.value(), g.at("buffer:" + c + "." + b.key()), b.key());
    }
    EXPECT_EQ(used,
              static_cast<int64_t>(g.manifest.at("calls").at(call).at("draws").back().get<int64_t>() + 1))
        << "the quantiser drew a different number of index sets than RAVE's";
  }
  EXPECT_TRUE(draws.empty());
}

TEST(RaveQuantization, EvalModeEncodesAndDecodesAsRavesAndChangesNothing) {
  const auto g = load_golden("rave_rvq");
  auto rvq = make(g);
  // The codebooks as RAVE's stood after its two training calls.
  {
    torch::NoGradGuard no_grad;
    for (auto& b : rvq->named_buffers()) b.value().copy_(g.at("buffer:call1." + b.key()));
  }
  rvq->eval();
  const auto z = g.at("input:encode.z");
  const auto indices = rvq->encode(z);
  EXPECT_TRUE(torch::equal(indices, g.at("output:encode.indices").to(torch::kLong)));
  expect_matches_golden(rvq->decode(indices), g.at("output:decode"), "decode");
  // forward in eval mode: the same codes, a zero loss, no buffer moved.
  auto [q, loss, fwd_indices] = rvq->forward(z);
  EXPECT_TRUE(torch::equal(fwd_indices, indices));
  expect_matches_golden(q, g.at("output:decode"), "eval forward");
  EXPECT_EQ(loss.item<double>(), 0.0);
  for (const auto& b : rvq->named_buffers())
    expect_matches_golden(b.value(), g.at("buffer:call1." + b.key()), b.key());
}

// The check can fail: with its own random draws instead of RAVE's, the k-means initialisation
// starts elsewhere and the codebooks differ.
TEST(RaveQuantization, OtherDrawsGiveOtherCodebooks) {
  const auto g = load_golden("rave_rvq");
  auto rvq = make(g);
  rvq->train();
  torch::manual_seed(1234);
  rvq->forward(g.at("input:call0.z"));
  const auto embed = rvq->named_buffers()["layers.0._codebook.embed"];
  EXPECT_GT(relative_to_max(embed, g.at("buffer:call0.layers.0._codebook.embed")), 1e-3);
}

}  // namespace
